//! `ksearch export`: the exported kernel is a working drop-in.

use std::path::Path;
use std::process::Command;

use ksearch_core::task::BackendKind;

use crate::support::{json, ksearch, real_run, run_ok, s, sample_run};

const MAIN_C: &str = r#"#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "softmax.h"

int main(void) {
    const int64_t rows = 3, cols = 1001;
    float *x = malloc(sizeof(float) * rows * cols);
    float *y = malloc(sizeof(float) * rows * cols);
    for (int64_t i = 0; i < rows * cols; i++) x[i] = (float)((i * 37) % 101) / 8.0f - 6.0f;
    softmax(x, y, rows, cols);
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0.0;
        for (int64_t c = 0; c < cols; c++) {
            float v = y[r * cols + c];
            if (!(v > 0.0f && v < 1.0f)) { printf("bad y[%ld][%ld] = %g\n", (long)r, (long)c, v); return 1; }
            sum += v;
        }
        if (fabs(sum - 1.0) > 1e-4) { printf("row %ld sums to %g\n", (long)r, sum); return 1; }
    }
    free(x);
    free(y);
    printf("ok\n");
    return 0;
}
"#;

fn run_cmd(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} does not start: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_exported_c_kernel_passes_eval_and_links_into_a_program() {
    let run = real_run();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("export");
    let j = json(&["export", s(run), "-o", s(&out), "--json"]);
    let files: Vec<&str> = j["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    let expected = ["softmax.h", "softmax.c", "provenance.json"].map(|f| out.join(f));
    assert_eq!(files, expected.iter().map(|p| s(p)).collect::<Vec<_>>());
    // Usually a node the search found; the seed when nothing measured faster (noisy machines).
    let best = json(&["show", s(run), "best", "--json"]);

    // The kernel is still a valid candidate, and correct.
    let eval = json(&[
        "eval",
        "cpu/softmax",
        s(&out.join("softmax.c")),
        "--workload",
        "small",
        "--no-timing",
        "--json",
    ]);
    assert_eq!(eval["status"], "passed", "{eval}");

    // The header declares what the source defines, and a program can use both.
    let header = std::fs::read_to_string(out.join("softmax.h")).unwrap();
    assert!(header.contains(
        "void softmax(const float *restrict x, float *restrict y, int64_t rows, int64_t cols);"
    ));
    std::fs::write(out.join("main.c"), MAIN_C).unwrap();
    run_cmd(
        Command::new("cc")
            .current_dir(&out)
            .args([
                "-std=c11",
                "-O3",
                "-march=native",
                "-Wall",
                "-Werror",
                "-o",
                "prog",
            ])
            .args(["main.c", "softmax.c", "-lm"]),
    );
    assert_eq!(run_cmd(&mut Command::new(out.join("prog"))), "ok\n");
    // And a C++ one, where there is a C++ compiler.
    if Command::new("c++")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        std::fs::write(
            out.join("use.cpp"),
            "#include \"softmax.h\"\nint main() { float x[2] = {1, 2}, y[2]; softmax(x, y, 1, 2); return 0; }\n",
        )
        .unwrap();
        run_cmd(
            Command::new("c++")
                .current_dir(&out)
                .args(["-c", "-Wall", "-Werror", "-o", "use.o", "use.cpp"]),
        );
    }

    // Provenance.
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("provenance.json")).unwrap())
            .unwrap();
    assert_eq!(p, j["provenance"]);
    assert_eq!(p["task"]["id"], "cpu/softmax");
    assert_eq!(
        p["task"]["task_toml_sha256"],
        ksearch_store::content_hash(ksearch_tasks::builtin_task_toml("cpu/softmax").unwrap())
    );
    assert_eq!(p["kernel"]["node"], best["node"]["id"]);
    assert_eq!(p["kernel"]["best"], true);
    assert_eq!(p["models"]["proposer"], "builtin");
    assert_eq!(p["run"]["id"].as_str().unwrap().len(), 16);
    assert!(
        p["toolchain"]["compiler"].as_str().unwrap().contains("cc"),
        "{p}"
    );
    assert!(!p["hardware"].as_str().unwrap().is_empty());
    let m = &p["measurements"][0];
    assert_eq!(m["workload"], "small");
    assert_eq!(m["status"], "passed");
    for role in ["candidate", "parent", "baseline"] {
        assert!(m[role]["median_ms"].as_f64().unwrap() > 0.0, "{role}: {m}");
        assert!(m[role]["p10_ms"].as_f64().unwrap() <= m[role]["p90_ms"].as_f64().unwrap());
    }
}

#[test]
fn export_a_chosen_node_and_refuse_an_open_one() {
    let (_tmp, dir) = sample_run(BackendKind::C);
    let out = dir.join("x");
    let text = run_ok(&["export", s(&dir), "-o", s(&out), "--node", "1"]);
    assert!(text.contains("exported node 1"), "{text}");
    let c = std::fs::read_to_string(out.join("softmax.c")).unwrap();
    assert!(c.contains("Not the run's best kernel"), "{c}");
    assert_eq!(run_ok(&["export", s(&dir), "--quiet"]), "");
    assert!(dir.join("export/softmax.c").is_file());
    let refused = ksearch(&["export", s(&dir), "--node", "3"]);
    assert_eq!(refused.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("node 3 is open"));
}

/// A stand-in for `mlx.core`: just enough of it, in plain Python, for the sample's kernel.
const STUB_CORE: &str = r#"import builtins
import math


class A:
    def __init__(self, rows):
        self.rows = [[float(v) for v in r] for r in rows]

    @property
    def shape(self):
        return (len(self.rows), len(self.rows[0]))

    def _zip(self, other, f):
        if isinstance(other, A):
            return A([[f(v, o[j if len(o) > 1 else 0]) for j, v in enumerate(r)] for r, o in zip(self.rows, other.rows)])
        return A([[f(v, other) for v in r] for r in self.rows])

    def __sub__(self, o):
        return self._zip(o, lambda a, b: a - b)

    def __mul__(self, o):
        return self._zip(o, lambda a, b: a * b)

    def __truediv__(self, o):
        return self._zip(o, lambda a, b: a / b)

    def __rtruediv__(self, o):
        return A([[o / v for v in r] for r in self.rows])


def array(rows):
    return A(rows)


def exp(x):
    return A([[math.exp(v) for v in r] for r in x.rows])


def max(x, axis=-1, keepdims=True):
    return A([[builtins.max(r)] for r in x.rows])


def sum(x, axis=-1, keepdims=True):
    return A([[builtins.sum(r)] for r in x.rows])
"#;

fn python(dir: &Path, code: &str, target: Option<&str>) -> std::process::Output {
    let mut cmd = Command::new("python3");
    // -S: no site-packages, so an MLX installed on this machine is not found.
    cmd.args(["-S", "-c", code])
        .current_dir(dir)
        .env_remove("KSEARCH_TARGET");
    if let Some(t) = target {
        cmd.env("KSEARCH_TARGET", t);
    }
    cmd.output().expect("python3 runs")
}

#[test]
#[cfg_attr(not(has_python3), ignore = "needs python3")]
fn the_exported_mlx_package_is_valid_python_and_calls_the_candidate() {
    let (_tmp, dir) = sample_run(BackendKind::Mlx);
    let out = dir.join("x");
    run_ok(&["export", s(&dir), "-o", s(&out), "--quiet"]);
    let init = out.join("softmax/__init__.py");
    let candidate = out.join("softmax/_candidate.py");
    run_cmd(Command::new("python3").args(["-m", "py_compile", s(&init), s(&candidate)]));
    let text = std::fs::read_to_string(&init).unwrap();
    assert!(
        text.contains("def softmax(x, *, rows=None, cols=None):"),
        "{text}"
    );

    // Without MLX, importing says what is missing.
    let o = python(&out, "import softmax", None);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("ImportError: softmax needs MLX"), "{err}");

    // With a stand-in MLX, the function calls the candidate's `run` with the axes taken from
    // the input's shape, and the candidate sees KSEARCH_TARGET as under the harness.
    let stub = out.join("stub/mlx");
    std::fs::create_dir_all(&stub).unwrap();
    std::fs::write(stub.join("__init__.py"), "").unwrap();
    std::fs::write(stub.join("core.py"), STUB_CORE).unwrap();
    let code = "import sys; sys.path[:0] = ['stub', '.']\n\
                import mlx.core as mx, softmax\n\
                y = softmax.softmax(mx.array([[1, 2, 3], [0, 0, 0]]))\n\
                print(softmax._candidate._TARGET, [round(sum(r), 6) for r in y.rows], round(y.rows[1][0], 6))";
    for (target, expect) in [(Some("cuda"), "cuda"), (None, "metal")] {
        let o = python(&out, code, target);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            format!("{expect} [1.0, 1.0] 0.333333\n")
        );
    }
}

/// The torch package `ksearch export` writes for `task` (a built-in) when node 4's candidate is
/// `candidate`, under `dir`.
fn torch_export(dir: &Path, task: &str, candidate: &str) {
    let mut data = ksearch_report::sample::run_data(BackendKind::Torch);
    data.task = ksearch_tasks::load_task(task).unwrap();
    let hash = data
        .tree
        .get(4)
        .unwrap()
        .solution
        .as_ref()
        .unwrap()
        .source_hash
        .clone();
    data.sources.insert(hash, candidate.to_owned());
    let export = ksearch_report::export::export_with(&data, 4, None).unwrap();
    ksearch_report::export::write(&export, dir).unwrap();
}

fn torch_python(dir: &Path, code: &str) -> String {
    run_cmd(
        Command::new("python3")
            .args(["-c", code])
            .current_dir(dir)
            .env("KSEARCH_DEVICE", "cpu"),
    )
}

#[test]
#[cfg_attr(not(has_torch), ignore = "needs python3 with PyTorch")]
fn the_exported_torch_package_calls_run_with_the_axes_its_signature_takes() {
    let tmp = tempfile::tempdir().unwrap();
    // FlashInfer-Bench's `run(A, B)`, which takes no axes and returns a dict.
    let bare = tmp.path().join("bare");
    torch_export(
        &bare,
        "torch/gemm",
        "import torch\n\ndef run(A, B):\n    return {\"C\": torch.matmul(A, B.T)}\n",
    );
    // A `run` naming two of the three axes, as keywords.
    let named = tmp.path().join("named");
    torch_export(
        &named,
        "torch/gemm",
        "import torch\n\ndef run(A, B, *, M, K):\n    assert (M, K) == tuple(A.shape), (M, K)\n    return torch.matmul(A, B.T) + KSEARCH_TARGET.count('cpu')\n",
    );
    let code = "import torch, gemm_n_4096_k_4096 as g\n\
                torch.manual_seed(0)\n\
                A, B = torch.randn(8, 16), torch.randn(4, 16)\n\
                C = g.gemm_n_4096_k_4096(A, B)\n\
                print(type(C).__name__, tuple(C.shape), round(float((C - A @ B.T).abs().max()), 4))";
    assert_eq!(torch_python(&bare, code), "Tensor (8, 4) 0.0\n");
    // The candidate saw KSEARCH_TARGET = "cpu" and its two axes.
    assert_eq!(torch_python(&named, code), "Tensor (8, 4) 1.0\n");
    assert!(!bare.join("gemm_n_4096_k_4096/_reference.py").exists());
}

#[test]
#[cfg_attr(not(has_torch), ignore = "needs python3 with PyTorch")]
fn the_exported_torch_package_builds_model_new_as_the_harness_does() {
    let tmp = tempfile::tempdir().unwrap();
    // A ModelNew computing the problem's Gemm, multiply and LeakyReLU its own way, from the
    // same parameters made in the same order: it has the Model's weights only when it is built
    // with the task's constructor arguments right after torch.manual_seed(42).
    let candidate = "import torch\n\n\
        class ModelNew(torch.nn.Module):\n\
        \x20   def __init__(self, in_features, out_features, multiplier, negative_slope):\n\
        \x20       super().__init__()\n\
        \x20       self.gemm = torch.nn.Linear(in_features, out_features)\n\
        \x20       self.multiplier, self.slope = multiplier, negative_slope\n\n\
        \x20   def forward(self, x):\n\
        \x20       y = torch.addmm(self.gemm.bias, x, self.gemm.weight.T) * self.multiplier\n\
        \x20       return torch.where(y > 0, y, y * self.slope)\n";
    torch_export(tmp.path(), "torch/kb_l2_gemm_multiply_leakyrelu", candidate);
    let pkg = "kernelbench_12_gemm_multiply_leakyrelu";
    assert!(tmp.path().join(pkg).join("_reference.py").exists());
    let code = format!(
        "import torch, {pkg} as k\n\
         import importlib.util as u\n\
         spec = u.spec_from_file_location('problem', '{pkg}/_reference.py')\n\
         p = u.module_from_spec(spec); spec.loader.exec_module(p)\n\
         x = torch.rand(4, 64)\n\
         y = k.{pkg}(x)\n\
         p.in_features = 64\n\
         torch.manual_seed(42)\n\
         want = p.Model(*p.get_init_inputs())(x)\n\
         other = k.{pkg}(x, in_features=64)\n\
         print(tuple(y.shape), bool(torch.allclose(y, want, atol=1e-5)), bool(torch.equal(y, other)))"
    );
    assert_eq!(torch_python(tmp.path(), &code), "(4, 8192) True True\n");
}

#[test]
#[cfg_attr(not(has_torch), ignore = "needs python3 with PyTorch")]
fn the_exported_torch_package_gives_a_model_its_constants_as_the_harness_does() {
    let tmp = tempfile::tempdir().unwrap();
    // A KernelBench problem whose get_inputs returns numbers beside the tensor.
    let task = tmp.path().join("scale_shift");
    run_ok(&[
        "import",
        "kernelbench",
        &format!(
            "{}/tests/fixtures/kernelbench_small/9_Scale_Shift.py",
            env!("CARGO_MANIFEST_DIR")
        ),
        "-o",
        task.to_str().unwrap(),
    ]);
    let candidate = std::fs::read_to_string(format!(
        "{}/tests/fixtures/kernelbench_small/ModelNewScaleShift.py",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let out = tmp.path().join("out");
    torch_export(&out, task.to_str().unwrap(), &candidate);
    let pkg = "kernelbench_9_scale_shift";
    let code = format!(
        "import torch, {pkg} as k\n\
         x = torch.randn(5, 96)\n\
         y = k.{pkg}(x)\n\
         print(tuple(y.shape), bool(torch.allclose(y, (x * 2.5 - 0.25).clamp(min=0.0))))"
    );
    assert_eq!(torch_python(&out, &code), "(5, 96) True\n");
}

/// Text a model or an edited run could put in an action title or a task's description, meant
/// to end the comment of an exported C header (a backslash-newline splice, its trigraph, a
/// bare newline) or the docstring of a Python package, and declare code of its own.
const HOSTILE: &[&str] = &[
    "A *\\\n/ int ksearch_injected_by_splice = 42; /* B",
    "A *\\ \n/ int ksearch_injected_by_spaced_splice = 42; /* B",
    "A *??/\n/ int ksearch_injected_by_trigraph = 42; /* B",
    "A */ int ksearch_injected_by_close = 42; /* B",
    "A\n#define ksearch_injected_by_newline 42\n",
    "A \\\"\"\"\nksearch_injected_by_quotes = 42\n\"\"\" \0 \r B",
];

/// The sample run of `backend` with every hostile text in its best node's title and its
/// task's description, written to a fresh run directory.
fn hostile_run(backend: BackendKind, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let mut data = ksearch_report::sample::run_data(backend);
    let best = data.summary.best.node;
    let nodes = data
        .tree
        .nodes()
        .cloned()
        .map(|mut n| {
            if n.id == best {
                n.action.title = text.to_owned();
            }
            n
        })
        .collect();
    data.tree = ksearch_core::tree::Tree::from_nodes(nodes, data.tree.next_id());
    data.task.spec.description = text.to_owned();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    ksearch_report::sample::write_run(&data, &dir).unwrap();
    (tmp, dir)
}

#[test]
fn a_hostile_title_or_description_cannot_end_the_c_header_s_comment() {
    for text in HOSTILE {
        let (_tmp, dir) = hostile_run(BackendKind::C, text);
        let out = dir.join("x");
        run_ok(&["export", s(&dir), "-o", s(&out), "--quiet"]);
        for file in ["softmax.h", "softmax.c"] {
            // What the compiler sees once comments are gone, trigraphs on (as -std=c89 has
            // them): nothing of the text may be left.
            let seen = run_cmd(Command::new("cc").args([
                "-E",
                "-P",
                "-trigraphs",
                "-x",
                "c",
                s(&out.join(file)),
            ]));
            assert!(
                !seen.contains("ksearch_injected"),
                "{text:?} escaped the comment of {file}:\n{seen}"
            );
        }
    }
}

#[test]
#[cfg_attr(not(has_python3), ignore = "needs python3")]
fn a_hostile_title_or_description_stays_in_the_python_package_s_docstrings() {
    for text in HOSTILE {
        let (_tmp, dir) = hostile_run(BackendKind::Mlx, text);
        let out = dir.join("x");
        run_ok(&["export", s(&dir), "-o", s(&out), "--quiet"]);
        // The module parses, and declares no name the text meant to.
        let names = run_cmd(Command::new("python3").args([
            "-c",
            "import ast, sys\n\
             tree = ast.parse(open(sys.argv[1], encoding='utf-8').read())\n\
             print(' '.join(t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)))",
            s(&out.join("softmax/__init__.py")),
        ]));
        assert!(!names.contains("ksearch_injected"), "{text:?}: {names}");
    }
}

/// The default outputs lie inside the run directory, which may come from someone else: a link
/// planted as `export/`, as a file in it, or as `report.html` is never written through.
#[test]
fn links_planted_among_the_default_outputs_are_not_written_through() {
    let (tmp, dir) = sample_run(BackendKind::C);
    let victim = tmp.path().join("precious");
    std::fs::write(&victim, "keep me").unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();

    // `export/` itself, and `report.html`: refused, naming the link.
    std::os::unix::fs::symlink(&elsewhere, dir.join("export")).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("report.html")).unwrap();
    for (cmd, link) in [
        (vec!["export", s(&dir)], dir.join("export")),
        (vec!["report", s(&dir)], dir.join("report.html")),
    ] {
        let out = ksearch(&cmd);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{cmd:?}: {stderr}");
        assert!(
            stderr.contains(&format!("{} is a symbolic link", link.display())),
            "{cmd:?}: {stderr}"
        );
    }
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");

    // A file in `export/`: replaced by the exported file, its target untouched.
    std::fs::remove_file(dir.join("export")).unwrap();
    std::fs::create_dir(dir.join("export")).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("export/softmax.h")).unwrap();
    run_ok(&["export", s(&dir), "--quiet"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    let header = dir.join("export/softmax.h");
    assert!(!std::fs::symlink_metadata(&header).unwrap().is_symlink());
    assert!(
        std::fs::read_to_string(&header)
            .unwrap()
            .contains("softmax(")
    );
}
