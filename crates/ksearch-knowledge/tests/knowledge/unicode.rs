//! Sources with non-ASCII text: the checker runs in the orchestrator on every model answer, so
//! it must never panic, and it must keep finding what it finds in ASCII sources.

use std::panic::{AssertUnwindSafe, catch_unwind};

use ksearch_core::rng::Rng;
use ksearch_knowledge::{Knowledge, Platform, Violation};

use crate::{fixture, knowledge};

fn rules(v: &[Violation]) -> Vec<&str> {
    v.iter().map(|v| v.rule.as_str()).collect()
}

/// Every platform, with and without hardware limits.
fn check_everywhere(k: &Knowledge, src: &str) {
    for p in Platform::ALL {
        for hw in [None, Some("m3-max"), Some("h200")] {
            let hw = hw.map(|h| k.hardware(h).expect("hardware"));
            let _ = k.check(src, p, hw);
        }
    }
}

#[test]
fn a_non_ascii_python_name_for_a_kernel_string() {
    let k = knowledge();
    // The kernel string is assigned to `src_σ`: it is found, read, and its CUDA token reported
    // on its own line.
    let src = "import mlx.core as mx\nsrc_σ = \"\"\"\n    uint i = threadIdx.x;\n    y[i] = x[i];\n\"\"\"\nk = mx.fast.metal_kernel(name='k', input_names=['x'], output_names=['y'], source=src_σ)\n";
    let v = k.check(src, Platform::MLX_METAL, None);
    assert_eq!(rules(&v), ["cuda-token-in-metal"], "{v:#?}");
    assert_eq!(v[0].line, Some(3));
    check_everywhere(&k, src);
    // A string named for the other target, with a non-ASCII name, is left out for this one.
    let both = src.replace("src_σ", "cuda_src_σ");
    assert!(k.check(&both, Platform::MLX_METAL, None).is_empty());
    let named = src.replace("src_σ = ", "σ = ");
    assert_eq!(
        rules(&k.check(&named, Platform::MLX_METAL, None)),
        ["cuda-token-in-metal"]
    );
}

#[test]
fn non_ascii_keyword_argument_values() {
    let k = knowledge();
    let mlx = fixture("mlx_softmax.py");
    // `threadgroup=τ(…)` and `grid=γ`: values the checker cannot read, and must skip.
    for (from, to) in [
        ("threadgroup=(TG, 1, 1)", "threadgroup=τ(TG, 1, 1)"),
        ("threadgroup=(TG, 1, 1)", "threadgroup=τ"),
        ("grid=(rows * TG, 1, 1)", "grid=γ(rows * TG, 1, 1)"),
        ("grid=(rows * TG, 1, 1)", "grid=é"),
    ] {
        assert!(mlx.contains(from), "fixture lacks {from}");
        let src = mlx.replace(from, to);
        let v = k.check(
            &src,
            Platform::MLX_METAL,
            Some(k.hardware("m1-max").unwrap()),
        );
        assert!(v.is_empty(), "{to}: {v:#?}");
        check_everywhere(&k, &src);
    }
    // Names holding the values are followed as before when they are non-ASCII.
    let src = mlx.replace("threadgroup=(TG, 1, 1)", "threadgroup=(32, 32, 2)");
    let v = k.check(
        &src,
        Platform::MLX_METAL,
        Some(k.hardware("m1-max").unwrap()),
    );
    assert_eq!(rules(&v), ["threadgroup-size-limit"]);
}

#[test]
fn non_ascii_identifiers_strings_and_comments_in_c_like_sources() {
    let k = knowledge();
    // Metal: a comment and a string in another script, a non-ASCII variable, then a CUDA
    // token; the violation is on the line where it is written.
    let metal = "// Noyau « softmax » — écrit à la main, 東京\n#include <metal_stdlib>\nusing namespace metal;\n/* ∑ exp(xᵢ) */\nkernel void k(device float* x [[buffer(0)]], uint lid [[thread_index_in_threadgroup]]) {\n  float σ = x[lid]; // σ: l'écart\n  const char* s = \"ünïcödé __syncthreads\";\n  __syncthreads();\n  x[lid] = σ;\n}\n";
    let v = k.check(metal, Platform::METAL, None);
    assert_eq!(rules(&v), ["cuda-token-in-metal"], "{v:#?}");
    assert_eq!(v[0].line, Some(8));
    check_everywhere(&k, metal);

    // CUDA: a barrier in a branch on a non-ASCII variable derived from the thread index.
    let cuda = "// 线程\n__global__ void k(float* y) {\n  int ñ = threadIdx.x;\n  if (ñ < 32) { __syncthreads(); }\n  y[ñ] = 1.0f; /* fin */\n}\n";
    check_everywhere(&k, cuda);
    let v = k.check(cuda, Platform::CUDA, None);
    assert!(v.iter().all(|v| v.line.is_some()), "{v:#?}");

    // C: non-ASCII in every place a C source may hold it.
    let c = "/* größe */\n#define N 4 // Größe\nstatic const char *msg = \"naïve\";\nstatic char c = 'é';\nvoid softmax(const float *restrict x, float *restrict y, long n) { float µ = x[0]; y[0] = µ; }\n";
    assert!(k.check(c, Platform::C, None).is_empty());
    check_everywhere(&k, c);
}

#[test]
fn unterminated_literals_and_comments_with_non_ascii_text() {
    let k = knowledge();
    for src in [
        "s = \"\"\"σ",
        "s = 'τ",
        "s = f\"{σ",
        "s = f\"{{σ}}\"",
        "x = r'\\é'",
        "/* é",
        "// é\\",
        "\"é\\",
        "'\\é'",
        "char c = 'éééééééé';",
        "threadgroup=τ",
        "grid=σ",
        "k(threadgroup=",
        "k(grid=(σ, τ), threadgroup=(é,))",
        "dim3 b(σ, 2); k<<<1, b>>>(y);",
        "__launch_bounds__(σ)",
        "template=[(\"σ\", mx.float16)]",
        "#define Σ 4\nthreadgroup float a[Σ];",
        "def run(σ):\n    return σ",
    ] {
        check_everywhere(&k, src);
    }
}

/// Pieces the rules look for, mixed with non-ASCII characters of every UTF-8 length.
const PIECES: &[&str] = &[
    "threadgroup=",
    "grid=",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ";",
    "\n",
    " ",
    "\t",
    "=",
    "\"",
    "'",
    "\"\"\"",
    "'''",
    "f\"",
    "r'",
    "#",
    "//",
    "/*",
    "*/",
    "\\",
    "<<<",
    ">>>",
    "dim3 b(",
    "__launch_bounds__(",
    "max_total_threads_per_threadgroup(",
    "template=[(",
    "mx.float16",
    "#define N ",
    "constexpr int K = ",
    "threadgroup float t[",
    "__shared__ float s[",
    "if (",
    "else ",
    "for (",
    "while (",
    "do ",
    "return;",
    "__syncthreads();",
    "threadgroup_barrier(mem_flags::mem_threadgroup);",
    "threadIdx.x",
    "lid",
    "thread_index_in_threadgroup",
    "uint lid [[thread_index_in_threadgroup]]",
    "kernel void k(",
    "__global__ void k(",
    "def run(x):\n    ",
    "source=",
    "SOURCE = \"\"\"",
    "CUDA_SOURCE = '",
    "metal_kernel(",
    "cuda_kernel(",
    "//",
    "(n + 255) // 256",
    "TG",
    "256",
    "σ",
    "τ",
    "é",
    "µ",
    "ß",
    "中",
    "東京",
    "🚀",
    "𝔘",
    "\u{00a0}",
    "\u{3000}",
    "\u{200b}",
    "\u{0301}",
    "\u{202e}",
    "\u{feff}",
    "ǅ",
    "İ",
    "ﬀ",
];

fn random_source(rng: &mut Rng) -> String {
    let n = rng.randint(1, 60) as usize;
    let mut s = String::new();
    for _ in 0..n {
        if rng.next_f64() < 0.15 {
            // Any scalar value at all.
            let c = loop {
                if let Some(c) = char::from_u32(rng.randint(0, 0x10_FFFF) as u32) {
                    break c;
                }
            };
            s.push(c);
        } else {
            s.push_str(PIECES[rng.randint(0, PIECES.len() as i64 - 1) as usize]);
        }
    }
    s
}

#[test]
fn random_unicode_sources_never_panic() {
    let k = knowledge();
    // KSEARCH_FUZZ_CASES and KSEARCH_FUZZ_SEED run a longer or another search.
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let mut rng = Rng::new(env("KSEARCH_FUZZ_SEED", 0x5eed));
    let hardware = [
        None,
        Some(k.hardware("m1-max").unwrap()),
        Some(k.hardware("h200").unwrap()),
    ];
    for case in 0..env("KSEARCH_FUZZ_CASES", 300) as usize {
        let src = random_source(&mut rng);
        for p in Platform::ALL {
            let hw = hardware[case % hardware.len()];
            let outcome = catch_unwind(AssertUnwindSafe(|| k.check(&src, p, hw)));
            assert!(outcome.is_ok(), "case {case} on {p} panicked on {src:?}");
            // Lines point into the source.
            for v in outcome.unwrap() {
                let line = v.line.unwrap_or(1);
                assert!(
                    line >= 1 && line <= src.lines().count().max(1) + 1,
                    "{v:?} in {src:?}"
                );
            }
        }
    }
}
