//! Timing: candidate and contenders interleaved round by round on the same rotating input
//! sets, so drift and cache state hit them alike and the last-level cache cannot flatter a
//! kernel by holding its inputs.

use std::time::Instant;

use ksearch_core::protocol::TimingPlan;
use ksearch_core::stats::TimingStats;
use ksearch_core::task::{TaskSpec, Workload};

use super::buffers::{Buffer, CallBuffers};
use super::gauntlet::axis_values;
use super::kernel::Kernel;

/// Upper bounds on rotation, so tiny workloads do not allocate thousands of sets.
const MAX_SETS: usize = 64;
const MAX_ROTATION_BYTES: usize = 2 << 30;
/// A contender gets at least this many samples even when `max_time_ms` runs out.
const MIN_SAMPLES_FLOOR: usize = 3;

/// Size of the largest CPU cache, from sysfs; 32 MiB when unknown.
pub(crate) fn last_level_cache_bytes() -> usize {
    let mut best = (0u32, 0usize);
    for i in 0..16 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let (Ok(level), Ok(size)) = (
            std::fs::read_to_string(format!("{dir}/level")),
            std::fs::read_to_string(format!("{dir}/size")),
        ) else {
            continue;
        };
        let level: u32 = level.trim().parse().unwrap_or(0);
        if let Some(bytes) = parse_cache_size(size.trim())
            && level >= best.0
        {
            best = (level, bytes);
        }
    }
    if best.1 == 0 { 32 << 20 } else { best.1 }
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
    target
        .div_ceil(per)
        .clamp(1, MAX_SETS)
        .min((MAX_ROTATION_BYTES / per).max(1))
}

/// Per-call timing of each kernel on `workload`, in the order given (candidate first).
pub(crate) fn time_workload(
    spec: &TaskSpec,
    workload: &Workload,
    plan: &TimingPlan,
    seed: u64,
    kernels: &[&Kernel],
) -> Vec<TimingStats> {
    let axes = axis_values(spec, workload);
    let n_sets = rotation_sets(spec.bytes_per_call(workload), plan);
    let inputs: Vec<CallBuffers> = (0..n_sets)
        .map(|s| {
            CallBuffers::new(
                &spec.inputs,
                &spec.outputs,
                &workload.axes,
                seed.wrapping_add(s as u64),
                &workload.name,
            )
        })
        .collect();
    let outputs: Vec<Vec<Buffer>> = inputs.iter().map(CallBuffers::fresh_outputs).collect();
    // `inputs` and `outputs` stay alive while these pointers are used.
    let pointers: Vec<Vec<*mut std::ffi::c_void>> = inputs
        .iter()
        .zip(&outputs)
        .map(|(i, o)| i.pointers(o))
        .collect();
    let mut next_set = 0usize;
    let mut run = |k: &Kernel, calls: usize| -> f64 {
        let start = Instant::now();
        for _ in 0..calls {
            // SAFETY: every set's buffers are sized for these axes and outlive the call.
            unsafe { k.call(&pointers[next_set], &axes) };
            next_set = (next_set + 1) % n_sets;
        }
        start.elapsed().as_secs_f64() * 1e3
    };

    // Warm up each kernel, and size its batches from the warm-up calls.
    let mut batch = Vec::with_capacity(kernels.len());
    for k in kernels {
        let (mut calls, mut spent) = (0usize, 0.0f64);
        while calls == 0 || spent < plan.warmup_ms {
            spent += run(k, 1);
            calls += 1;
        }
        let per_call = spent / calls as f64;
        let b = if per_call > 0.0 {
            (plan.target_sample_ms / per_call).ceil() as usize
        } else {
            1000
        };
        batch.push(b.clamp(1, 100_000));
    }

    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); kernels.len()];
    let mut measured = vec![0.0f64; kernels.len()];
    let started = Instant::now();
    let min_runs = plan.min_runs as usize;
    for round in 0usize.. {
        // Alternate the order each round so no kernel always runs first.
        let order: Vec<usize> = if round % 2 == 0 {
            (0..kernels.len()).collect()
        } else {
            (0..kernels.len()).rev().collect()
        };
        for i in order {
            let ms = run(kernels[i], batch[i]);
            samples[i].push(ms / batch[i] as f64);
            measured[i] += ms;
        }
        let enough = (0..kernels.len())
            .all(|i| samples[i].len() >= min_runs && measured[i] >= plan.min_time_ms);
        let out_of_time = started.elapsed().as_secs_f64() * 1e3 >= plan.max_time_ms
            && samples
                .iter()
                .all(|s| s.len() >= MIN_SAMPLES_FLOOR.min(min_runs.max(1)));
        if enough || out_of_time {
            break;
        }
    }
    samples
        .into_iter()
        .zip(batch)
        .map(|(s, b)| TimingStats::from_samples(s, b))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
