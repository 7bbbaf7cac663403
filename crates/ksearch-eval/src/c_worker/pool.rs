//! A pool: a workload's input sets in memory the judge shares read-only with every runner, and
//! the judge's view of one runner's output slots.

use std::os::fd::OwnedFd;

use ksearch_core::Dtype;
use ksearch_core::rng::Rng;
use ksearch_core::task::{Init, TaskSpec, Workload};

use super::link::{GUARD_BYTE, Layout, POISON_BYTE};
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
        let sizes = |tensors: &[ksearch_core::task::TensorSpec]| {
            tensors
                .iter()
                .map(|t| t.numel(&workload.axes) * t.dtype.size_bytes())
                .collect()
        };
        let layout = Layout::new(sets, sizes(&spec.inputs), sizes(&spec.outputs));
        let mut inputs = Shared::create("ksearch-inputs", layout.input_region())?;
        for s in 0..layout.sets {
            for t in 0..layout.input_sizes.len() {
                inputs.slice_mut(layout.input_slack(s, t)).fill(POISON_BYTE);
            }
        }
        // The guard pages hold NaN too: a runner may map its own view of one readable again
        // (`mprotect`), and then a read past an input's end finds NaN rather than numbers.
        for (off, len, _) in layout.input_guards() {
            inputs.slice_mut(off..off + len).fill(POISON_BYTE);
            inputs.no_access(off, len)?;
        }
        let inputs_ro = inputs.read_only_fd()?;
        inputs.seal()?;
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
                self.inputs.slice_mut(range),
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
        for set in 1..self.layout.sets {
            for t in 0..spec.inputs.len() {
                let (from, to) = (self.input_range(0, t), self.input_range(set, t));
                // SAFETY: two tensors of the same size inside the mapping, never overlapping.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.inputs.ptr().add(from.start),
                        self.inputs.ptr().add(to.start),
                        from.len(),
                    );
                }
            }
            let key = seed ^ (set as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
            self.perturb(spec, set, key, Stores::Cached);
        }
    }

    /// New values for every element of `set`'s inputs (see [`tensors::perturb`]).
    pub(crate) fn perturb(&mut self, spec: &TaskSpec, set: usize, key: u64, stores: Stores) {
        self.change_inputs(spec, set, key, |bytes, dtype, init, k| {
            tensors::perturb(bytes, dtype, init, k, stores);
        });
    }

    /// Undo [`Pool::perturb`] of `set` with the same `key` (perturbations undone in the reverse
    /// order give back the inputs they started from).
    pub(crate) fn unperturb(&mut self, spec: &TaskSpec, set: usize, key: u64) {
        self.change_inputs(spec, set, key, tensors::unperturb);
    }

    /// `change` applied to each of `set`'s inputs, with a key of its own derived from `key`.
    fn change_inputs(
        &mut self,
        spec: &TaskSpec,
        set: usize,
        key: u64,
        change: impl Fn(&mut [u8], Dtype, Init, u64),
    ) {
        for (t, tensor) in spec.inputs.iter().enumerate() {
            let range = self.input_range(set, t);
            change(
                self.inputs.slice_mut(range),
                tensor.dtype,
                tensor.init(),
                key.wrapping_add(t as u64)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15),
            );
        }
    }

    /// Where the input region starts in the judge's memory.
    pub(crate) fn input_base(&self) -> *const u8 {
        self.inputs.ptr()
    }

    /// Pointers to `set`'s inputs, for a kernel run in the judge (the reference).
    pub(crate) fn input_ptrs(&self, set: usize) -> Vec<*mut std::ffi::c_void> {
        (0..self.layout.input_sizes.len())
            // SAFETY: the offset lies inside the mapping.
            .map(|t| unsafe { self.inputs.ptr().add(self.layout.input(set, t)) }.cast())
            .collect()
    }

    /// What byte `offset` of the input region is: inside an input, or in the guard page after
    /// one (an access past its end).
    pub(crate) fn input_at(&self, spec: &TaskSpec, offset: usize) -> Option<InputPlace> {
        (0..self.layout.sets).find_map(|s| {
            (0..spec.inputs.len()).find_map(|t| {
                let name = || spec.inputs[t].name.clone();
                let r = self.input_range(s, t);
                let (guard, len) = self.layout.input_guard(s, t);
                if r.start <= offset && offset < guard {
                    Some(InputPlace::Inside(name()))
                } else if guard <= offset && offset < guard + len {
                    Some(InputPlace::Past(name()))
                } else {
                    None
                }
            })
        })
    }
}

/// Where an invalid access to the inputs landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InputPlace {
    /// Inside this input (or the bytes after it, before its guard page): a write, since inputs
    /// are read-only.
    Inside(String),
    /// In the guard page after this input: an access past its end.
    Past(String),
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
