//! What the judge verifies of a timed round: the sampled elements of every call and the whole
//! output of some (against the baseline's, at three times the tolerance), one call per workload
//! kept for the reference (at the tolerance itself), and that untrusted runners stay idle while
//! others are timed.

use std::collections::BTreeMap;
use std::time::Duration;

use ksearch_core::Dtype;
use ksearch_core::rng::Rng;
use ksearch_core::task::{TaskSpec, Tolerance, Workload};

use super::gauntlet::{check_output, expected, index_name};
use super::kernel::Kernel;
use super::pool::{Pool, Slots};
use super::timing::{Timed, TimingStop};

/// Elements of each output of each timed call read at "done": this many for a batch of few
/// calls, fewer per call (never under `MIN_SAMPLED_ELEMENTS`) when a batch holds many, so that
/// a batch costs about `SAMPLES_PER_BATCH` reads of memory the judge has not touched.
const SAMPLED_ELEMENTS: usize = 16;
const MIN_SAMPLED_ELEMENTS: usize = 2;
const SAMPLES_PER_BATCH: usize = 1024;
/// Timed outputs are checked against the baseline's, so both errors add up: this many times the
/// task's tolerance. (One timed call of each workload, chosen in secret, is held to the
/// tolerance itself against the reference: see `Kept`.)
const TIMED_TOLERANCE_FACTOR: f64 = 3.0;
/// CPU an untrusted runner may use after its batch while other contenders are timed: it is idle
/// then (asleep on its socket), and only the tail of its answer may spill over. Anything more
/// competes for the CPU with the contender being timed (a runner's thread that spun right after
/// its own batch made the baseline 1.3 to 1.9 times slower, within the allowance for CPU outside
/// a runner's calls).
const IDLE_CPU_S: f64 = 100e-6;
const IDLE_CPU_SHARE: f64 = 0.01;
/// One timed call of each untrusted contender, kept to be checked against the reference, at the
/// task's own tolerance, once the workload is timed: a kernel that tells timed calls from the
/// checked ones could otherwise drift up to the looser tolerance of the comparisons with the
/// baseline (computing less precisely, and faster) wherever it is timed. Which call is
/// reservoir-sampled over the rounds, in secret: each round's is kept with chance 1/(round+1),
/// so the one checked is any round's with the same chance, and a kernel that drifts from some
/// round on is caught with the chance that the round checked comes after it.
/// Its inputs are not copied: the set's later perturbations are recorded, and undone once the
/// workload is timed.
pub(super) struct Kept {
    pub(super) round: usize,
    pub(super) call: usize,
    /// The set that call ran on.
    pub(super) set: usize,
    /// The keys of the set's perturbations since, in order.
    pub(super) keys: Vec<u64>,
    /// Per untrusted contender (its index), its outputs of that call.
    pub(super) outputs: Vec<(usize, Vec<Vec<u8>>)>,
}

pub(super) fn slots<'a>(c: &'a mut Timed<'_>, pool: &'a Pool) -> Slots<'a> {
    Slots {
        layout: &pool.layout,
        region: &mut c
            .runner
            .pools
            .get_mut(&pool.id)
            .expect("pool mapped")
            .outputs,
    }
}

/// Elements of a timed call's output, read when the runner said "done".
#[derive(Debug, Clone)]
pub(super) struct Sample {
    call: usize,
    output: usize,
    index: usize,
    value: f64,
}

pub(super) fn sample(
    spec: &TaskSpec,
    workload: &Workload,
    slots: &Slots<'_>,
    sets: &[u32],
    rng: &mut Rng,
) -> Vec<Sample> {
    let per_call =
        (SAMPLES_PER_BATCH / sets.len().max(1)).clamp(MIN_SAMPLED_ELEMENTS, SAMPLED_ELEMENTS);
    let mut out = Vec::with_capacity(sets.len() * spec.outputs.len() * per_call);
    for (call, &s) in sets.iter().enumerate() {
        for (t, tensor) in spec.outputs.iter().enumerate() {
            let len = tensor.numel(&workload.axes);
            if len == 0 {
                continue;
            }
            for _ in 0..per_call.min(len) {
                let index = rng.next_u64() as usize % len;
                out.push(Sample {
                    call,
                    output: t,
                    index,
                    value: slots.element(s as usize, t, tensor.dtype, index),
                });
            }
        }
    }
    out
}

fn scaled(tol: Tolerance) -> Tolerance {
    Tolerance {
        atol: tol.atol * TIMED_TOLERANCE_FACTOR,
        rtol: tol.rtol * TIMED_TOLERANCE_FACTOR,
        norm_rtol: tol.norm_rtol * TIMED_TOLERANCE_FACTOR,
    }
}

/// Check the round's timed outputs of every untrusted contender: the sampled elements of every
/// call are written, and equal the baseline's where the baseline ran the same set (`checked`);
/// where `whole`, one such call's whole output is checked.
#[allow(clippy::too_many_arguments)]
pub(super) fn verify_round(
    spec: &TaskSpec,
    workload: &Workload,
    tolerances: &BTreeMap<Dtype, Tolerance>,
    contenders: &mut [Timed<'_>],
    pool: &Pool,
    baseline: usize,
    calls: &[Vec<u32>],
    checked: &[bool],
    snapshots: &[Vec<Sample>],
    names: &[String],
    whole: bool,
    rng: &mut Rng,
) -> Result<(), TimingStop> {
    let tol_of = |d: Dtype| {
        scaled(
            tolerances
                .get(&d)
                .copied()
                .unwrap_or_else(|| spec.tolerance_for(d)),
        )
    };
    let (before, rest) = contenders.split_at_mut(baseline);
    let (base, after) = rest.split_first_mut().expect("baseline index in range");
    let truth = slots(base, pool);
    for (i, c) in before.iter_mut().enumerate().chain(
        after
            .iter_mut()
            .enumerate()
            .map(|(j, c)| (baseline + 1 + j, c)),
    ) {
        if c.trusted {
            continue;
        }
        let mine_calls = &calls[i];
        let k = mine_calls.len();
        let wrong = |message: String| TimingStop::Incorrect { index: i, message };
        for s in &snapshots[i] {
            let tensor = &spec.outputs[s.output];
            let set = mine_calls[s.call] as usize;
            let at = || index_name(tensor, &workload.axes, s.index);
            if !s.value.is_finite() {
                return Err(wrong(format!(
                    "while timed, call {} of a batch left {} = {} (outputs are poisoned before every timed call: was the work skipped?)",
                    s.call + 1,
                    at(),
                    s.value
                )));
            }
            if !checked[set] {
                continue;
            }
            let r = truth.element(set, s.output, tensor.dtype, s.index);
            let tol = tol_of(tensor.dtype);
            if (s.value - r).abs() > tol.atol + tol.rtol * r.abs() {
                return Err(wrong(format!(
                    "while timed, call {} of a batch gave {} = {:e} where the baseline gives {r:e} on the same inputs (timed outputs are checked; every timed call gets new inputs)",
                    s.call + 1,
                    at(),
                    s.value
                )));
            }
        }
        // One call, chosen now, after the runner said "done": its guards and its samples again.
        let call = rng.next_u64() as usize % k;
        let set = mine_calls[call] as usize;
        let mine = slots(c, pool);
        if let Some(name) = mine.broken_guard(set, names) {
            return Err(wrong(format!(
                "while timed, wrote outside the bounds of `{name}`"
            )));
        }
        for s in snapshots[i].iter().filter(|s| s.call == call) {
            let now = mine.element(set, s.output, spec.outputs[s.output].dtype, s.index);
            if now.to_bits() != s.value.to_bits() && !(now.is_nan() && s.value.is_nan()) {
                return Err(wrong(format!(
                    "an output of a timed call changed after the runner said \"done\" ({} was {:e}, then {now:e}): work after \"done\" is not timed and not allowed",
                    index_name(&spec.outputs[s.output], &workload.axes, s.index),
                    s.value
                )));
            }
        }
        // And one whole output the baseline computed too.
        let checkable: Vec<usize> = (0..k)
            .filter(|&j| checked[mine_calls[j] as usize])
            .collect();
        if !whole || checkable.is_empty() {
            continue;
        }
        let call = checkable[rng.next_u64() as usize % checkable.len()];
        let set = mine_calls[call] as usize;
        for (t, tensor) in spec.outputs.iter().enumerate() {
            let c = check_output(
                tensor,
                &workload.axes,
                mine.output(set, t),
                truth.output(set, t),
                tol_of(tensor.dtype),
            )
            .map_err(|f| TimingStop::Internal(f.0))?;
            if let Some(f) = c.failure {
                return Err(wrong(format!(
                    "while timed, call {} of a batch: {f} (compared with the baseline on the same inputs)",
                    call + 1
                )));
            }
        }
    }
    Ok(())
}

/// The kept call's outputs against the reference's on its inputs (its set's in `pool`, given
/// back by undoing the perturbations since), at the task's tolerance. The pool's last use.
pub(super) fn check_kept(
    spec: &TaskSpec,
    workload: &Workload,
    tolerances: &BTreeMap<Dtype, Tolerance>,
    reference: &Kernel,
    kept: &Kept,
    pool: &mut Pool,
) -> Result<(), TimingStop> {
    for &key in kept.keys.iter().rev() {
        pool.unperturb(spec, kept.set, key);
    }
    let truth =
        expected(spec, &workload.name, pool, kept.set, reference).map_err(TimingStop::Task)?;
    for (i, outputs) in &kept.outputs {
        for ((tensor, got), want) in spec.outputs.iter().zip(outputs).zip(&truth) {
            let tol = tolerances
                .get(&tensor.dtype)
                .copied()
                .unwrap_or_else(|| spec.tolerance_for(tensor.dtype));
            let c = check_output(tensor, &workload.axes, got, want.bytes(), tol)
                .map_err(TimingStop::Task)?;
            if let Some(f) = c.failure {
                return Err(TimingStop::Incorrect {
                    index: *i,
                    message: format!(
                        "while timed, call {} of a batch in round {}: {f} (compared with the reference on the same inputs, at the task's tolerance)",
                        kept.call + 1,
                        kept.round + 1,
                    ),
                });
            }
        }
    }
    Ok(())
}

/// The untrusted contenders `watched` used at most a trace of CPU while contender `timed` was
/// timed (`t`), from their clocks at its start (`at_go`) to now: a runner's thread working then
/// competes with it for its CPU.
pub(super) fn idle_cpu(
    contenders: &[Timed<'_>],
    timed: usize,
    t: Duration,
    watched: &[usize],
    at_go: &[Option<f64>],
    workload: &Workload,
) -> Result<(), TimingStop> {
    for (&j, before) in watched.iter().zip(at_go) {
        let (Some(before), Some(now)) = (*before, process_cpu_seconds(contenders[j].runner.pid()))
        else {
            continue;
        };
        let used = now - before;
        if used > IDLE_CPU_S + IDLE_CPU_SHARE * t.as_secs_f64() {
            return Err(TimingStop::Incorrect {
                index: j,
                message: format!(
                    "{} used {:.0} µs of CPU outside its timed calls while {} was timed ({:.0} µs) on workload `{}`: work while another contender is timed is not allowed (it competes with it for the machine)",
                    contenders[j].what,
                    used * 1e6,
                    contenders[timed].what,
                    t.as_secs_f64() * 1e6,
                    workload.name,
                ),
            });
        }
    }
    Ok(())
}

/// CPU time of process `pid` (every thread, live or gone), in seconds, from its process CPU
/// clock; `None` where there is none to read.
#[cfg(target_os = "linux")]
pub(crate) fn process_cpu_seconds(pid: i32) -> Option<f64> {
    // The kernel's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED): any process this one can see,
    // with no permission needed beyond that.
    let clock = ((!pid) << 3) | 2;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: reads a clock into a local timespec.
    let read = unsafe { libc::clock_gettime(clock, &raw mut ts) } == 0;
    read.then_some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn process_cpu_seconds(_pid: i32) -> Option<f64> {
    None
}
