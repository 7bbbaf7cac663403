//! Tensor data as bytes: filling inputs from a seed, changing them between timed calls, poisoning
//! outputs, reading elements. Everything here works on plain byte slices, whether they lie in
//! the judge's own memory or in memory shared with a runner.

use ksearch_core::Dtype;
use ksearch_core::rng::Rng;
use ksearch_core::task::Init;

pub(crate) use super::link::POISON_BYTE;

/// Element `i` of `bytes` (a dense tensor of `dtype`) as f64.
pub(crate) fn element(bytes: &[u8], dtype: Dtype, i: usize) -> f64 {
    let at = |n: usize| &bytes[n * i..n * i + n];
    match dtype {
        Dtype::F32 => f32::from_ne_bytes(at(4).try_into().expect("4 bytes")) as f64,
        Dtype::F64 => f64::from_ne_bytes(at(8).try_into().expect("8 bytes")),
        Dtype::I32 => i32::from_ne_bytes(at(4).try_into().expect("4 bytes")) as f64,
        Dtype::I64 => i64::from_ne_bytes(at(8).try_into().expect("8 bytes")) as f64,
        Dtype::F16
        | Dtype::Bf16
        | Dtype::F8e4m3
        | Dtype::F8e5m2
        | Dtype::I8
        | Dtype::I16
        | Dtype::Bool => {
            unreachable!("task validation keeps {dtype} out of the c backend")
        }
    }
}

/// Fill with values drawn from `init`; never left as zeros.
pub(crate) fn fill(bytes: &mut [u8], dtype: Dtype, init: Init, rng: &mut Rng) {
    let draw = |rng: &mut Rng| -> f64 {
        match init {
            Init::Uniform([lo, hi]) => rng.uniform(lo, hi),
            Init::Normal([mean, std]) => rng.normal(mean, std),
            Init::Randint([lo, hi]) => rng.randint(lo, hi) as f64,
        }
    };
    match dtype {
        Dtype::F32 => bytes
            .chunks_exact_mut(4)
            .for_each(|c| c.copy_from_slice(&(draw(rng) as f32).to_ne_bytes())),
        Dtype::F64 => bytes
            .chunks_exact_mut(8)
            .for_each(|c| c.copy_from_slice(&draw(rng).to_ne_bytes())),
        Dtype::I32 => bytes
            .chunks_exact_mut(4)
            .for_each(|c| c.copy_from_slice(&(draw(rng) as i32).to_ne_bytes())),
        Dtype::I64 => bytes
            .chunks_exact_mut(8)
            .for_each(|c| c.copy_from_slice(&(draw(rng) as i64).to_ne_bytes())),
        Dtype::F16
        | Dtype::Bf16
        | Dtype::F8e4m3
        | Dtype::F8e5m2
        | Dtype::I8
        | Dtype::I16
        | Dtype::Bool => {
            unreachable!("task validation keeps {dtype} out of the c backend")
        }
    }
}

/// A cheap stateless hash of a counter, so that noise can be made in a vectorisable loop.
#[inline(always)]
fn mix32(x: u32) -> u32 {
    let mut x = x;
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

/// How the judge writes the inputs and outputs of a round: into the cache of the CPU it writes
/// from (a round that fits in the runner's cache, prepared on the runner's CPU), or, with AVX2,
/// around it (non-temporal stores, for a round too large to stay in any cache, so that it waits
/// in memory rather than pushing the runner's data out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stores {
    Cached,
    Streaming,
}

/// `words[i] ^= noise(i)`, eight at a time where the CPU has AVX2 (the judge rewrites every
/// input of a round with this, so it should run at memory speed).
fn xor_noise(words: &mut [u32], k: u32, stores: Stores) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        match stores {
            Stores::Cached => unsafe { xor_noise_avx2::<false>(words, k) },
            Stores::Streaming => unsafe { xor_noise_avx2::<true>(words, k) },
        }
        return;
    }
    let _ = stores;
    xor_noise_from(words, 0, k);
}

#[inline(always)]
fn xor_noise_from(words: &mut [u32], first: u32, k: u32) {
    for (i, w) in words.iter_mut().enumerate() {
        *w ^= mix32(first.wrapping_add(i as u32).wrapping_add(k)) & 0x000F_FFFF;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn xor_noise_avx2<const STREAM: bool>(words: &mut [u32], k: u32) {
    use std::arch::x86_64::*;
    // SAFETY: every bit pattern is a valid __m256i and a valid u32.
    let (head, body, tail) = unsafe { words.align_to_mut::<__m256i>() };
    xor_noise_from(head, 0, k);
    let first = head.len() as u32;
    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let mask = _mm256_set1_epi32(0x000F_FFFF);
    let (m1, m2) = (
        _mm256_set1_epi32(0x7feb_352d),
        _mm256_set1_epi32(0x846c_a68bu32 as i32),
    );
    for (j, v) in body.iter_mut().enumerate() {
        let at = first.wrapping_add(8 * j as u32).wrapping_add(k);
        // mix32 on eight counters at once.
        let mut x = _mm256_add_epi32(_mm256_set1_epi32(at as i32), lanes);
        x = _mm256_xor_si256(x, _mm256_srli_epi32::<16>(x));
        x = _mm256_mullo_epi32(x, m1);
        x = _mm256_xor_si256(x, _mm256_srli_epi32::<15>(x));
        x = _mm256_mullo_epi32(x, m2);
        x = _mm256_xor_si256(x, _mm256_srli_epi32::<16>(x));
        let out = _mm256_xor_si256(*v, _mm256_and_si256(x, mask));
        if STREAM {
            // SAFETY: `v` is an aligned element of the slice.
            unsafe { _mm256_stream_si256(v, out) };
        } else {
            *v = out;
        }
    }
    if STREAM {
        _mm_sfence();
    }
    xor_noise_from(tail, first.wrapping_add(8 * body.len() as u32), k);
}

/// Change every element to a value no earlier call has seen, in one cheap pass, keeping each
/// value's sign and binade (floats get fresh random low mantissa bits: up to ±12 % of the
/// value for f32) or its range (integers move by a random amount, wrapping inside `init`'s
/// range). A kernel can neither recognise the inputs of an earlier call nor update an earlier
/// answer cheaply, since every element differs, by more than any tolerance allows.
pub(crate) fn perturb(bytes: &mut [u8], dtype: Dtype, init: Init, key: u64, stores: Stores) {
    change(bytes, dtype, init, key, stores, false);
}

/// Undo [`perturb`] with the same `key`: the bytes it was given. (Flipping the same bits again
/// undoes a float's change; an integer moves back.)
pub(crate) fn unperturb(bytes: &mut [u8], dtype: Dtype, init: Init, key: u64) {
    change(bytes, dtype, init, key, Stores::Cached, true);
}

fn change(bytes: &mut [u8], dtype: Dtype, init: Init, key: u64, stores: Stores, back: bool) {
    let k = (key as u32) ^ ((key >> 32) as u32).rotate_left(13);
    let integer_range = match init {
        Init::Randint([lo, hi]) => Some((lo, hi)),
        _ => None,
    };
    match (dtype, integer_range) {
        (Dtype::F32, None) => {
            let noise = |i: usize| mix32((i as u32).wrapping_add(k)) & 0x000F_FFFF;
            // SAFETY: every bit pattern is a valid u32.
            match unsafe { bytes.align_to_mut::<u32>() } {
                // Aligned (shared memory always is): a loop the compiler vectorises.
                ([], words, []) => xor_noise(words, k, stores),
                _ => {
                    for (i, c) in bytes.chunks_exact_mut(4).enumerate() {
                        let v = u32::from_ne_bytes(c.try_into().expect("4 bytes"));
                        c.copy_from_slice(&(v ^ noise(i)).to_ne_bytes());
                    }
                }
            }
        }
        (Dtype::F64, None) => {
            for (i, c) in bytes.chunks_exact_mut(8).enumerate() {
                let v = u64::from_ne_bytes(c.try_into().expect("8 bytes"));
                let hi = u64::from(mix32((2 * i as u32).wrapping_add(k)));
                let lo = u64::from(mix32((2 * i as u32 + 1).wrapping_add(k)));
                let noise = ((hi << 32) | lo) & 0x0001_FFFF_FFFF_FFFF;
                c.copy_from_slice(&(v ^ noise).to_ne_bytes());
            }
        }
        (_, range) => {
            let (lo, hi) = range.unwrap_or((-100, 100));
            let span = (hi as i128 - lo as i128 + 1).max(1) as u128;
            let n = dtype.size_bytes();
            for i in 0..bytes.len() / n {
                let v = element(bytes, dtype, i) as i128;
                let mut step =
                    1 + u128::from(mix32((i as u32).wrapping_add(k))) % (span - 1).max(1);
                if back {
                    step = span - step % span;
                }
                let moved = (lo as i128) + ((v - lo as i128) as u128 + step) as i128 % span as i128;
                let c = &mut bytes[n * i..n * i + n];
                match dtype {
                    Dtype::I32 => c.copy_from_slice(&(moved as i32).to_ne_bytes()),
                    Dtype::I64 => c.copy_from_slice(&(moved as i64).to_ne_bytes()),
                    Dtype::F32 => c.copy_from_slice(&(moved as f32).to_ne_bytes()),
                    Dtype::F64 => c.copy_from_slice(&(moved as f64).to_ne_bytes()),
                    Dtype::F16
                    | Dtype::Bf16
                    | Dtype::F8e4m3
                    | Dtype::F8e5m2
                    | Dtype::I8
                    | Dtype::I16
                    | Dtype::Bool => unreachable!("not in the c backend"),
                }
            }
        }
    }
}

/// All bits set: NaN for floats, -1 for integers.
pub(crate) fn poison(bytes: &mut [u8], stores: Stores) {
    #[cfg(target_arch = "x86_64")]
    if stores == Stores::Streaming && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        unsafe { poison_avx2(bytes) };
        return;
    }
    bytes.fill(POISON_BYTE);
}

/// Poison with non-temporal stores (see [`Stores`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn poison_avx2(bytes: &mut [u8]) {
    use std::arch::x86_64::*;
    // SAFETY: every bit pattern is a valid __m256i and a valid u8.
    let (head, body, tail) = unsafe { bytes.align_to_mut::<__m256i>() };
    head.fill(POISON_BYTE);
    let p = _mm256_set1_epi8(POISON_BYTE as i8);
    for v in body.iter_mut() {
        // SAFETY: `v` is an aligned element of the slice.
        unsafe { _mm256_stream_si256(v, p) };
    }
    _mm_sfence();
    tail.fill(POISON_BYTE);
}

/// A guarded private buffer in the judge's own memory (expected outputs of the reference).
#[derive(Debug)]
pub(crate) struct Guarded {
    data: Vec<u8>,
    len: usize,
}

impl Guarded {
    const GUARD: usize = super::link::GUARD;

    pub(crate) fn poisoned(len: usize) -> Self {
        let mut data = vec![super::link::GUARD_BYTE; len + 2 * Self::GUARD + 64];
        let off = Self::offset(&data);
        data[off..off + len].fill(POISON_BYTE);
        Self { data, len }
    }

    /// Where the data starts: 64-byte aligned, after a guard.
    fn offset(data: &[u8]) -> usize {
        let start = data.as_ptr() as usize + Self::GUARD;
        Self::GUARD + (64 - start % 64) % 64
    }

    pub(crate) fn ptr(&mut self) -> *mut u8 {
        let off = Self::offset(&self.data);
        self.data[off..].as_mut_ptr()
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        let off = Self::offset(&self.data);
        &self.data[off..off + self.len]
    }

    pub(crate) fn guards_intact(&self) -> bool {
        let off = Self::offset(&self.data);
        self.data[..off]
            .iter()
            .chain(&self.data[off + self.len..])
            .all(|&b| b == super::link::GUARD_BYTE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floats(bytes: &[u8]) -> Vec<f32> {
        (0..bytes.len() / 4)
            .map(|i| element(bytes, Dtype::F32, i) as f32)
            .collect()
    }

    #[test]
    fn perturbation_changes_every_float_but_keeps_sign_and_binade() {
        let mut b = vec![0u8; 4 * 1000];
        fill(
            &mut b,
            Dtype::F32,
            Init::Uniform([-3.0, 3.0]),
            &mut Rng::new(5),
        );
        let before = floats(&b);
        perturb(
            &mut b,
            Dtype::F32,
            Init::Uniform([-3.0, 3.0]),
            99,
            Stores::Cached,
        );
        let after = floats(&b);
        let changed = before.iter().zip(&after).filter(|(x, y)| x != y).count();
        assert!(changed > 990, "only {changed} of 1000 changed");
        for (x, y) in before.iter().zip(&after) {
            assert_eq!(x.signum(), y.signum());
            assert_eq!(x.abs().log2().floor(), y.abs().log2().floor(), "{x} → {y}");
        }
        let big = before
            .iter()
            .zip(&after)
            .filter(|(x, y)| ((*x - *y) / *x).abs() > 1e-3)
            .count();
        assert!(big > 900, "changes beyond any tolerance: {big} of 1000");
        // A different key gives different values.
        let mut c = b.clone();
        perturb(
            &mut c,
            Dtype::F32,
            Init::Uniform([-3.0, 3.0]),
            100,
            Stores::Streaming,
        );
        assert_ne!(b, c);
    }

    #[test]
    fn vectorised_noise_matches_the_plain_loop() {
        let mut a: Vec<u32> = (0..1000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let mut b = a.clone();
        let mut c = a.clone();
        // An unaligned start as well as the aligned one.
        xor_noise(&mut a[3..], 77, Stores::Cached);
        xor_noise(&mut c[3..], 77, Stores::Streaming);
        xor_noise_from(&mut b[3..], 0, 77);
        assert_eq!(a, b);
        assert_eq!(c, b);
        assert_ne!(
            a[3..],
            (3..1000u32)
                .map(|i| i.wrapping_mul(2_654_435_761))
                .collect::<Vec<_>>()[..]
        );
    }

    #[test]
    fn integer_perturbation_stays_in_range_and_changes_values() {
        let init = Init::Randint([3, 9]);
        let mut b = vec![0u8; 4 * 500];
        fill(&mut b, Dtype::I32, init, &mut Rng::new(1));
        let before: Vec<f64> = (0..500).map(|i| element(&b, Dtype::I32, i)).collect();
        perturb(&mut b, Dtype::I32, init, 7, Stores::Cached);
        for (i, x) in before.iter().enumerate() {
            let y = element(&b, Dtype::I32, i);
            assert!((3.0..=9.0).contains(&y), "{y}");
            assert_ne!(*x, y);
        }
    }

    /// The judge undoes a kept set's later perturbations, in reverse order, to get the inputs
    /// the kept call ran on back without having copied them.
    #[test]
    fn perturbations_undone_in_reverse_give_the_inputs_back() {
        let cases = [
            (Dtype::F32, Init::Uniform([-3.0, 3.0])),
            (Dtype::F64, Init::Normal([0.0, 1.0])),
            (Dtype::I32, Init::Randint([3, 9])),
            (Dtype::I64, Init::Randint([-100, 100])),
            (Dtype::F32, Init::Randint([0, 5])),
        ];
        for (dtype, init) in cases {
            let mut b = vec![0u8; dtype.size_bytes() * 999];
            fill(&mut b, dtype, init, &mut Rng::new(3));
            let before = b.clone();
            let keys = [5u64, 1 << 40, 77, 5];
            for (i, &k) in keys.iter().enumerate() {
                let stores = if i % 2 == 0 {
                    Stores::Cached
                } else {
                    Stores::Streaming
                };
                perturb(&mut b, dtype, init, k, stores);
            }
            assert!(b != before, "{dtype:?} {init:?}: unchanged");
            for &k in keys.iter().rev() {
                unperturb(&mut b, dtype, init, k);
            }
            assert!(b == before, "{dtype:?} {init:?}: not given back");
        }
    }

    #[test]
    fn guards_catch_a_write_past_the_end() {
        let mut g = Guarded::poisoned(40);
        assert!(g.guards_intact());
        assert_eq!(g.ptr() as usize % 64, 0);
        assert!(element(g.bytes(), Dtype::F32, 9).is_nan());
        // SAFETY: one byte past the data is still inside the guard.
        unsafe { *g.ptr().add(40) = 0 };
        assert!(!g.guards_intact());
    }
}
