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
/// task's tolerance. (`KEPT_CALLS` timed calls of each untrusted contender and workload, chosen
/// in secret, are held to the tolerance itself against the reference: see `Reservoir`.)
const TIMED_TOLERANCE_FACTOR: f64 = 3.0;
/// CPU an untrusted runner may use after its batch while other contenders are timed: it is idle
/// then (asleep on its socket), and only the tail of its answer may spill over. Anything more
/// competes for the CPU with the contender being timed (a runner's thread that spun right after
/// its own batch made the baseline 1.3 to 1.9 times slower, within the allowance for CPU outside
/// a runner's calls).
const IDLE_CPU_S: f64 = 100e-6;
const IDLE_CPU_SHARE: f64 = 0.01;
/// Timed calls of each untrusted contender kept to be checked against the reference, at the
/// task's own tolerance, once the workload is timed: a kernel that tells timed calls from the
/// checked ones could otherwise drift up to the looser tolerance of the comparisons with the
/// baseline (computing less precisely, and faster) wherever it is timed. A kernel that drifts on
/// a share p of its timed calls passes them all with chance (1 − p)^KEPT_CALLS.
pub(super) const KEPT_CALLS: usize = 4;
/// Judge memory the kept outputs may take; fewer calls are kept where they would take more (at
/// least one a contender).
const KEPT_BYTES: usize = 1 << 30;

/// How many calls to keep per untrusted contender.
pub(super) fn kept_per_contender(output_bytes: usize, untrusted: usize) -> usize {
    (KEPT_BYTES / (output_bytes.max(1) * untrusted.max(1))).clamp(1, KEPT_CALLS)
}

/// One kept timed call. Its inputs are not copied: the set's later perturbations are recorded,
/// and undone once the workload is timed.
struct Kept {
    contender: usize,
    round: usize,
    call: usize,
    /// The set that call ran on.
    set: usize,
    /// Its place in the reservoir: the largest keys stay.
    key: f64,
    /// The keys of the set's perturbations since, in order.
    perturbed: Vec<u64>,
    outputs: Vec<Vec<u8>>,
}

/// The kept calls: for each untrusted contender, up to `per` of its timed calls, each from a
/// different round, drawn in secret after each round so that every timed call of the contender,
/// at any position of any batch, has about the same chance (rounds weighted by their batch's
/// calls, Efraimidis and Spirakis's sampling without replacement; the call uniform in its batch).
pub(super) struct Reservoir {
    per: usize,
    kept: Vec<Kept>,
}

impl Reservoir {
    pub(super) fn new(per: usize) -> Self {
        Self {
            per,
            kept: Vec::new(),
        }
    }

    /// `set`'s inputs were perturbed with `key`: every call kept on it records that.
    pub(super) fn perturbed(&mut self, set: usize, key: u64) {
        for k in self.kept.iter_mut().filter(|k| k.set == set) {
            k.perturbed.push(key);
        }
    }

    /// Contender `contender` ran `sets` in `round`: maybe keep one of those calls, whose
    /// outputs `outputs` copies.
    pub(super) fn offer(
        &mut self,
        round: usize,
        contender: usize,
        sets: &[u32],
        rng: &mut Rng,
        outputs: impl FnOnce(usize) -> Vec<Vec<u8>>,
    ) {
        if sets.is_empty() || self.per == 0 {
            return;
        }
        // u^(1/w) with u uniform in (0, 1]: the `per` largest keys are a weighted sample.
        let u = 1.0 - rng.next_f64();
        let key = u.powf(1.0 / sets.len() as f64);
        let mine: Vec<usize> = (0..self.kept.len())
            .filter(|&j| self.kept[j].contender == contender)
            .collect();
        let weakest = mine
            .iter()
            .copied()
            .min_by(|&a, &b| self.kept[a].key.total_cmp(&self.kept[b].key));
        if mine.len() >= self.per {
            match weakest {
                Some(w) if self.kept[w].key < key => {
                    self.kept.swap_remove(w);
                }
                _ => return,
            }
        }
        let call = rng.next_u64() as usize % sets.len();
        let set = sets[call] as usize;
        self.kept.push(Kept {
            contender,
            round,
            call,
            set,
            key,
            perturbed: Vec::new(),
            outputs: outputs(set),
        });
    }
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

impl Sample {
    pub(super) fn value(&self) -> f64 {
        self.value
    }

    /// The element's name, as `out[3, 7]`.
    pub(super) fn place(&self, spec: &TaskSpec, workload: &Workload) -> String {
        index_name(&spec.outputs[self.output], &workload.axes, self.index)
    }
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

/// The kept calls' outputs against the reference's on their inputs (their sets' in `pool`,
/// given back by undoing the perturbations since, the latest round first), at the task's
/// tolerance: one reference call per kept round and set. Every untrusted contender has at least
/// one of its kept calls checked; beyond that, reference calls stop once they took `budget` (a
/// naive reference on a large workload can take seconds a call). The pool's last use.
pub(super) fn check_kept(
    spec: &TaskSpec,
    workload: &Workload,
    tolerances: &BTreeMap<Dtype, Tolerance>,
    reference: &Kernel,
    mut reservoir: Reservoir,
    pool: &mut Pool,
    budget: std::time::Duration,
) -> Result<(), TimingStop> {
    let kept = &mut reservoir.kept;
    kept.sort_by(|a, b| b.round.cmp(&a.round).then(a.set.cmp(&b.set)));
    // Per set, how many of its latest perturbations are undone: a call kept in a later round
    // recorded a suffix of what one kept earlier on the same set did.
    let mut undone: BTreeMap<usize, usize> = BTreeMap::new();
    let mut truth: Option<((usize, usize), Vec<super::tensors::Guarded>)> = None;
    let mut checked: BTreeMap<usize, usize> = BTreeMap::new();
    let started = std::time::Instant::now();
    for (at, k) in kept.iter().enumerate() {
        let done = undone.entry(k.set).or_insert(0);
        let todo = k.perturbed.len().saturating_sub(*done);
        for &key in k.perturbed[..todo].iter().rev() {
            pool.unperturb(spec, k.set, key);
        }
        *done = (*done).max(k.perturbed.len());
        // Out of time, a contender's calls are checked no more once one was, and one is left
        // for the last of its kept calls.
        let covered = checked.get(&k.contender).is_some_and(|&n| n > 0)
            || kept[at + 1..].iter().any(|l| l.contender == k.contender);
        if covered && started.elapsed() > budget {
            continue;
        }
        *checked.entry(k.contender).or_insert(0) += 1;
        if truth.as_ref().is_none_or(|(at, _)| *at != (k.round, k.set)) {
            let want =
                expected(spec, &workload.name, pool, k.set, reference).map_err(TimingStop::Task)?;
            truth = Some(((k.round, k.set), want));
        }
        let want = &truth.as_ref().expect("computed above").1;
        for ((tensor, got), want) in spec.outputs.iter().zip(&k.outputs).zip(want) {
            let tol = tolerances
                .get(&tensor.dtype)
                .copied()
                .unwrap_or_else(|| spec.tolerance_for(tensor.dtype));
            let c = check_output(tensor, &workload.axes, got, want.bytes(), tol)
                .map_err(TimingStop::Task)?;
            if let Some(f) = c.failure {
                return Err(TimingStop::Incorrect {
                    index: k.contender,
                    message: format!(
                        "while timed, call {} of a batch in round {}: {f} (compared with the reference on the same inputs, at the task's tolerance)",
                        k.call + 1,
                        k.round + 1,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Rounds of these many calls each, offered to a reservoir of `per` for one contender.
    fn draw(per: usize, batches: &[usize], rng: &mut Rng) -> Vec<(usize, usize)> {
        let mut r = Reservoir::new(per);
        for (round, &k) in batches.iter().enumerate() {
            let sets: Vec<u32> = (0..k as u32).collect();
            r.offer(round, 0, &sets, rng, |_| Vec::new());
        }
        r.kept.iter().map(|k| (k.round, k.call)).collect()
    }

    /// One kept call: every timed call, in a round of one call or of ten, at any position, has
    /// the same chance (a draw by round alone would favour the calls of short batches).
    #[test]
    fn a_kept_call_is_any_timed_call_with_the_same_chance() {
        let batches = [1, 10, 3, 6];
        let total: usize = batches.iter().sum();
        let mut rng = Rng::new(7);
        let trials = 40_000;
        let mut seen = std::collections::HashMap::new();
        for _ in 0..trials {
            for at in draw(1, &batches, &mut rng) {
                *seen.entry(at).or_insert(0usize) += 1;
            }
        }
        assert_eq!(seen.len(), total, "every call was kept at times");
        let expected = trials as f64 / total as f64;
        for (at, n) in seen {
            assert!(
                (n as f64 - expected).abs() < 0.1 * expected,
                "{at:?} kept {n} times, expected about {expected:.0}"
            );
        }
    }

    /// Up to `per` calls a contender, each from a different round; contenders apart.
    #[test]
    fn each_contender_keeps_up_to_four_calls_from_different_rounds() {
        let mut rng = Rng::new(3);
        let mut r = Reservoir::new(KEPT_CALLS);
        for round in 0..30 {
            for contender in [0, 2] {
                r.offer(round, contender, &[5, 6, 7], &mut rng, |set| {
                    vec![vec![set as u8]]
                });
            }
        }
        for contender in [0, 2] {
            let mine: Vec<&Kept> = r.kept.iter().filter(|k| k.contender == contender).collect();
            assert_eq!(mine.len(), KEPT_CALLS);
            let mut rounds: Vec<usize> = mine.iter().map(|k| k.round).collect();
            rounds.sort_unstable();
            rounds.dedup();
            assert_eq!(rounds.len(), KEPT_CALLS, "{rounds:?}");
            assert!(mine.iter().all(|k| k.outputs == vec![vec![k.set as u8]]));
        }
        // A set perturbed after a call was kept on it is recorded for that call only.
        r.perturbed(6, 99);
        assert!(
            r.kept
                .iter()
                .all(|k| (k.set == 6) == (k.perturbed.last() == Some(&99)))
        );
    }

    #[test]
    fn kept_outputs_stay_within_their_memory() {
        assert_eq!(kept_per_contender(1 << 20, 3), KEPT_CALLS);
        assert_eq!(kept_per_contender(200 << 20, 2), 2);
        assert_eq!(kept_per_contender(2 << 30, 1), 1);
    }
}
