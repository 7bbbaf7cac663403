//! Timing, measured by the judge: contenders interleaved round by round (order rotating), each
//! a batch of calls between the doorbell's `go` and the runner's `done`.
//!
//! Every timed call sees inputs no earlier call saw: before each round the judge changes every
//! element of the sets the round uses (outside the timed region) and poisons every output slot.
//! Each contender runs its own batch size; the baseline (trusted: the task's own code) runs a
//! window of the round's sets at a secret offset. Each untrusted contender's timed outputs are
//! checked: sampled elements of every call, read the moment it says "done", must be written,
//! and must equal the baseline's where it ran the same set; and the whole output of one such
//! call, chosen after the fact, in the first round and a secret share of the others. A runner
//! cannot tell which of its calls are checked. An output that changes after "done", and CPU time used
//! outside the timed calls, are caught as well.

use std::collections::BTreeMap;
use std::time::Duration;

use ksearch_core::Dtype;
use ksearch_core::protocol::TimingPlan;
use ksearch_core::rng::Rng;
use ksearch_core::stats::TimingStats;
use ksearch_core::task::{TaskSpec, Tolerance, Workload};

use super::contender::{Lost, Runner};
use super::gauntlet::TaskFault;
use super::kernel::Kernel;
use super::pool::Pool;
use super::settle::settled;
use super::tensors::Stores;
use super::verify::{
    Reservoir, Sample, check_kept, idle_cpu, kept_per_contender, sample, slots, verify_round,
};

/// Upper bounds on rotation, so tiny workloads do not allocate thousands of sets.
const MAX_SETS: usize = 64;
/// Shared memory a workload's timing pool may take: every set's inputs and every contender's
/// outputs. A batch holds at most as many calls as the pool has sets (every call gets a set of
/// its own), so this also bounds what a kernel that claims to be very fast can make the judge
/// allocate (pools of 2 GiB a contender were seen before this bound).
pub(crate) const POOL_BYTES: usize = 512 << 20;
// Sets allowed beyond `MAX_SETS` so that a batch of a very short kernel still sees a fresh set
// on every call: up to `MAX_BATCH`.
use super::link::MAX_BATCH;
/// A contender gets at least this many samples even when `max_time_ms` runs out.
const MIN_SAMPLES_FLOOR: usize = 3;
/// Share of rounds, after the first, in which one call's whole output is checked against the
/// baseline's; which rounds is secret. The sampled elements check every call of every round.
const WHOLE_CHECK_SHARE: f64 = 0.125;
/// CPU a runner may use outside its timed calls (waking up, reading its orders, answering): a
/// fixed amount, a share of the time it was timed, and a little per batch; tight where the
/// scheduler counts nanoseconds, loose where only clock ticks are known. What a runner uses
/// before a batch's clock starts is counted into that batch as well (`Batch::before`), so work
/// within this allowance gains nothing; the allowance only says when such work is refused.
const OUTSIDE_CPU_PRECISE: (f64, f64) = (0.01, 0.05);
const OUTSIDE_CPU_TICKS: (f64, f64) = (0.05, 0.05);
/// Per batch: a runner's own work between batches (reading the order, answering the samples)
/// measured 110-160 µs on an idle 2-core machine and up to about 350 µs under load.
const OUTSIDE_CPU_PER_BATCH_S: f64 = 300e-6;

/// Size of the largest CPU cache, from sysfs; 32 MiB when unknown.
pub(crate) fn last_level_cache_bytes() -> usize {
    cache_bytes(u32::MAX).unwrap_or(32 << 20)
}

/// Size of the highest-level cache of CPU 0 at `max_level` or below.
fn cache_bytes(max_level: u32) -> Option<usize> {
    let mut best = (0u32, 0usize);
    for i in 0..16 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let (Ok(level), Ok(size)) = (
            fs_err::read_to_string(format!("{dir}/level")),
            fs_err::read_to_string(format!("{dir}/size")),
        ) else {
            continue;
        };
        let level: u32 = level.trim().parse().unwrap_or(0);
        if let Some(bytes) = parse_cache_size(size.trim())
            && level >= best.0
            && level <= max_level
        {
            best = (level, bytes);
        }
    }
    (best.1 > 0).then_some(best.1)
}

/// Run `f` on the runners' CPU (when the judge pinned them apart), then return to the judge's.
fn on_cpu<R>(place: Option<(usize, usize)>, f: impl FnOnce() -> R) -> R {
    let Some((there, home)) = place else {
        return f();
    };
    crate::sandbox::pin_to_cpu(there);
    let r = f();
    crate::sandbox::pin_to_cpu(home);
    r
}

fn parse_cache_size(s: &str) -> Option<usize> {
    let (num, mult) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 1 << 10),
        'M' => (&s[..s.len() - 1], 1 << 20),
        'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok().map(|n| n * mult)
}

/// How many distinct input sets to rotate through.
pub(crate) fn rotation_sets(bytes_per_set: usize, plan: &TimingPlan) -> usize {
    let target = if plan.rotate_bytes > 0 {
        plan.rotate_bytes as usize
    } else {
        2 * last_level_cache_bytes()
    };
    let per = bytes_per_set.max(1);
    target.div_ceil(per).clamp(1, MAX_SETS)
}

/// The most sets a pool for `contenders` contenders may hold within [`POOL_BYTES`] (at least
/// one).
pub(crate) fn pool_sets_within_budget(
    input_bytes: usize,
    output_bytes: usize,
    contenders: usize,
) -> usize {
    let per = (input_bytes + output_bytes * contenders.max(1)).max(1);
    (POOL_BYTES / per).max(1)
}

/// A contender as the timing sees it.
pub(crate) struct Timed<'a> {
    pub(crate) runner: &'a mut Runner,
    /// The task's own code (baseline, comparison): its outputs are the truth timed outputs are
    /// checked against. Candidates, parents and incumbents are not trusted.
    pub(crate) trusted: bool,
    pub(crate) what: String,
}

/// Why timing stopped.
#[derive(Debug)]
pub(crate) enum TimingStop {
    /// A contender failed; `index` says which.
    Runner { index: usize, lost: Lost },
    /// An untrusted contender's timed outputs were wrong, or it worked outside its timed calls.
    Incorrect { index: usize, message: String },
    /// The judge could not set up (memory).
    Internal(String),
    /// The task's reference failed on a timed call's inputs.
    Task(TaskFault),
}

/// Per-call timing of each contender on `workload`. `contenders[baseline]` must be trusted.
#[allow(clippy::too_many_lines, clippy::too_many_arguments)]
pub(crate) fn time_workload(
    spec: &TaskSpec,
    workload: &Workload,
    plan: &TimingPlan,
    tolerances: &BTreeMap<Dtype, Tolerance>,
    seed: u64,
    contenders: &mut [Timed<'_>],
    baseline: usize,
    reference: &Kernel,
    next_pool: &mut u32,
) -> Result<Vec<TimingStats>, TimingStop> {
    let mut secret = Rng::new(crate::secret::seed());
    let n = contenders.len();
    let set_bytes = spec.bytes_per_call(workload).max(1);
    let internal = |e: std::io::Error| TimingStop::Internal(format!("shared memory: {e}"));
    let bytes_of = |tensors: &[ksearch_core::task::TensorSpec]| -> usize {
        tensors
            .iter()
            .map(|t| t.numel(&workload.axes) * t.dtype.size_bytes())
            .sum()
    };
    let (input_bytes, output_bytes) = (bytes_of(&spec.inputs), bytes_of(&spec.outputs));
    let budget_sets = pool_sets_within_budget(input_bytes, output_bytes, n);

    // Warm up each contender on a few sets, in batches of 1, 2, 4, ... calls (so that a
    // microsecond kernel is not warmed up one round trip at a time), and size its first batches
    // from the last, largest warm-up batch. Warm-up calls are checked too (outputs poisoned
    // before each batch, sampled after it): a kernel cannot look fast here by doing nothing.
    let warm_sets = rotation_sets(set_bytes, plan).min(4).min(budget_sets);
    *next_pool += 1;
    let mut warm = Pool::new(*next_pool, spec, workload, warm_sets).map_err(internal)?;
    warm.fill_all(spec, &workload.name, seed);
    map(contenders, &warm)?;
    let mut batch = Vec::with_capacity(n);
    for (i, c) in contenders.iter_mut().enumerate() {
        let (mut calls, mut spent, mut size, mut per_call) = (0usize, Duration::ZERO, 1usize, 0.0);
        while calls < 2 || spent.as_secs_f64() * 1e3 < plan.warmup_ms {
            let sets: Vec<u32> = (calls..calls + size)
                .map(|j| (j % warm_sets) as u32)
                .collect();
            if !c.trusted {
                let mut slots = slots(c, &warm);
                for s in 0..warm_sets {
                    slots.poison(s, Stores::Cached);
                }
            }
            let t = c
                .runner
                .timed(warm.id, &sets, &[])
                .map_err(|lost| TimingStop::Runner { index: i, lost })?
                .charged();
            if !c.trusted {
                let distinct = &sets[..sets.len().min(warm_sets)];
                warm_written(spec, workload, c, &warm, distinct, i, &mut secret)?;
            }
            spent += t;
            calls += size;
            per_call = t.as_secs_f64() * 1e3 / size as f64;
            if per_call * size as f64 * 2.0 <= plan.target_sample_ms.max(plan.warmup_ms / 4.0) {
                size = (size * 2).min(MAX_BATCH);
            }
        }
        batch.push(calls_for(plan, per_call));
    }

    // The timing pool: enough sets that every call of the longest batch gets its own (the
    // warm-up's own pool when that is enough), within the pool's memory.
    let most = batch.iter().copied().max().unwrap_or(1);
    let sets = rotation_sets(set_bytes, plan).max(most).min(budget_sets);
    for b in &mut batch {
        *b = (*b).min(sets);
    }
    let mut pool = if sets == warm_sets {
        warm
    } else {
        for c in contenders.iter_mut() {
            c.runner.drop_pool(warm.id);
        }
        drop(warm);
        *next_pool += 1;
        let mut fresh = Pool::new(*next_pool, spec, workload, sets).map_err(internal)?;
        fresh.fill_all(spec, &workload.name, seed);
        map(contenders, &fresh)?;
        fresh
    };
    let names: Vec<String> = spec.outputs.iter().map(|t| t.name.clone()).collect();
    for c in contenders.iter_mut() {
        c.runner.mark_answer();
    }
    let cpu_start: Vec<Option<crate::sandbox::CpuTime>> =
        contenders.iter().map(|c| c.runner.cpu_time()).collect();
    let mut timed_s = vec![0.0f64; n];

    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut measured = vec![0.0f64; n];
    let started = std::time::Instant::now();
    let min_runs = plan.min_runs as usize;
    let mut order: Vec<u32> = (0..sets as u32).collect();
    // Each round is prepared on the runners' CPU: a round that fits in half the last-level
    // cache waits in the caches of that CPU, as the inputs of a kernel that runs right after
    // the code that made them would; a larger one goes to memory around every cache.
    let place = contenders[baseline].runner.cpus;
    let untrusted: Vec<usize> = (0..n).filter(|&i| !contenders[i].trusted).collect();
    let mut kept = Reservoir::new(kept_per_contender(output_bytes, untrusted.len()));
    let mut idle_strike = vec![false; n];
    for round in 0usize.. {
        // A round uses as many sets as the longest batch. Each contender's calls take the first
        // of them; the baseline's take a window at a secret offset, and an untrusted contender's
        // calls on the sets of that window are the ones checked against the baseline's outputs
        // (every call is checked for outputs left unwritten).
        let round_len = batch.iter().copied().max().unwrap_or(1);
        let round_bytes = round_len * input_bytes + batch.iter().sum::<usize>() * output_bytes;
        let stores = if round_bytes <= last_level_cache_bytes() / 2 {
            Stores::Cached
        } else {
            Stores::Streaming
        };
        // Consecutive sets from a secret start (in memory order, as a kernel's inputs usually
        // lie, so that prefetching works as it would outside the judge), every one of them
        // with fresh inputs, and poisoned outputs.
        let start = secret.next_u64() as usize % sets;
        for (i, o) in order.iter_mut().enumerate() {
            *o = ((start + i) % sets) as u32;
        }
        let used = &order[..round_len];
        let window = secret.next_u64() as usize % round_len;
        let calls: Vec<Vec<u32>> = (0..n)
            .map(|i| {
                let k = batch[i];
                if i == baseline {
                    (0..k).map(|j| used[(window + j) % round_len]).collect()
                } else {
                    used[..k].to_vec()
                }
            })
            .collect();
        let mut checked = vec![false; sets];
        for &s in &calls[baseline] {
            checked[s as usize] = true;
        }
        on_cpu(place, || {
            for &s in used {
                let key = secret.next_u64();
                pool.perturb(spec, s as usize, key, stores);
                kept.perturbed(s as usize, key);
            }
            for (c, sets) in contenders.iter_mut().zip(&calls) {
                let mut slots = slots(c, &pool);
                for &s in sets {
                    slots.poison(s as usize, stores);
                }
            }
        });
        let mut snapshots: Vec<Vec<Sample>> = vec![Vec::new(); n];
        let mut charged = vec![Duration::ZERO; n];
        for i in round_order(round, n) {
            let k = batch[i];
            // The untrusted others are idle while this batch is timed (asleep on their sockets):
            // their CPU from its start to its end must stay at about nothing.
            let watched: Vec<usize> = untrusted.iter().copied().filter(|&j| j != i).collect();
            let pids: Vec<i32> = watched
                .iter()
                .map(|&j| contenders[j].runner.pid())
                .collect();
            let c = &mut contenders[i];
            let b = c
                .runner
                .timed(pool.id, &calls[i], &pids)
                .map_err(|lost| TimingStop::Runner { index: i, lost })?;
            let t = b.charged();
            let at_go = std::mem::take(&mut c.runner.watched_at_go);
            // One reading over the allowance is forgiven per runner (a loaded machine once
            // charged an idle, single-threaded runner 382 µs); work done while others are timed
            // shows in batch after batch.
            if let Err(e) = idle_cpu(contenders, i, b.wall, &watched, &at_go, workload) {
                match &e {
                    TimingStop::Incorrect { index, .. }
                        if !std::mem::replace(&mut idle_strike[*index], true) => {}
                    _ => return Err(e),
                }
            }
            let c = &mut contenders[i];
            if !c.trusted {
                snapshots[i] = sample(spec, workload, &slots(c, &pool), &calls[i], &mut secret);
            }
            let ms = t.as_secs_f64() * 1e3;
            charged[i] = t;
            // The CPU before the clock is counted into the sample, not into the time the runner
            // was timed: the allowance for CPU outside timed calls still sees it.
            timed_s[i] += b.wall.as_secs_f64();
            samples[i].push(ms / k as f64);
            measured[i] += ms;
        }
        verify_round(
            spec,
            workload,
            tolerances,
            contenders,
            &pool,
            baseline,
            &calls,
            &checked,
            &snapshots,
            &names,
            round == 0 || secret.next_u64() < (WHOLE_CHECK_SHARE * u64::MAX as f64) as u64,
            &mut secret,
        )?;
        for &i in &untrusted {
            kept.offer(round, i, &calls[i], &mut secret, |set| {
                let mine = slots(&mut contenders[i], &pool);
                (0..names.len())
                    .map(|t| mine.output(set, t).to_vec())
                    .collect()
            });
        }
        // A batch shorter than half its target grows to what it asks for (within the pool):
        // the batch a contender's warm-up asked for is where it starts, not what it keeps.
        for (k, t) in batch.iter_mut().zip(&charged) {
            let ms = t.as_secs_f64() * 1e3;
            if ms * 2.0 < plan.target_sample_ms {
                *k = (*k).max(calls_for(plan, ms / *k as f64)).min(sets);
            }
        }
        let enough = (0..n).all(|i| samples[i].len() >= min_runs)
            && ((0..n).all(|i| measured[i] >= plan.min_time_ms)
                || settled(&samples, round + 1, min_runs));
        let out_of_time = started.elapsed().as_secs_f64() * 1e3 >= plan.max_time_ms
            && samples
                .iter()
                .all(|s| s.len() >= MIN_SAMPLES_FLOOR.min(min_runs.max(1)));
        if enough || out_of_time {
            break;
        }
    }
    // Reference calls for the kept ones take at most a tenth of the timing beyond one a
    // contender.
    let budget = started.elapsed() / 10;
    check_kept(
        spec, workload, tolerances, reference, kept, &mut pool, budget,
    )?;
    // Work done outside the timed calls (after "done", or in the background) shows as CPU time
    // the runner used while it was not being timed.
    for (i, c) in contenders.iter().enumerate() {
        if c.trusted {
            continue;
        }
        if let (Some(a), Some(b)) = (cpu_start[i], c.runner.cpu_time()) {
            let outside = (b.seconds - a.seconds) - timed_s[i];
            let (fixed, share) = if a.precise && b.precise {
                OUTSIDE_CPU_PRECISE
            } else {
                OUTSIDE_CPU_TICKS
            };
            let allowed =
                fixed + share * timed_s[i] + OUTSIDE_CPU_PER_BATCH_S * samples[i].len() as f64;
            if outside > allowed {
                return Err(TimingStop::Incorrect {
                    index: i,
                    message: format!(
                        "{} used {:.0} ms of CPU outside its timed calls on workload `{}` ({:.0} ms while timed): work done after it said \"done\" or in the background is not allowed",
                        c.what,
                        outside * 1e3,
                        workload.name,
                        timed_s[i] * 1e3
                    ),
                });
            }
        }
    }
    for c in contenders.iter_mut() {
        c.runner.drop_pool(pool.id);
    }
    Ok(samples
        .into_iter()
        .zip(batch)
        .map(|(s, k)| TimingStats::from_samples(s, k))
        .collect())
}

/// Calls in a batch of a kernel taking `per_call_ms`: enough to last the plan's target.
fn calls_for(plan: &TimingPlan, per_call_ms: f64) -> usize {
    let k = if per_call_ms > 0.0 {
        (plan.target_sample_ms / per_call_ms).ceil() as usize
    } else {
        MAX_BATCH
    };
    k.clamp(1, MAX_BATCH)
}

/// The outputs of an untrusted contender's warm-up batch were written: elements sampled from
/// each of the sets it ran (`used`, poisoned before the batch) must be finite.
fn warm_written(
    spec: &TaskSpec,
    workload: &Workload,
    c: &mut Timed<'_>,
    warm: &Pool,
    used: &[u32],
    index: usize,
    secret: &mut Rng,
) -> Result<(), TimingStop> {
    let found = sample(spec, workload, &slots(c, warm), used, secret);
    match found.iter().find(|s| !s.value().is_finite()) {
        None => Ok(()),
        Some(s) => Err(TimingStop::Incorrect {
            index,
            message: format!(
                "in warm-up, a call left {} = {} (warm-up calls are checked too: was the work skipped?)",
                s.place(spec, workload),
                s.value()
            ),
        }),
    }
}

fn map(contenders: &mut [Timed<'_>], pool: &Pool) -> Result<(), TimingStop> {
    for (i, c) in contenders.iter_mut().enumerate() {
        c.runner
            .map_pool(pool.id, &pool.axes, &pool.layout, &pool.inputs_ro)
            .map_err(|lost| TimingStop::Runner { index: i, lost })?;
    }
    Ok(())
}

/// The order of `n` contenders in round `round`: rotated a place each round, so that every
/// contender runs in every place equally often (the harness's `timing.round_order`).
fn round_order(round: usize, n: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |j| (round + j) % n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_contender_runs_in_every_place_equally_often() {
        for n in 1..5 {
            for place in 0..n {
                let mut at: Vec<usize> = (0..n)
                    .map(|round| round_order(round, n).nth(place).unwrap())
                    .collect();
                at.sort_unstable();
                assert_eq!(
                    at,
                    (0..n).collect::<Vec<_>>(),
                    "{n} contenders, place {place}"
                );
            }
        }
        let two: Vec<Vec<usize>> = (0..2).map(|r| round_order(r, 2).collect()).collect();
        assert_eq!(two, vec![vec![0, 1], vec![1, 0]]);
    }

    /// A pool's inputs and every contender's outputs stay within `POOL_BYTES`, one set at least.
    #[test]
    fn pools_stay_within_their_memory() {
        let sets = pool_sets_within_budget(244_000, 244_000, 4);
        assert!(sets * (244_000 + 4 * 244_000) <= POOL_BYTES);
        assert!((sets + 1) * (244_000 + 4 * 244_000) > POOL_BYTES);
        assert_eq!(pool_sets_within_budget(1 << 30, 1 << 30, 3), 1);
        assert_eq!(pool_sets_within_budget(0, 0, 0), POOL_BYTES);
    }

    #[test]
    fn batches_last_about_the_target() {
        let plan = TimingPlan::DEFAULT;
        assert_eq!(calls_for(&plan, 0.25), 4);
        assert_eq!(calls_for(&plan, 3.0), 1);
        assert_eq!(calls_for(&plan, 0.0), MAX_BATCH);
        assert_eq!(calls_for(&plan, 1e-9), MAX_BATCH);
    }

    #[test]
    fn cache_sizes_parse() {
        assert_eq!(parse_cache_size("32768K"), Some(32 << 20));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("x"), None);
    }

    #[test]
    fn rotation_covers_the_target_within_bounds() {
        let plan = TimingPlan {
            rotate_bytes: 100 << 20,
            ..TimingPlan::default()
        };
        assert_eq!(rotation_sets(30 << 20, &plan), 4);
        assert_eq!(rotation_sets(1, &plan), MAX_SETS);
        assert_eq!(rotation_sets(1 << 30, &plan), 1);
        assert!(last_level_cache_bytes() > 0);
    }
}
