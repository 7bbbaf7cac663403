//! A small deterministic generator (xoshiro256**, seeded by SplitMix64) so that the inputs of a
//! seed are the same on every machine and every build, independent of any crate's versioning.

/// Deterministic pseudo-random numbers.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut st = seed;
        Self {
            s: [
                splitmix64(&mut st),
                splitmix64(&mut st),
                splitmix64(&mut st),
                splitmix64(&mut st),
            ],
        }
    }

    /// A generator for one named stream of a seed (e.g. one input of one workload), so that
    /// streams do not overlap and adding an input does not change the others.
    pub fn for_stream(seed: u64, parts: &[&str]) -> Self {
        // FNV-1a over the parts, mixed with the seed.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for p in parts {
            for b in p.bytes().chain(std::iter::once(0xff)) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        Self::new(seed ^ h.rotate_left(17))
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.next_f64()
    }

    /// Standard normal by Box–Muller.
    pub fn normal(&mut self, mean: f64, std: f64) -> f64 {
        let u1 = 1.0 - self.next_f64(); // (0, 1]
        let u2 = self.next_f64();
        mean + std * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Uniform integer in `[low, high]`.
    pub fn randint(&mut self, low: i64, high: i64) -> i64 {
        let span = (high as i128 - low as i128 + 1) as u128;
        low + (u128::from(self.next_u64()) % span) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_different_parts_differ() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::for_stream(7, &["w", "x"]);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::for_stream(7, &["w", "x"]);
                move |_| r.next_u64()
            })
            .collect();
        let c: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::for_stream(7, &["w", "y"]);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn ranges_are_respected_and_values_spread() {
        let mut r = Rng::new(1);
        let xs: Vec<f64> = (0..10_000).map(|_| r.uniform(-2.0, 3.0)).collect();
        assert!(xs.iter().all(|&x| (-2.0..3.0).contains(&x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 0.5).abs() < 0.1, "mean {mean}");
        let ints: Vec<i64> = (0..1000).map(|_| r.randint(-3, 3)).collect();
        assert!(ints.iter().all(|&i| (-3..=3).contains(&i)));
        assert!(ints.contains(&-3) && ints.contains(&3));
        let ns: Vec<f64> = (0..10_000).map(|_| r.normal(1.0, 2.0)).collect();
        let m = ns.iter().sum::<f64>() / ns.len() as f64;
        let v = ns.iter().map(|x| (x - m).powi(2)).sum::<f64>() / ns.len() as f64;
        assert!(
            (m - 1.0).abs() < 0.1 && (v.sqrt() - 2.0).abs() < 0.1,
            "{m} {v}"
        );
    }
}
