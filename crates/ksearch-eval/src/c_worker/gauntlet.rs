//! The correctness gauntlet for one workload and seed: fresh random inputs in the pool, the
//! reference run by the judge into its own guarded buffers, the candidate run by its runner into
//! poisoned outputs, then guards, finiteness, elementwise tolerance and the norm-relative error
//! checked by the judge. Inputs cannot change: the runner maps them read-only.

use std::collections::BTreeMap;

use ksearch_core::Dtype;
use ksearch_core::protocol::ErrorStats;
use ksearch_core::task::{TaskSpec, TensorSpec, Tolerance, Workload};

use super::contender::{Lost, Runner};
use super::kernel::Kernel;
use super::pool::{Pool, Slots};
use super::tensors::{Guarded, Stores};

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

/// Why checking a seed stopped early.
#[derive(Debug)]
pub(crate) enum CheckStop {
    Task(TaskFault),
    /// The candidate's runner died or broke the protocol.
    Runner(Lost),
}

impl From<TaskFault> for CheckStop {
    fn from(f: TaskFault) -> Self {
        CheckStop::Task(f)
    }
}

/// The reference's outputs for `set` of `pool`, computed in the judge.
pub(crate) fn expected(
    spec: &TaskSpec,
    workload: &str,
    pool: &Pool,
    set: usize,
    reference: &Kernel,
) -> Result<Vec<Guarded>, TaskFault> {
    let mut outs: Vec<Guarded> = pool
        .layout
        .output_sizes
        .iter()
        .map(|&b| Guarded::poisoned(b))
        .collect();
    let mut ptrs = pool.input_ptrs(set);
    ptrs.extend(outs.iter_mut().map(|o| o.ptr().cast()));
    let names: Vec<String> = spec.inputs.iter().map(|t| t.name.clone()).collect();
    super::reference_fault::watching(pool, set, &names, workload, || {
        // SAFETY: buffers are sized from the task's shapes for these axes; a read past an
        // input's end faults in its guard page, which `watching` reports.
        unsafe { reference.call(&ptrs, &pool.axes) }
    });
    for (t, o) in spec.outputs.iter().zip(&outs) {
        if !o.guards_intact() {
            return Err(TaskFault(format!(
                "the reference wrote outside output `{}`",
                t.name
            )));
        }
    }
    Ok(outs)
}

/// The least time one call of a candidate may take, whatever the reference's time.
const CALL_LIMIT_FLOOR: std::time::Duration = std::time::Duration::from_secs(10);
/// Times the reference's time on the same inputs a candidate's call may take.
const CALL_LIMIT_TIMES_REFERENCE: u32 = 100;

/// How long one call of a candidate may take when the reference took `reference` on the same
/// workload: a hanging candidate is stopped as `timeout` in about this time, not at the end of
/// the evaluation's limit (5 minutes for `ksearch eval`).
pub(crate) fn call_limit(reference: std::time::Duration) -> std::time::Duration {
    (reference * CALL_LIMIT_TIMES_REFERENCE).max(CALL_LIMIT_FLOOR)
}

/// Check the candidate (its runner, which has `pool` mapped) on fresh inputs from `seed`, in
/// set 0 of the pool.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_seed(
    spec: &TaskSpec,
    tolerances: &BTreeMap<Dtype, Tolerance>,
    workload: &Workload,
    seed: u64,
    pool: &mut Pool,
    reference: &Kernel,
    candidate: &mut Runner,
) -> Result<SeedCheck, CheckStop> {
    pool.fill(spec, &workload.name, 0, seed);
    let started = std::time::Instant::now();
    let expected = expected(spec, &workload.name, pool, 0, reference)?;
    candidate.limit_calls(call_limit(started.elapsed()));
    let names: Vec<String> = spec.outputs.iter().map(|t| t.name.clone()).collect();
    {
        let region = &mut candidate
            .pools
            .get_mut(&pool.id)
            .expect("the pool is mapped")
            .outputs;
        Slots {
            layout: &pool.layout,
            region,
        }
        .poison(0, Stores::Cached);
    }
    candidate.call(pool.id, &[0]).map_err(CheckStop::Runner)?;
    let region = &mut candidate
        .pools
        .get_mut(&pool.id)
        .expect("the pool is mapped")
        .outputs;
    let slots = Slots {
        layout: &pool.layout,
        region,
    };
    let mut errors = ErrorStats {
        max_abs_err: 0.0,
        max_rel_err: 0.0,
        norm_rel_err: 0.0,
        seeds_checked: 1,
    };
    if let Some(name) = slots.broken_guard(0, &names) {
        return Ok(SeedCheck {
            errors,
            failure: Some(format!("wrote outside the bounds of `{name}`")),
        });
    }
    let mut failure = None;
    for (t, (tensor, exp)) in spec.outputs.iter().zip(&expected).enumerate() {
        let tol = tolerances
            .get(&tensor.dtype)
            .copied()
            .unwrap_or_else(|| spec.tolerance_for(tensor.dtype));
        let c = check_output(tensor, &workload.axes, slots.output(0, t), exp.bytes(), tol)?;
        errors.max_abs_err = errors.max_abs_err.max(c.max_abs);
        errors.max_rel_err = errors.max_rel_err.max(c.max_rel);
        errors.norm_rel_err = errors.norm_rel_err.max(c.norm_rel);
        if failure.is_none() {
            failure = c.failure;
        }
    }
    Ok(SeedCheck { errors, failure })
}

/// `y[3][17]` for flat index `i` of tensor `t`.
pub(crate) fn index_name(t: &TensorSpec, axes: &BTreeMap<String, i64>, mut i: usize) -> String {
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

/// One output checked against the reference's: its errors, and why it fails, if it does.
#[derive(Debug)]
pub(crate) struct OutputCheck {
    pub(crate) max_abs: f64,
    pub(crate) max_rel: f64,
    pub(crate) norm_rel: f64,
    pub(crate) failure: Option<String>,
}

/// Check one output against the reference's. `max_rel` counts only elements whose reference
/// magnitude exceeds `atol`, where a relative error means something.
pub(crate) fn check_output(
    t: &TensorSpec,
    axes: &BTreeMap<String, i64>,
    got: &[u8],
    expected: &[u8],
    tol: Tolerance,
) -> Result<OutputCheck, TaskFault> {
    // One loop per element type, so that the loop decodes without asking the type each time.
    let scan = match t.dtype {
        Dtype::F32 => scan(got, expected, tol, |b: [u8; 4]| {
            f64::from(f32::from_ne_bytes(b))
        }),
        Dtype::F64 => scan(got, expected, tol, f64::from_ne_bytes),
        Dtype::I32 => scan(got, expected, tol, |b: [u8; 4]| {
            f64::from(i32::from_ne_bytes(b))
        }),
        Dtype::I64 => scan(got, expected, tol, |b: [u8; 8]| {
            i64::from_ne_bytes(b) as f64
        }),
        Dtype::F16
        | Dtype::Bf16
        | Dtype::F8e4m3
        | Dtype::F8e5m2
        | Dtype::I8
        | Dtype::I16
        | Dtype::Bool => {
            unreachable!("task validation keeps {} out of the c backend", t.dtype)
        }
    };
    if let Some((i, r)) = scan.bad_reference {
        return Err(TaskFault(format!(
            "the reference produced {r} at {}; the task's inputs or reference are wrong",
            index_name(t, axes, i)
        )));
    }
    let Scan {
        len,
        max_abs,
        max_rel,
        diff_sq,
        ref_sq,
        nonfinite,
        nonfinite_count,
        violation,
        violations,
        bad_reference: _,
    } = scan;
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
            len,
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
    Ok(OutputCheck {
        max_abs,
        max_rel,
        norm_rel,
        failure,
    })
}

/// What one pass over an output and its reference found.
struct Scan {
    len: usize,
    max_abs: f64,
    max_rel: f64,
    diff_sq: f64,
    ref_sq: f64,
    bad_reference: Option<(usize, f64)>,
    nonfinite: Option<(usize, f64)>,
    nonfinite_count: usize,
    violation: Option<(usize, f64, f64, f64)>,
    violations: usize,
}

fn scan<const N: usize>(
    got: &[u8],
    expected: &[u8],
    tol: Tolerance,
    read: impl Fn([u8; N]) -> f64,
) -> Scan {
    let mut s = Scan {
        len: got.len() / N,
        max_abs: 0.0,
        max_rel: 0.0,
        diff_sq: 0.0,
        ref_sq: 0.0,
        bad_reference: None,
        nonfinite: None,
        nonfinite_count: 0,
        violation: None,
        violations: 0,
    };
    let pairs = got.chunks_exact(N).zip(expected.chunks_exact(N));
    for (i, (g, e)) in pairs.enumerate() {
        let r = read(e.try_into().expect("N bytes"));
        if !r.is_finite() {
            s.bad_reference = Some((i, r));
            return s;
        }
        let c = read(g.try_into().expect("N bytes"));
        if !c.is_finite() {
            s.nonfinite_count += 1;
            s.nonfinite.get_or_insert((i, c));
            continue;
        }
        let d = (c - r).abs();
        s.max_abs = s.max_abs.max(d);
        if r.abs() > tol.atol {
            s.max_rel = s.max_rel.max(d / r.abs());
        }
        s.diff_sq += d * d;
        s.ref_sq += r * r;
        let bound = tol.atol + tol.rtol * r.abs();
        if d > bound {
            s.violations += 1;
            s.violation.get_or_insert((i, c, r, bound));
        }
    }
    s
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

    fn buffer(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    fn check(got: &[f32], exp: &[f32]) -> OutputCheck {
        check_output(
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
    fn every_element_type_is_read_as_itself() {
        let f64s: Vec<u8> = [1.0f64, -2.5, 3.0, 4.0, 5.0, 6.0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        let i32s: Vec<u8> = [1i32, -2, 3, 4, 5, 6]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        let i64s: Vec<u8> = [1i64, -2, 3, 4, 5, 6]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        for (dtype, bytes) in [(Dtype::F64, f64s), (Dtype::I32, i32s), (Dtype::I64, i64s)] {
            let t = TensorSpec { dtype, ..tensor() };
            let tol = Tolerance::default_for(dtype);
            let same = check_output(&t, &axes(), &bytes, &bytes, tol).unwrap();
            assert!(same.failure.is_none(), "{dtype}");
            // Element [0][1] is -2 (or -2.5): change it, and the failure names it.
            let mut other = bytes.clone();
            let n = dtype.size_bytes();
            other[n..2 * n].copy_from_slice(&bytes[2 * n..3 * n]);
            let c = check_output(&t, &axes(), &other, &bytes, tol).unwrap();
            assert!(c.failure.unwrap().starts_with("y[0][1] = "), "{dtype}");
            assert!(c.max_abs >= 5.0, "{dtype}: {}", c.max_abs);
        }
    }

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
        let err = check_output(
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
