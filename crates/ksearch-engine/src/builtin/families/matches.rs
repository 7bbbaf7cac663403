//! Whether a task is a family's (for [`Family::matches`](super::Family::matches)): its name,
//! axes and tensors.

use ksearch_core::Dtype;
use ksearch_core::task::{BackendKind, TaskSpec};

/// Whether a task tensor has this name, shape and dtype.
pub(crate) fn tensor_is(
    t: &ksearch_core::task::TensorSpec,
    name: &str,
    shape: &[&str],
    dtype: Dtype,
) -> bool {
    t.name == name
        && t.dtype == dtype
        && t.shape.iter().map(String::as_str).eq(shape.iter().copied())
}

/// Whether `spec` is a `c` task with this name, axes, inputs and outputs (all f32).
pub(crate) fn spec_is(
    spec: &TaskSpec,
    name: &str,
    axes: &[&str],
    inputs: &[(&str, &[&str])],
    outputs: &[(&str, &[&str])],
) -> bool {
    let same = |ts: &[ksearch_core::task::TensorSpec], want: &[(&str, &[&str])]| {
        ts.len() == want.len()
            && ts
                .iter()
                .zip(want)
                .all(|(t, (n, s))| tensor_is(t, n, s, Dtype::F32))
    };
    spec.name == name
        && spec.backend == BackendKind::C
        && spec
            .axes
            .iter()
            .map(String::as_str)
            .eq(axes.iter().copied())
        && same(&spec.inputs, inputs)
        && same(&spec.outputs, outputs)
}
