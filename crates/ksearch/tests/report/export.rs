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
