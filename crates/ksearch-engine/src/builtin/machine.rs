//! What the builtin proposer's cost models know about the CPU they run on.
//!
//! The model works in cycles of one core. Vector width and cache sizes are read from the
//! machine; the bandwidths are modelling assumptions, kept with their reasons in the knowledge
//! layer's CPU host model (`knowledge/hardware/generic-x86-64.toml`), which also supplies every
//! value detection cannot read. The numbers only need to rank candidates sensibly;
//! measurements correct them.

use fs_err as fs;
use ksearch_core::caveats::{self, PeakFraction};
use ksearch_core::protocol::Role;
use ksearch_core::record::Evaluation;
use ksearch_core::task::Task;
use ksearch_knowledge::HostCpu;

/// The parameters of one CPU core the cost models use: the knowledge layer's CPU model.
pub use ksearch_knowledge::CpuModel as Machine;

/// The CPU host model of the knowledge layer (`knowledge/hardware/generic-x86-64.toml`): an AVX2
/// core with its caches and the bandwidths the cost models assume. For tests and anywhere
/// results must not depend on the host.
pub fn generic() -> Machine {
    ksearch_eval::knowledge()
        .hardware(ksearch_knowledge::CPU_HOST_ID)
        .and_then(ksearch_knowledge::Hardware::cpu_model)
        .expect("the knowledge base describes the CPU host model")
}

/// The host's parameters: the vector width and FMA pipes from `/proc/cpuinfo`, the caches from
/// `/sys/devices/system/cpu/cpu0/cache` (the knowledge layer's [`HostCpu`] detection); any cache
/// size not reported keeps its [`generic`] value.
pub fn detect() -> Machine {
    from_host(&HostCpu::detect())
}

/// The cost model's parameters for a detected CPU.
pub fn from_host(h: &HostCpu) -> Machine {
    let mut m = generic();
    m.vector_bytes = h.vector_bytes;
    m.fma_units = h.fma_units;
    let size = |b: u64| usize::try_from(b).unwrap_or(usize::MAX);
    if let Some(l1) = h.l1d_bytes {
        m.l1_bytes = size(l1);
    }
    if let Some(l2) = h.l2_bytes {
        m.l2_bytes = size(l2);
    }
    match (h.l3_bytes, h.l2_bytes) {
        (Some(l3), _) => m.llc_bytes = size(l3),
        (None, Some(l2)) => m.llc_bytes = size(l2),
        (None, None) => {}
    }
    m
}

/// The CPU's clock in Hz: the highest `cpuinfo_max_freq` in sysfs, else the highest `cpu MHz`
/// of `/proc/cpuinfo` (virtual machines often have only that); `None` where neither says.
pub fn clock_hz() -> Option<f64> {
    let max_freq = fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
        .ok()
        .and_then(|t| t.trim().parse::<f64>().ok())
        .map(|khz| khz * 1e3);
    max_freq
        .or_else(|| clock_from_cpuinfo(&fs::read_to_string("/proc/cpuinfo").ok()?))
        .filter(|hz| hz.is_finite() && *hz > 1e8)
}

/// The highest `cpu MHz` line, in Hz.
fn clock_from_cpuinfo(cpuinfo: &str) -> Option<f64> {
    cpuinfo
        .lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .filter_map(|l| l.split_once(':')?.1.trim().parse::<f64>().ok())
        .map(|mhz| mhz * 1e6)
        .reduce(f64::max)
}

/// How much of this machine's peak the production baseline of `task` reached on each workload
/// it was timed on in `evaluation`: the least time the cost model allows (its operations on
/// every vector pipe, or every byte of the tensors once at the bandwidth of the cache level
/// they fit in, whichever is longer) over the baseline's median time. Empty for a task without
/// a production baseline (its reference is slow on purpose) or without timings.
pub fn peak_fractions(
    task: &Task,
    evaluation: &Evaluation,
    machine: &Machine,
    hz: f64,
) -> Vec<PeakFraction> {
    if task.baseline.is_none() || !task.spec.backend.backend().native() {
        return Vec::new();
    }
    let family = super::families::for_task(&task.spec);
    let spec = &task.spec;
    let dtype_bytes = spec.outputs.first().map_or(4, |t| t.dtype.size_bytes());
    let lanes = (machine.vector_bytes as usize / dtype_bytes).max(1) as f64;
    let flops_per_cycle = 2.0 * f64::from(machine.fma_units.max(1)) * lanes;
    evaluation
        .result
        .workloads
        .iter()
        .filter_map(|w| {
            let median_ms = w.timing(Role::Baseline)?.median_ms;
            let workload = spec.workload(&w.name)?;
            let bytes: usize = spec
                .inputs
                .iter()
                .chain(&spec.outputs)
                .map(|t| t.numel(&workload.axes) * t.dtype.size_bytes())
                .sum();
            let bytes_per_cycle = if bytes <= machine.llc_bytes {
                machine.llc_bytes_per_cycle
            } else {
                machine.dram_bytes_per_cycle
            };
            let flops = family
                .as_ref()
                .map_or(0.0, |f| f.cost(&f.seed(), workload, machine).flops);
            let compute = flops / flops_per_cycle;
            let memory = bytes as f64 / bytes_per_cycle;
            let bound = if compute >= memory {
                format!("{:.1} GFLOP/s", flops_per_cycle * hz / 1e9)
            } else {
                format!("{:.1} GB/s", bytes_per_cycle * hz / 1e9)
            };
            let fraction = compute.max(memory) / (median_ms * 1e-3 * hz);
            fraction.is_finite().then(|| PeakFraction {
                workload: w.name.clone(),
                fraction,
                bound,
            })
        })
        .collect()
}

/// The caveat of a production baseline that reached a small fraction of this machine's peak
/// (see [`peak_fractions`]), where the clock can be read.
pub fn weak_baseline(task: &Task, evaluation: &Evaluation) -> Option<String> {
    let hz = clock_hz()?;
    let machine = detect();
    let fractions = peak_fractions(task, evaluation, &machine, hz);
    let described = format!(
        "{}-bit vectors, {} FMA units, {:.2} GHz",
        machine.vector_bytes * 8,
        machine.fma_units,
        hz / 1e9
    );
    caveats::weak_baseline(&evaluation.baseline_label(), &described, &fractions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detected_cpu_sets_the_width_and_the_caches() {
        let h = HostCpu::parse(
            "vendor_id\t: AuthenticAMD\nflags\t\t: fpu sse avx avx2 fma avx512f\n",
            ksearch_knowledge::CacheSizes {
                l1d: Some(48 * 1024),
                l2: Some(2 * 1024 * 1024),
                l3: None,
            },
            2,
        );
        let m = from_host(&h);
        assert_eq!((m.vector_bytes, m.fma_units), (64, 1));
        assert_eq!((m.l1_bytes, m.l2_bytes), (48 * 1024, 2 * 1024 * 1024));
        assert_eq!(
            m.llc_bytes,
            2 * 1024 * 1024,
            "no L3: the L2 is the last level"
        );
    }

    #[test]
    fn vector_rates() {
        let mut m = generic();
        m.vector_bytes = 64;
        m.fma_units = 1;
        assert_eq!(m.vector_ops_per_cycle(16), 1.0);
        assert_eq!(m.vector_ops_per_cycle(8), 2.0);
        assert_eq!(m.vector_ops_per_cycle(1), 2.0);
        let g = generic();
        assert_eq!(g.vector_ops_per_cycle(8), 2.0);
        assert_eq!(g.vector_ops_per_cycle(16), 1.0);
    }

    #[test]
    fn the_clock_is_the_fastest_core_s() {
        let cpuinfo = "cpu MHz\t\t: 1200.000\ncpu MHz\t\t: 3000.5\nmodel name\t: x\n";
        assert_eq!(clock_from_cpuinfo(cpuinfo), Some(3000.5e6));
        assert_eq!(clock_from_cpuinfo("model name\t: x\n"), None);
    }

    /// OpenBLAS on a CPU it does not know runs its SSE3 kernels: 8.4 GFLOP/s where this
    /// AVX-512 core's peak is 192; the same library tuned for the core reaches 43.
    #[test]
    fn a_baseline_at_a_few_percent_of_the_peak_is_weak() {
        let task = ksearch_tasks_matmul();
        let mut m = generic();
        m.vector_bytes = 64;
        m.fma_units = 2;
        let hz = 3.0e9;
        let flops = 2.0 * 1024f64.powi(3);
        let timed = |gflops: f64| evaluation("square1024", flops / (gflops * 1e9) * 1e3);
        let weak = peak_fractions(&task, &timed(8.4), &m, hz);
        assert_eq!(weak.len(), 1);
        assert!((weak[0].fraction - 8.4 / 192.0).abs() < 1e-9, "{weak:?}");
        assert_eq!(weak[0].bound, "192.0 GFLOP/s");
        let text = caveats::weak_baseline("OpenBLAS", "512-bit", &weak).unwrap();
        assert!(text.contains("at most 4.4%"), "{text}");
        let tuned = peak_fractions(&task, &timed(43.0), &m, hz);
        assert_eq!(caveats::weak_baseline("OpenBLAS", "512-bit", &tuned), None);
        // A task whose baseline is its reference is slow on purpose: no fraction at all.
        let mut plain = task.clone();
        plain.baseline = None;
        assert!(peak_fractions(&plain, &timed(1.0), &m, hz).is_empty());
    }

    fn ksearch_tasks_matmul() -> Task {
        let spec = ksearch_core::parse_task(
            include_str!("../../../../tasks/cpu/matmul/task.toml"),
            "task.toml",
        )
        .expect("the matmul task parses");
        let source = |file: &str| ksearch_core::task::Source {
            file: file.into(),
            text: String::new(),
        };
        Task {
            id: "cpu/matmul".into(),
            baseline: Some(ksearch_core::task::Baseline {
                name: "OpenBLAS".into(),
                source: source("baseline.c"),
                libs: vec!["openblas".into()],
                modules: Vec::new(),
                install: Default::default(),
                env: Default::default(),
            }),
            reference: source("reference.c"),
            seed: source("seed.c"),
            comparisons: Vec::new(),
            space: None,
            worker: None,
            spec,
        }
    }

    fn evaluation(workload: &str, baseline_ms: f64) -> Evaluation {
        use ksearch_core::protocol::{
            ContenderTiming, EvaluateResult, Phases, Status, WorkloadReport,
        };
        use ksearch_core::stats::TimingStats;
        Evaluation {
            result: EvaluateResult {
                id: 1,
                status: Status::Passed,
                message: String::new(),
                compile: None,
                workloads: vec![WorkloadReport {
                    name: workload.into(),
                    status: Status::Passed,
                    message: None,
                    errors: None,
                    timings: vec![ContenderTiming {
                        role: Role::Baseline,
                        label: "OpenBLAS".into(),
                        stats: TimingStats::from_samples(vec![baseline_ms; 3], 1),
                    }],
                }],
                phases: Phases::default(),
                output: Default::default(),
                sandbox: None,
                described: Vec::new(),
            },
            speedup: None,
            speedup_vs_parent: None,
            baseline: "OpenBLAS".into(),
            wall_s: 1.0,
            load: None,
            caveats: Vec::new(),
        }
    }

    #[test]
    fn detect_is_sane() {
        let m = detect();
        assert!(m.vector_bytes >= 16);
        assert!(m.l1_bytes > 0 && m.l2_bytes >= m.l1_bytes && m.llc_bytes >= m.l2_bytes);
        assert!(m.dram_bytes_per_cycle > 0.0 && m.llc_bytes_per_cycle > 0.0);
    }
}
