//! A pool: a workload's input sets in memory the judge shares read-only with every runner, and
//! the judge's view of one runner's output slots.

use std::os::fd::OwnedFd;

use ksearch_core::Dtype;
use ksearch_core::rng::Rng;
use ksearch_core::task::{TaskSpec, Workload};

use super::link::{GUARD_BYTE, Layout};
use super::tensors::{self, Stores};
use crate::shm::Shared;

#[derive(Debug)]
pub(crate) struct Pool {
    pub(crate) id: u32,
    pub(crate) layout: Layout,
    pub(crate) axes: Vec<i64>,
    inputs: Shared,
    pub(crate) inputs_ro: OwnedFd,
}

impl Pool {
    pub(crate) fn new(
        id: u32,
        spec: &TaskSpec,
        workload: &Workload,
        sets: usize,
    ) -> std::io::Result<Pool> {
        let layout = Layout {
            sets,
            input_sizes: spec
                .inputs
                .iter()
                .map(|t| t.numel(&workload.axes) * t.dtype.size_bytes())
                .collect(),
            output_sizes: spec
                .outputs
                .iter()
                .map(|t| t.numel(&workload.axes) * t.dtype.size_bytes())
                .collect(),
        };
        let inputs = Shared::create("ksearch-inputs", layout.input_region())?;
        let inputs_ro = inputs.read_only_fd()?;
        Ok(Pool {
            id,
            axes: spec.axes.iter().map(|a| workload.axes[a]).collect(),
            layout,
            inputs,
            inputs_ro,
        })
    }

    fn input_range(&self, set: usize, t: usize) -> std::ops::Range<usize> {
        let off = self.layout.input(set, t);
        off..off + self.layout.input_sizes[t]
    }

    /// Fresh inputs for `set` from `seed`, one independent stream per input.
    pub(crate) fn fill(&mut self, spec: &TaskSpec, workload: &str, set: usize, seed: u64) {
        for (t, tensor) in spec.inputs.iter().enumerate() {
            let range = self.input_range(set, t);
            tensors::fill(
                &mut self.inputs.bytes_mut()[range],
                tensor.dtype,
                tensor.init(),
                &mut Rng::for_stream(seed, &[workload, &tensor.name]),
            );
        }
    }

    /// Inputs for every set: the first from `seed`, each other a copy of it with every element
    /// changed (as between timed calls), which is much faster than drawing each set afresh.
    pub(crate) fn fill_all(&mut self, spec: &TaskSpec, workload: &str, seed: u64) {
        self.fill(spec, workload, 0, seed);
        let first = self.layout.input(0, 0)..self.layout.input(1, 0);
        for set in 1..self.layout.sets {
            let at = self.layout.input(set, 0);
            self.inputs.bytes_mut().copy_within(first.clone(), at);
            let key = seed ^ (set as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
            self.perturb(spec, set, key, Stores::Cached);
        }
    }

    /// New values for every element of `set`'s inputs (see [`tensors::perturb`]).
    pub(crate) fn perturb(&mut self, spec: &TaskSpec, set: usize, key: u64, stores: Stores) {
        for (t, tensor) in spec.inputs.iter().enumerate() {
            let range = self.input_range(set, t);
            tensors::perturb(
                &mut self.inputs.bytes_mut()[range],
                tensor.dtype,
                tensor.init(),
                key.wrapping_add(t as u64)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15),
                stores,
            );
        }
    }

    /// Pointers to `set`'s inputs, for a kernel run in the judge (the reference).
    pub(crate) fn input_ptrs(&self, set: usize) -> Vec<*mut std::ffi::c_void> {
        (0..self.layout.input_sizes.len())
            // SAFETY: the offset lies inside the mapping.
            .map(|t| unsafe { self.inputs.ptr().add(self.layout.input(set, t)) }.cast())
            .collect()
    }

    /// The input tensor holding byte `offset` of the region, if any, by name.
    pub(crate) fn input_at(&self, spec: &TaskSpec, offset: usize) -> Option<String> {
        (0..self.layout.sets).find_map(|s| {
            (0..spec.inputs.len()).find_map(|t| {
                let r = self.input_range(s, t);
                (r.start <= offset && offset < r.end.max(r.start + 1))
                    .then(|| spec.inputs[t].name.clone())
            })
        })
    }
}

/// The judge's view of one runner's outputs in a pool.
pub(crate) struct Slots<'a> {
    pub(crate) layout: &'a Layout,
    pub(crate) region: &'a mut Shared,
}

impl Slots<'_> {
    pub(crate) fn output(&self, slot: usize, t: usize) -> &[u8] {
        let off = self.layout.output(slot, t);
        &self.region.bytes()[off..off + self.layout.output_sizes[t]]
    }

    /// Poison every output of `slot` and restore its guard zones.
    pub(crate) fn poison(&mut self, slot: usize, stores: Stores) {
        let layout = self.layout;
        let bytes = self.region.bytes_mut();
        for t in 0..layout.output_sizes.len() {
            let off = layout.output(slot, t);
            tensors::poison(&mut bytes[off..off + layout.output_sizes[t]], stores);
        }
        for (off, len) in layout.guards(slot) {
            bytes[off..off + len].fill(GUARD_BYTE);
        }
    }

    /// The name of an output of `slot` whose guard zone was written, if any.
    pub(crate) fn broken_guard(&self, slot: usize, names: &[String]) -> Option<String> {
        let bytes = self.region.bytes();
        self.layout
            .guards(slot)
            .iter()
            .enumerate()
            .find(|(_, (off, len))| bytes[*off..off + len].iter().any(|&b| b != GUARD_BYTE))
            .map(|(i, _)| names[i / 2].clone())
    }

    pub(crate) fn element(&self, slot: usize, t: usize, dtype: Dtype, i: usize) -> f64 {
        tensors::element(self.output(slot, t), dtype, i)
    }
}
