//! Each assertion fires on a seeded violation and stays quiet on clean kernels.

use std::collections::BTreeSet;

use ksearch_knowledge::{Knowledge, Platform, Violation};

use crate::{fixture, knowledge};

fn rules(v: &[Violation]) -> Vec<&str> {
    v.iter().map(|v| v.rule.as_str()).collect()
}

fn check(k: &Knowledge, src: &str, p: Platform, hw: Option<&str>) -> Vec<Violation> {
    let hw = hw.map(|h| k.hardware(h).expect("hardware"));
    k.check(src, p, hw)
}

/// Runs a seeded case, asserts exactly `expected` fired (in order), and records the rules seen.
fn seeded(
    k: &Knowledge,
    seen: &mut BTreeSet<String>,
    src: &str,
    p: Platform,
    hw: Option<&str>,
    expected: &[&str],
) -> Vec<Violation> {
    let v = check(k, src, p, hw);
    assert_eq!(rules(&v), expected, "on {p}:\n{src}\n→ {v:#?}");
    seen.extend(v.iter().map(|v| v.rule.clone()));
    v
}

#[test]
fn clean_fixtures_pass_every_rule() {
    let k = knowledge();
    let metal = fixture("metal_attention.metal");
    for hw in [
        None,
        Some("m1-max"),
        Some("m3-max"),
        Some("m4-max"),
        Some("m2-ultra"),
    ] {
        let v = check(&k, &metal, Platform::METAL, hw);
        assert!(v.is_empty(), "{hw:?}: {v:#?}");
    }
    let cuda = fixture("cuda_softmax.cu");
    for hw in [
        None,
        Some("h100-sxm"),
        Some("h200"),
        Some("a100-sxm-80gb"),
        Some("b200"),
    ] {
        let v = check(&k, &cuda, Platform::CUDA, hw);
        assert!(v.is_empty(), "{hw:?}: {v:#?}");
    }
    let mlx = fixture("mlx_softmax.py");
    for hw in [None, Some("m3-max")] {
        let v = check(&k, &mlx, Platform::MLX_METAL, hw);
        assert!(v.is_empty(), "{hw:?}: {v:#?}");
    }
}

#[test]
fn every_rule_fires_on_a_seeded_violation() {
    let k = knowledge();
    let mut seen = BTreeSet::new();
    let metal = fixture("metal_attention.metal");
    let cuda = fixture("cuda_softmax.cu");
    let mlx = fixture("mlx_softmax.py");

    // CUDA tokens in Metal, with the line and the hint.
    let bad = metal.replacen(
        "threadgroup_barrier(mem_flags::mem_threadgroup);",
        "__syncthreads();",
        1,
    );
    let v = seeded(
        &k,
        &mut seen,
        &bad,
        Platform::METAL,
        None,
        &["cuda-token-in-metal"],
    );
    let line = bad
        .lines()
        .position(|l| l.contains("__syncthreads"))
        .expect("seeded")
        + 1;
    assert_eq!(v[0].line, Some(line));
    assert!(
        v[0].message
            .contains("threadgroup_barrier(mem_flags::mem_threadgroup)")
    );
    assert!(
        v[0].message
            .contains("ksearch knowledge show syncthreads --to metal")
    );
    // … and in an MLX kernel string, but not in Python comments or other strings.
    let bad = mlx.replace(
        "uint lid = thread_index_in_threadgroup;",
        "uint lid = threadIdx.x;",
    );
    seeded(
        &k,
        &mut seen,
        &bad,
        Platform::MLX_METAL,
        None,
        &["cuda-token-in-metal"],
    );
    let quiet =
        format!("{mlx}\n# threadIdx and __syncthreads in a comment\nNOTE = 'no __shared__ here'\n");
    seeded(&k, &mut seen, &quiet, Platform::MLX_METAL, None, &[]);

    // Metal tokens in CUDA.
    let bad = cuda.replacen("v = warp_sum(v);", "v = simd_sum(v);", 1);
    seeded(
        &k,
        &mut seen,
        &bad,
        Platform::CUDA,
        None,
        &["metal-token-in-cuda"],
    );

    // A signature in an MLX source string.
    let bad = mlx.replace(
        "SOURCE = \"\"\"\n",
        "SOURCE = \"\"\"\nkernel void softmax_rows(device float* y [[buffer(0)]]) {\n",
    );
    let bad = bad.replacen("\"\"\"\n\n# Built once", "}\n\"\"\"\n\n# Built once", 1);
    seeded(
        &k,
        &mut seen,
        &bad,
        Platform::MLX_METAL,
        None,
        &["mlx-metal-signature-in-source"],
    );
    let cuda_mlx = "import mlx.core as mx\nsrc = \"\"\"\n__global__ void f(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }\n\"\"\"\nk = mx.fast.cuda_kernel(name='f', input_names=['x'], output_names=['y'], source=src)\n";
    seeded(
        &k,
        &mut seen,
        cuda_mlx,
        Platform::MLX_CUDA,
        None,
        &["mlx-cuda-signature-in-source"],
    );

    // Threadgroup memory above 32 KB: BK = 128 makes two 32 KB tiles.
    let bad = metal.replace(
        "constant constexpr uint BK = 32;",
        "constant constexpr uint BK = 128;",
    );
    let v = seeded(
        &k,
        &mut seen,
        &bad,
        Platform::METAL,
        Some("m3-max"),
        &["threadgroup-memory-limit"],
    );
    assert!(v[0].message.contains("65536 bytes"), "{}", v[0].message);
    assert!(v[0].message.contains("Apple M3 Max"), "{}", v[0].message);
    // Sizes from MLX template values and #defines resolve too.
    let tmpl = "import mlx.core as mx\nsrc = '''\n#define PAD 4\nthreadgroup float a[BM * (BK + PAD)];\nthreadgroup T b[BK][BN];\na[0] = 0;\n'''\nk = mx.fast.metal_kernel(name='k', input_names=['x'], output_names=['y'], source=src)\ndef run(x):\n    return k(inputs=[x], template=[('T', mx.float16), ('BM', 64), ('BK', 64), ('BN', 128)], grid=(64, 1, 1), threadgroup=(64, 1, 1), output_shapes=[x.shape], output_dtypes=[x.dtype])[0]\n";
    let v = seeded(
        &k,
        &mut seen,
        tmpl,
        Platform::MLX_METAL,
        None,
        &["threadgroup-memory-limit"],
    );
    // 64·68·4 + 64·128·2 = 17408 + 16384
    assert!(v[0].message.contains("33792 bytes"), "{}", v[0].message);
    assert!(
        v[0].message.contains("no hardware given"),
        "{}",
        v[0].message
    );
    let fits = tmpl.replace("('BN', 128)", "('BN', 64)");
    seeded(&k, &mut seen, &fits, Platform::MLX_METAL, None, &[]);

    // Static __shared__ above 48 KB on CUDA (the device's opt-in limit does not apply to it).
    let bad = cuda.replace(
        "__shared__ float red[kWarps];",
        "__shared__ float red[kWarps][2048];",
    );
    let v = seeded(
        &k,
        &mut seen,
        &bad,
        Platform::CUDA,
        Some("h200"),
        &["static-shared-memory-limit"],
    );
    assert!(v[0].message.contains("65540 bytes"), "{}", v[0].message);
    let dynamic = cuda.replace(
        "__shared__ float red[kWarps];",
        "extern __shared__ float red[];",
    );
    seeded(&k, &mut seen, &dynamic, Platform::CUDA, Some("h200"), &[]);

    // Threadgroup sizes above 1024: MLX tuples, CUDA launches, dim3, launch bounds.
    let bad = mlx.replace("threadgroup=(TG, 1, 1)", "threadgroup=(32, 32, 2)");
    let v = seeded(
        &k,
        &mut seen,
        &bad,
        Platform::MLX_METAL,
        Some("m1-max"),
        &["threadgroup-size-limit"],
    );
    assert!(v[0].message.contains("2048 threads"), "{}", v[0].message);
    let bad = cuda.replace(
        "softmax_rows<<<rows, kThreads, 0, stream>>>",
        "softmax_rows<<<rows, 2048, 0, stream>>>",
    );
    seeded(
        &k,
        &mut seen,
        &bad,
        Platform::CUDA,
        None,
        &["threadgroup-size-limit"],
    );
    let dim3 = "__global__ void k(float* y) { y[0] = 1; }\nvoid go(float* y) { dim3 block(64, 32); k<<<1, block>>>(y); }\n";
    seeded(
        &k,
        &mut seen,
        dim3,
        Platform::CUDA,
        None,
        &["threadgroup-size-limit"],
    );
    let bad = cuda.replace(
        "__launch_bounds__(kThreads)",
        "__launch_bounds__(4 * kThreads + 1)",
    );
    seeded(
        &k,
        &mut seen,
        &bad,
        Platform::CUDA,
        None,
        &["threadgroup-size-limit"],
    );

    // A barrier inside a thread-dependent branch: directly, through a derived variable, in an
    // else branch, in a thread-dependent loop; CUDA too.
    let bad = metal.replacen(
        "    threadgroup_barrier(mem_flags::mem_threadgroup);\n\n    const uint n_valid",
        "    if (lid < 32) {\n      threadgroup_barrier(mem_flags::mem_threadgroup);\n    }\n\n    const uint n_valid",
        1,
    );
    let v = seeded(
        &k,
        &mut seen,
        &bad,
        Platform::METAL,
        None,
        &["barrier-in-divergent-branch"],
    );
    assert!(v[0].message.contains("if (lid < 32)"), "{}", v[0].message);
    assert!(v[0].message.contains("`lid`"), "{}", v[0].message);
    let bad = metal.replacen(
        "    threadgroup_barrier(mem_flags::mem_threadgroup);\n\n    const uint n_valid",
        "    if (active) threadgroup_barrier(mem_flags::mem_threadgroup);\n\n    const uint n_valid",
        1,
    );
    let v = seeded(
        &k,
        &mut seen,
        &bad,
        Platform::METAL,
        None,
        &["barrier-in-divergent-branch"],
    );
    assert!(v[0].message.contains("`active`"), "{}", v[0].message);
    let else_branch = "kernel void k(device float* x [[buffer(0)]], uint lid [[thread_index_in_threadgroup]]) {\n  threadgroup float t[64];\n  if (lid == 0) { t[0] = 1; } else { threadgroup_barrier(mem_flags::mem_threadgroup); }\n  x[lid] = t[0];\n}\n";
    seeded(
        &k,
        &mut seen,
        else_branch,
        Platform::METAL,
        None,
        &["barrier-in-divergent-branch"],
    );
    let in_loop = "kernel void k(device float* x [[buffer(0)]], uint lid [[thread_index_in_threadgroup]]) {\n  threadgroup float t[256];\n  for (uint i = lid; i < 1000; i += 256) {\n    t[lid] = x[i];\n    threadgroup_barrier(mem_flags::mem_threadgroup);\n  }\n}\n";
    seeded(
        &k,
        &mut seen,
        in_loop,
        Platform::METAL,
        None,
        &["barrier-in-divergent-branch"],
    );
    let bad = cuda.replacen(
        "  if (lane == 0) red[warp] = m;\n  __syncthreads();",
        "  if (lane == 0) { red[warp] = m; __syncthreads(); }",
        1,
    );
    seeded(
        &k,
        &mut seen,
        &bad,
        Platform::CUDA,
        None,
        &["barrier-in-divergent-branch"],
    );
    // A branch on a uniform value (the threadgroup index) is fine.
    let uniform = "kernel void k(device float* x [[buffer(0)]], uint3 tg [[threadgroup_position_in_grid]], uint lid [[thread_index_in_threadgroup]]) {\n  threadgroup float t[64];\n  if (tg.x > 0) {\n    t[lid] = x[lid];\n    threadgroup_barrier(mem_flags::mem_threadgroup);\n  }\n}\n";
    seeded(&k, &mut seen, uniform, Platform::METAL, None, &[]);

    // An early return before a barrier.
    let bad = metal.replacen(
        "  const float scale_log2e",
        "  if (!active) return;\n  const float scale_log2e",
        1,
    );
    let v = seeded(
        &k,
        &mut seen,
        &bad,
        Platform::METAL,
        None,
        &["return-before-barrier"],
    );
    assert!(v[0].message.contains("if (!active)"), "{}", v[0].message);
    let bad = mlx.replace(
        "    const device T* xr = x + row * N;",
        "    if (lid >= N) return;\n    const device T* xr = x + row * N;",
    );
    seeded(
        &k,
        &mut seen,
        &bad,
        Platform::MLX_METAL,
        None,
        &["return-before-barrier"],
    );
    // After the last barrier, or under a uniform condition, a return is fine.
    let late = mlx.replace(
        "    const float inv = 1.0f / s;",
        "    if (lid >= N) return;\n    const float inv = 1.0f / s;",
    );
    seeded(&k, &mut seen, &late, Platform::MLX_METAL, None, &[]);
    let uniform = mlx.replace(
        "    const device T* xr = x + row * N;",
        "    if (row >= 4096) return;\n    const device T* xr = x + row * N;",
    );
    seeded(&k, &mut seen, &uniform, Platform::MLX_METAL, None, &[]);

    // MLX grids written as threadgroup counts, directly or through variables; on both backends.
    let bad = mlx.replace(
        "grid=(rows * TG, 1, 1)",
        "grid=((rows * TG + 255) // 256, 1, 1)",
    );
    let bad = bad.replace("threadgroup=(TG, 1, 1)", "threadgroup=(256, 1, 1)");
    let v = seeded(
        &k,
        &mut seen,
        &bad,
        Platform::MLX_METAL,
        None,
        &["mlx-grid-is-threads"],
    );
    assert!(v[0].message.contains("(256, 1, 1)"), "{}", v[0].message);
    let vars = mlx.replace(
        "    rows, cols = x.shape\n",
        "    rows, cols = x.shape\n    groups = (rows + TG - 1) // TG\n    grid = (groups, 1, 1)\n",
    );
    let vars = vars.replace("grid=(rows * TG, 1, 1)", "grid=grid");
    seeded(
        &k,
        &mut seen,
        &vars,
        Platform::MLX_METAL,
        None,
        &["mlx-grid-is-threads"],
    );
    let on_cuda = "import mlx.core as mx\nsrc = 'int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i];'\nk = mx.fast.cuda_kernel(name='copy', input_names=['x', 'n'], output_names=['y'], source=src)\ndef run(x):\n    n = x.size\n    return k(inputs=[x, mx.array(n)], grid=((n + 255) // 256, 1, 1), threadgroup=(256, 1, 1), output_shapes=[x.shape], output_dtypes=[x.dtype])[0]\n";
    seeded(
        &k,
        &mut seen,
        on_cuda,
        Platform::MLX_CUDA,
        None,
        &["mlx-grid-is-threads"],
    );
    let fixed = on_cuda.replace("grid=((n + 255) // 256, 1, 1)", "grid=(n, 1, 1)");
    seeded(&k, &mut seen, &fixed, Platform::MLX_CUDA, None, &[]);
    let no_tg = "import mlx.core as mx\ndef run(x):\n    return k(inputs=[x], grid=(-(-x.size // 128), 1, 1), threadgroup=tg, output_shapes=[x.shape], output_dtypes=[x.dtype])[0]\n";
    seeded(
        &k,
        &mut seen,
        no_tg,
        Platform::MLX_METAL,
        None,
        &["mlx-grid-is-threads"],
    );
    // A thread count that handles 4 elements per thread is not a threadgroup count.
    let vec4 = mlx.replace("grid=(rows * TG, 1, 1)", "grid=((x.size + 3) // 4, 1, 1)");
    seeded(&k, &mut seen, &vec4, Platform::MLX_METAL, None, &[]);

    // Host synchronisation inside the timed run (not elsewhere).
    let bad = mlx.replace("    return _kernel(", "    mx.eval(x)\n    return _kernel(");
    let v = seeded(
        &k,
        &mut seen,
        &bad,
        Platform::MLX_METAL,
        None,
        &["mlx-host-sync-in-run"],
    );
    assert!(v[0].message.starts_with("`mx.eval(`"), "{}", v[0].message);
    let item = mlx.replace(
        "    rows, cols = x.shape\n",
        "    rows, cols = x.shape\n    n = x.sum().item()\n    host = np.array(x)\n",
    );
    let v = seeded(
        &k,
        &mut seen,
        &item,
        Platform::MLX_METAL,
        None,
        &["mlx-host-sync-in-run", "mlx-host-sync-in-run"],
    );
    assert!(v[1].message.starts_with("`np.array(`"), "{}", v[1].message);

    // Every rule in the knowledge base has a seeded case above.
    let all: BTreeSet<String> = k.rules.iter().map(|r| r.id().to_owned()).collect();
    let missing: Vec<_> = all.difference(&seen).collect();
    assert!(
        missing.is_empty(),
        "rules without a seeded violation: {missing:?}"
    );
}

#[test]
fn rules_apply_only_to_their_platforms() {
    let k = knowledge();
    // CUDA code checked as CUDA is fine; the same code checked as Metal is not.
    let cuda = fixture("cuda_softmax.cu");
    let v = check(&k, &cuda, Platform::METAL, None);
    assert!(v.iter().all(|v| v.rule == "cuda-token-in-metal"), "{v:#?}");
    assert!(v.len() >= 3);
    // No rules for C.
    assert_eq!(k.rules_for(Platform::C).count(), 0);
    assert!(check(&k, "__syncthreads();", Platform::C, None).is_empty());
}

#[test]
fn checks_never_panic_on_truncated_or_odd_sources() {
    // Every candidate goes through these checks: a panic would take the run down.
    let k = knowledge();
    let sources = [
        fixture("metal_attention.metal"),
        fixture("cuda_softmax.cu"),
        fixture("mlx_softmax.py"),
        "'''\"\"\"unterminated ' \" /* { ( [ <<< grid=( threadgroup=(".to_owned(),
        "é×∑ threadgroup float a[3 × 4]; if (lid) { threadgroup_barrier( }".to_owned(),
        "def run(:\n  mx.eval(\nf\"{{{\"\nx = '\\".to_owned(),
    ];
    for src in &sources {
        let cuts: Vec<usize> = (0..=src.len())
            .step_by(29)
            .filter(|&i| src.is_char_boundary(i))
            .collect();
        for cut in cuts {
            let text = &src[..cut];
            for p in Platform::ALL {
                let _ = k.check(text, p, None);
            }
        }
    }
}
