use ksearch_core::task::KernelClass;
use ksearch_knowledge::{
    CacheSizes, ContextRequest, DEFAULT_BUDGET_CHARS, HostCpu, Level, Platform,
};

use crate::knowledge;

#[test]
fn context_cuda_to_metal_on_m3_max_attention() {
    let k = knowledge();
    let req = ContextRequest::new(Platform::METAL, KernelClass::Attention).with_hardware("m3-max");
    let text = k.render_context(&req);
    assert!(text.chars().count() <= DEFAULT_BUDGET_CHARS);
    insta::assert_snapshot!(text);
}

#[test]
fn context_cuda_to_cuda_on_h200_attention() {
    let k = knowledge();
    let req =
        ContextRequest::new(Platform::CUDA, KernelClass::Attention).with_hardware("NVIDIA H200");
    let text = k.render_context(&req);
    assert!(text.chars().count() <= DEFAULT_BUDGET_CHARS);
    insta::assert_snapshot!(text);
}

/// A C kernel on the CPU: the machine the run measures on (as the run recorded it) heads the
/// block, then the C tactics; GPU-only tactics (SIMD groups, threadgroup tiles) are left out.
#[test]
fn context_c_on_the_host_cpu_reduction() {
    let k = knowledge();
    let cpuinfo = "vendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B14\nflags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw avx512vl\n";
    let caches = CacheSizes {
        l1d: Some(32 << 10),
        l2: Some(1 << 20),
        l3: Some(32 << 20),
    };
    let host = HostCpu::parse(cpuinfo, caches, 2);
    let req = ContextRequest::new(Platform::C, KernelClass::Reduction).with_host(host);
    let text = k.render_context(&req);
    assert!(
        text.contains("#### This machine (detected when the run started)"),
        "{text}"
    );
    assert!(
        text.contains("64 bytes (16 f32 lanes)") && text.contains("L2 1 MiB"),
        "{text}"
    );
    assert!(
        !text.contains("Two-level reduction") && !text.contains("threadgroup"),
        "{text}"
    );
    assert!(text.contains("Several independent accumulators"), "{text}");
    // The machine is part of the hardware level too.
    let hw = k.render_context(&req.clone().with_level(Level::Hardware));
    assert!(
        hw.contains("AMD EPYC 9B14") && !hw.contains("Tactics"),
        "{hw}"
    );
    // A GPU target ignores the host CPU.
    let gpu = k.render_context(
        &ContextRequest::new(Platform::METAL, KernelClass::Reduction)
            .with_host(HostCpu::parse(cpuinfo, caches, 2)),
    );
    assert!(!gpu.contains("This machine"), "{gpu}");
    insta::assert_snapshot!(text);
}

#[test]
fn levels_select_how_much_goes_in() {
    let k = knowledge();
    let req =
        ContextRequest::new(Platform::MLX_METAL, KernelClass::Attention).with_hardware("m4-max");
    assert_eq!(k.render_context(&req.clone().with_level(Level::None)), "");
    let hw = k.render_context(&req.clone().with_level(Level::Hardware).with_budget(100_000));
    let full = k.render_context(&req.clone().with_budget(100_000));
    assert!(hw.contains("Apple M4 Max") && hw.contains("546 GB/s"));
    assert!(!hw.contains("CUDA →") && !hw.contains("Tactics"));
    assert!(full.starts_with(hw.lines().next().expect("a line")));
    assert!(full.contains("CUDA → Metal / MLX") && full.contains("Tactics for attention"));
    assert!(full.contains("Checks every candidate must pass"));
    // MLX targets get the MLX column; plain Metal does not.
    assert!(full.contains("mx.fast.metal_kernel"));
    assert!(!full.contains("Trimmed"));
    for level in ["none", "hardware", "full"] {
        assert_eq!(level.parse::<Level>().map(Level::name), Ok(level));
    }
}

#[test]
fn budgets_are_kept_and_least_relevant_entries_go_first() {
    let k = knowledge();
    let base =
        ContextRequest::new(Platform::MLX_METAL, KernelClass::Attention).with_hardware("m3-max");
    let unlimited = k.render_context(&base.clone().with_budget(1_000_000));
    let mut previous = unlimited.chars().count();
    for budget in [12_000, 8_000, 4_000, 2_000, 1_000, 300] {
        let text = k.render_context(&base.clone().with_budget(budget));
        let n = text.chars().count();
        assert!(n <= budget, "{budget}: {n}");
        assert!(n <= previous);
        previous = n;
        if budget < unlimited.chars().count() {
            // Below the device block's own length the block is cut and nothing else fits.
            assert!(
                text.contains("Trimmed") || budget <= 1_000,
                "{budget}:\n{text}"
            );
        }
    }
    // At a middling budget the device block and the core translations survive; niche entries
    // (importance 1) are shortened or gone first.
    let mid = k.render_context(&base.clone().with_budget(6_000));
    assert!(mid.contains("#### Target: Apple M3 Max"));
    assert!(mid.contains("threadgroup_barrier(mem_flags::mem_threadgroup)"));
    assert!(
        !mid.contains("Warp vote and ballot**"),
        "niche entry kept in full:\n{mid}"
    );
}

#[test]
fn unknown_or_absent_hardware_falls_back_to_defaults() {
    let k = knowledge();
    let none = k.render_context(&ContextRequest::new(
        Platform::METAL,
        KernelClass::Reduction,
    ));
    assert!(none.contains("No device was named"));
    let unknown = k.render_context(
        &ContextRequest::new(Platform::METAL, KernelClass::Reduction).with_hardware("Radeon 7900"),
    );
    assert!(unknown.contains("`Radeon 7900` is not in the knowledge base"));
    // The CPU backend: the cost model's numbers and C tactics, no GPU translation.
    let c = k.render_context(
        &ContextRequest::new(Platform::C, KernelClass::Matmul)
            .with_hardware("generic-x86-64")
            .with_budget(100_000),
    );
    assert!(
        c.contains("dram bytes per cycle: 8 bytes/cycle (assumption)"),
        "{c}"
    );
    assert!(c.contains("Cache blocking on the CPU"));
    assert!(!c.contains("CUDA →"));
}

#[test]
fn for_task_builds_the_request_from_a_task_spec() {
    let toml = r#"
format = 1
name = "softmax"
description = "row softmax"
class = "normalization"
backend = "mlx"
axes = ["rows", "cols"]
workloads = [{ name = "small", axes = { rows = 4, cols = 8 } }, { name = "large", axes = { rows = 64, cols = 4096 } }]
reference = { file = "reference.py" }
seed = { file = "seed.py" }

[[inputs]]
name = "x"
shape = ["rows", "cols"]
dtype = "f32"

[[outputs]]
name = "y"
shape = ["rows", "cols"]
dtype = "f32"
"#;
    let spec = ksearch_core::parse_task(toml, "task.toml").expect("task parses");
    let req = ContextRequest::for_task(&spec, ksearch_knowledge::Target::Metal).expect("valid");
    assert_eq!(req.to, Platform::MLX_METAL);
    assert_eq!(req.class, KernelClass::Normalization);
    assert!(ContextRequest::for_task(&spec, ksearch_knowledge::Target::Cpu).is_err());
}
