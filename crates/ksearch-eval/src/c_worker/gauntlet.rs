//! The correctness gauntlet for one workload and seed: fresh random inputs, outputs poisoned,
//! the reference and the candidate run, then guards, inputs, finiteness, elementwise tolerance
//! and the norm-relative error checked.

use std::collections::BTreeMap;

use ksearch_core::protocol::ErrorStats;
use ksearch_core::task::{TaskSpec, TensorSpec, Tolerance, Workload};

use super::buffers::{Buffer, CallBuffers};
use super::kernel::Kernel;

/// Why a check could not be made at all: the task, not the candidate, is at fault.
#[derive(Debug)]
pub(crate) struct TaskFault(pub(crate) String);

/// The outcome of checking one seed.
#[derive(Debug)]
pub(crate) struct SeedCheck {
    pub(crate) errors: ErrorStats,
    /// `None` when the candidate passed.
    pub(crate) failure: Option<String>,
}

pub(crate) fn axis_values(spec: &TaskSpec, workload: &Workload) -> Vec<i64> {
    spec.axes.iter().map(|a| workload.axes[a]).collect()
}

/// Check `candidate` against `reference` on fresh inputs drawn from `seed`.
pub(crate) fn check_seed(
    spec: &TaskSpec,
    tolerances: &BTreeMap<ksearch_core::Dtype, Tolerance>,
    workload: &Workload,
    seed: u64,
    reference: &Kernel,
    candidate: &Kernel,
) -> Result<SeedCheck, TaskFault> {
    let axes = axis_values(spec, workload);
    let bufs = CallBuffers::new(
        &spec.inputs,
        &spec.outputs,
        &workload.axes,
        seed,
        &workload.name,
    );

    let expected = bufs.fresh_outputs();
    // SAFETY: buffers are sized from the task's shapes for these axes.
    unsafe { reference.call(&bufs.pointers(&expected), &axes) };
    for (t, b) in spec.outputs.iter().zip(&expected) {
        if !b.guards_intact() {
            return Err(TaskFault(format!(
                "the reference wrote outside output `{}`",
                t.name
            )));
        }
    }

    let snapshot: Vec<Vec<u8>> = bufs.inputs.iter().map(|b| b.bytes().to_vec()).collect();
    let got = bufs.fresh_outputs();
    // SAFETY: as above.
    unsafe { candidate.call(&bufs.pointers(&got), &axes) };

    let mut errors = ErrorStats {
        max_abs_err: 0.0,
        max_rel_err: 0.0,
        norm_rel_err: 0.0,
        seeds_checked: 1,
    };
    let fail = |errors, msg: String| {
        Ok(SeedCheck {
            errors,
            failure: Some(msg),
        })
    };
    for (t, b) in spec
        .inputs
        .iter()
        .zip(&bufs.inputs)
        .chain(spec.outputs.iter().zip(&got))
    {
        if !b.guards_intact() {
            return fail(errors, format!("wrote outside the bounds of `{}`", t.name));
        }
    }
    for ((t, b), before) in spec.inputs.iter().zip(&bufs.inputs).zip(&snapshot) {
        if let Some(i) = first_changed(t, b, before) {
            return fail(
                errors,
                format!(
                    "modified input `{}` (first at {}); inputs must not be written",
                    t.name,
                    index_name(t, &workload.axes, i)
                ),
            );
        }
    }
    let mut failure = None;
    for ((t, out), exp) in spec.outputs.iter().zip(&got).zip(&expected) {
        let tol = tolerances
            .get(&t.dtype)
            .copied()
            .unwrap_or_else(|| spec.tolerance_for(t.dtype));
        let c = compare(t, &workload.axes, out, exp, tol)?;
        errors.max_abs_err = errors.max_abs_err.max(c.max_abs);
        errors.max_rel_err = errors.max_rel_err.max(c.max_rel);
        errors.norm_rel_err = errors.norm_rel_err.max(c.norm_rel);
        if failure.is_none() {
            failure = c.failure;
        }
    }
    Ok(SeedCheck { errors, failure })
}

fn first_changed(t: &TensorSpec, b: &Buffer, before: &[u8]) -> Option<usize> {
    let size = t.dtype.size_bytes();
    b.bytes()
        .chunks_exact(size)
        .zip(before.chunks_exact(size))
        .position(|(x, y)| x != y)
}

/// `y[3][17]` for flat index `i` of tensor `t`.
fn index_name(t: &TensorSpec, axes: &BTreeMap<String, i64>, mut i: usize) -> String {
    let dims: Vec<usize> = t.shape.iter().map(|a| axes[a] as usize).collect();
    let mut idx = vec![0; dims.len()];
    for (d, &n) in dims.iter().enumerate().rev() {
        idx[d] = i % n.max(1);
        i /= n.max(1);
    }
    let mut s = t.name.clone();
    for v in idx {
        s.push_str(&format!("[{v}]"));
    }
    s
}

#[derive(Debug)]
struct Comparison {
    max_abs: f64,
    max_rel: f64,
    norm_rel: f64,
    failure: Option<String>,
}

/// Compare one output with the reference's. `max_rel` counts only elements whose reference
/// magnitude exceeds `atol`, where a relative error means something.
fn compare(
    t: &TensorSpec,
    axes: &BTreeMap<String, i64>,
    got: &Buffer,
    expected: &Buffer,
    tol: Tolerance,
) -> Result<Comparison, TaskFault> {
    let (mut max_abs, mut max_rel) = (0.0f64, 0.0f64);
    let (mut diff_sq, mut ref_sq) = (0.0f64, 0.0f64);
    let mut nonfinite: Option<(usize, f64)> = None;
    let mut nonfinite_count = 0usize;
    let mut violation: Option<(usize, f64, f64, f64)> = None;
    let mut violations = 0usize;
    for i in 0..got.len {
        let r = expected.get(i);
        if !r.is_finite() {
            return Err(TaskFault(format!(
                "the reference produced {r} at {}; the task's inputs or reference are wrong",
                index_name(t, axes, i)
            )));
        }
        let c = got.get(i);
        if !c.is_finite() {
            nonfinite_count += 1;
            nonfinite.get_or_insert((i, c));
            continue;
        }
        let d = (c - r).abs();
        max_abs = max_abs.max(d);
        if r.abs() > tol.atol {
            max_rel = max_rel.max(d / r.abs());
        }
        diff_sq += d * d;
        ref_sq += r * r;
        let bound = tol.atol + tol.rtol * r.abs();
        if d > bound {
            violations += 1;
            violation.get_or_insert((i, c, r, bound));
        }
    }
    let norm_rel = if ref_sq > 0.0 {
        (diff_sq / ref_sq).sqrt()
    } else if diff_sq == 0.0 {
        0.0
    } else {
        // Infinite in truth; JSON has no infinity, so the largest finite number stands for it.
        f64::MAX
    };
    let failure = if let Some((i, v)) = nonfinite {
        Some(format!(
            "output `{}` has {nonfinite_count} non-finite value(s), first {} = {v} (outputs start as NaN: is every element written?)",
            t.name,
            index_name(t, axes, i)
        ))
    } else if let Some((i, c, r, bound)) = violation {
        Some(format!(
            "{} = {c:e} but the reference gives {r:e} (|error| {:.3e} > atol + rtol·|ref| = {bound:.3e}); {violations} of {} elements of `{}` are out of tolerance",
            index_name(t, axes, i),
            (c - r).abs(),
            got.len,
            t.name
        ))
    } else if norm_rel > tol.norm_rtol {
        Some(format!(
            "‖{0} − ref‖/‖ref‖ = {norm_rel:.3e} exceeds norm_rtol {1:e} for output `{0}`",
            t.name, tol.norm_rtol
        ))
    } else {
        None
    };
    Ok(Comparison {
        max_abs,
        max_rel,
        norm_rel,
        failure,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksearch_core::Dtype;

    fn tensor() -> TensorSpec {
        TensorSpec {
            name: "y".into(),
            shape: vec!["r".into(), "c".into()],
            dtype: Dtype::F32,
            init: None,
            description: None,
        }
    }

    fn axes() -> BTreeMap<String, i64> {
        [("r".to_owned(), 2), ("c".to_owned(), 3)].into()
    }

    fn buffer(values: &[f32]) -> Buffer {
        let mut b = Buffer::new(Dtype::F32, values.len());
        b.poison();
        // SAFETY: the buffer holds values.len() f32s.
        unsafe {
            std::ptr::copy_nonoverlapping(
                values.as_ptr(),
                b.data_ptr().cast::<f32>(),
                values.len(),
            );
        }
        b
    }

    fn check(got: &[f32], exp: &[f32]) -> Comparison {
        compare(
            &tensor(),
            &axes(),
            &buffer(got),
            &buffer(exp),
            Tolerance::default_for(Dtype::F32),
        )
        .unwrap()
    }

    const REF: [f32; 6] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6];

    #[test]
    fn equal_outputs_pass() {
        let c = check(&REF, &REF);
        assert!(c.failure.is_none());
        assert_eq!(c.max_abs, 0.0);
    }

    #[test]
    fn one_wrong_element_is_located() {
        let mut got = REF;
        got[4] = 0.9;
        let c = check(&got, &REF);
        let msg = c.failure.unwrap();
        assert!(msg.starts_with("y[1][1] = "), "{msg}");
        assert!(msg.contains("1 of 6 elements"), "{msg}");
    }

    #[test]
    fn zeros_fail_even_with_a_loose_elementwise_bound() {
        let tiny: Vec<f32> = REF.iter().map(|v| v * 1e-6).collect();
        // Every |ref| is below atol = 1e-5, so only the norm check can catch all-zero output.
        let c = check(&[0.0; 6], &tiny);
        let msg = c.failure.unwrap();
        assert!(msg.contains("norm_rtol"), "{msg}");
        assert_eq!(c.norm_rel, 1.0);
    }

    #[test]
    fn nan_output_fails() {
        let mut got = REF;
        got[0] = f32::NAN;
        let msg = check(&got, &REF).failure.unwrap();
        assert!(msg.contains("1 non-finite"), "{msg}");
    }

    #[test]
    fn a_non_finite_reference_is_a_task_fault() {
        let mut exp = REF;
        exp[2] = f32::INFINITY;
        let err = compare(
            &tensor(),
            &axes(),
            &buffer(&REF),
            &buffer(&exp),
            Tolerance::default_for(Dtype::F32),
        )
        .unwrap_err();
        assert!(err.0.contains("y[0][2]"), "{}", err.0);
    }
}
