//! Tensor buffers for candidate calls: 64-byte aligned, with guard zones on both sides so a
//! kernel that writes out of bounds is caught, filled with seeded random values, and poisoned
//! (all bits set: NaN for floats) before every checked call.

use std::alloc::{Layout, alloc, dealloc};

use ksearch_core::Dtype;
use ksearch_core::rng::Rng;
use ksearch_core::task::{Init, TensorSpec};

const ALIGN: usize = 64;
const GUARD: usize = 64;
const GUARD_BYTE: u8 = 0xA5;
const POISON_BYTE: u8 = 0xFF;

/// A dense tensor in a guarded allocation.
#[derive(Debug)]
pub(crate) struct Buffer {
    ptr: *mut u8,
    layout: Layout,
    pub(crate) len: usize,
    pub(crate) dtype: Dtype,
}

impl Buffer {
    pub(crate) fn new(dtype: Dtype, len: usize) -> Self {
        let bytes = len * dtype.size_bytes();
        let layout =
            Layout::from_size_align(bytes + 2 * GUARD, ALIGN).expect("tensor size fits a layout");
        // SAFETY: the layout has non-zero size (the guards).
        let ptr = unsafe { alloc(layout) };
        assert!(!ptr.is_null(), "out of memory allocating {bytes} bytes");
        // SAFETY: ptr points to layout.size() writable bytes.
        unsafe { std::ptr::write_bytes(ptr, GUARD_BYTE, layout.size()) };
        Self {
            ptr,
            layout,
            len,
            dtype,
        }
    }

    pub(crate) fn byte_len(&self) -> usize {
        self.len * self.dtype.size_bytes()
    }

    /// The pointer handed to the kernel.
    pub(crate) fn data_ptr(&self) -> *mut u8 {
        // SAFETY: GUARD < layout size.
        unsafe { self.ptr.add(GUARD) }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the data region lies inside the allocation and is initialised.
        unsafe { std::slice::from_raw_parts(self.data_ptr(), self.byte_len()) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and we hold &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.data_ptr(), self.byte_len()) }
    }

    pub(crate) fn guards_intact(&self) -> bool {
        // SAFETY: both guard zones lie inside the allocation.
        let (before, after) = unsafe {
            (
                std::slice::from_raw_parts(self.ptr, GUARD),
                std::slice::from_raw_parts(self.data_ptr().add(self.byte_len()), GUARD),
            )
        };
        before.iter().chain(after).all(|&b| b == GUARD_BYTE)
    }

    pub(crate) fn poison(&mut self) {
        self.bytes_mut().fill(POISON_BYTE);
    }

    /// Fill with values drawn from `init`; never left as zeros.
    pub(crate) fn fill(&mut self, init: Init, rng: &mut Rng) {
        let dtype = self.dtype;
        let bytes = self.bytes_mut();
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
            Dtype::F16 | Dtype::Bf16 => {
                unreachable!("task validation keeps {dtype} out of the c backend")
            }
        }
    }

    /// Element `i` as f64.
    pub(crate) fn get(&self, i: usize) -> f64 {
        let b = self.bytes();
        match self.dtype {
            Dtype::F32 => {
                f32::from_ne_bytes(b[4 * i..4 * i + 4].try_into().expect("4 bytes")) as f64
            }
            Dtype::F64 => f64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes")),
            Dtype::I32 => {
                i32::from_ne_bytes(b[4 * i..4 * i + 4].try_into().expect("4 bytes")) as f64
            }
            Dtype::I64 => {
                i64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes")) as f64
            }
            Dtype::F16 | Dtype::Bf16 => unreachable!("not in the c backend"),
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

// SAFETY: a Buffer owns its allocation exclusively.
unsafe impl Send for Buffer {}

/// Buffers for every input and output of one call.
#[derive(Debug)]
pub(crate) struct CallBuffers {
    pub(crate) inputs: Vec<Buffer>,
    pub(crate) outputs: Vec<Buffer>,
}

impl CallBuffers {
    /// Inputs filled from `seed` (one independent stream per input), outputs poisoned.
    pub(crate) fn new(
        inputs: &[TensorSpec],
        outputs: &[TensorSpec],
        axes: &std::collections::BTreeMap<String, i64>,
        seed: u64,
        workload: &str,
    ) -> Self {
        let inputs = inputs
            .iter()
            .map(|t| {
                let mut b = Buffer::new(t.dtype, t.numel(axes));
                b.fill(t.init(), &mut Rng::for_stream(seed, &[workload, &t.name]));
                b
            })
            .collect();
        let outputs = outputs
            .iter()
            .map(|t| {
                let mut b = Buffer::new(t.dtype, t.numel(axes));
                b.poison();
                b
            })
            .collect();
        Self { inputs, outputs }
    }

    /// Fresh poisoned outputs shaped like `self`'s.
    pub(crate) fn fresh_outputs(&self) -> Vec<Buffer> {
        self.outputs
            .iter()
            .map(|o| {
                let mut b = Buffer::new(o.dtype, o.len);
                b.poison();
                b
            })
            .collect()
    }

    /// Pointers in call order: inputs then outputs.
    pub(crate) fn pointers(&self, outputs: &[Buffer]) -> Vec<*mut std::ffi::c_void> {
        self.inputs
            .iter()
            .chain(outputs)
            .map(|b| b.data_ptr().cast())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_catch_a_write_past_the_end() {
        let mut b = Buffer::new(Dtype::F32, 10);
        b.fill(Init::Uniform([1.0, 2.0]), &mut Rng::new(3));
        assert!(b.guards_intact());
        assert!((1.0..2.0).contains(&b.get(9)));
        // SAFETY: the byte after the data is inside the guard zone of the allocation.
        unsafe { *b.data_ptr().add(b.byte_len()) = 0 };
        assert!(!b.guards_intact());
    }

    #[test]
    fn poison_is_nan_for_floats() {
        let mut b = Buffer::new(Dtype::F64, 4);
        b.poison();
        assert!(b.get(0).is_nan());
        let mut f = Buffer::new(Dtype::F32, 4);
        f.poison();
        assert!(f.get(3).is_nan());
    }
}
