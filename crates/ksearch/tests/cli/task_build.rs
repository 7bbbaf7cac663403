//! `[build]` of a c task and the compiler the user names: C++ sources, extra flags and
//! libraries, and `CC` with arguments.

use std::path::{Path, PathBuf};

use super::{QUICK, ksearch, run};

/// The built-in softmax task, its sources as they are, with `build` appended to its task.toml.
fn softmax_with(dir: &Path, build: &str) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/cpu/softmax");
    let task = dir.join("softmax");
    std::fs::create_dir_all(&task).unwrap();
    for f in ["reference.c", "seed.c"] {
        std::fs::copy(from.join(f), task.join(f)).unwrap();
    }
    let toml = std::fs::read_to_string(from.join("task.toml")).unwrap();
    std::fs::write(task.join("task.toml"), format!("{toml}\n{build}")).unwrap();
    task
}

fn eval(task: &Path, candidate: &Path, env: &[(&str, &str)]) -> (i32, serde_json::Value, String) {
    let mut args = vec![
        "eval",
        task.to_str().unwrap(),
        candidate.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(QUICK);
    let mut cmd = ksearch(&args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (code, stdout, stderr) = run(&mut cmd);
    let j =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout} {stderr}"));
    (code, j, stderr)
}

/// A C++ candidate (a template, `std::max`), built with the task's flags: it passes only when
/// it is compiled as C++ with them.
#[test]
fn a_cxx_task_builds_cxx_candidates_with_its_flags_and_libraries() {
    let dir = tempfile::tempdir().unwrap();
    let task = softmax_with(
        dir.path(),
        "[build]\ncxx = true\ncflags = [\"-DKSQ_TASK_FLAG=1\"]\nlibs = [\"m\"]\n",
    );
    let candidate = dir.path().join("candidate.cpp");
    std::fs::write(
        &candidate,
        r#"#include <algorithm>
#include <cmath>
#include <cstdint>
#if !KSQ_TASK_FLAG
#error "built without the task's cflags"
#endif
template <typename T> static T largest(const T *x, int64_t n) {
    T m = x[0];
    for (int64_t i = 1; i < n; i++) m = std::max(m, x[i]);
    return m;
}
void softmax(const float *restrict x, float *restrict y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float m = largest(xr, cols), s = 0.0f;
        for (int64_t c = 0; c < cols; c++) { yr[c] = std::exp(xr[c] - m); s += yr[c]; }
        for (int64_t c = 0; c < cols; c++) yr[c] /= s;
    }
}
"#,
    )
    .unwrap();
    let (code, j, stderr) = eval(&task, &candidate, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(j["status"], "passed", "{j}");
    let command = j["compile"]["command"].as_str().unwrap();
    assert!(
        command.contains("ksearch_shim.cpp")
            && command.contains("-DKSQ_TASK_FLAG=1")
            && command.contains("-lm"),
        "{command}"
    );
    // The contract says C++.
    let (_, contract, _) = run(&mut ksearch(&["contract", task.to_str().unwrap()]));
    assert!(contract.contains("(C++17, not static"), "{contract}");
}

#[test]
fn cc_may_carry_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let task = softmax_with(dir.path(), "");
    let candidate = dir.path().join("candidate.c");
    let seed = std::fs::read_to_string(task.join("seed.c")).unwrap();
    std::fs::write(
        &candidate,
        format!("#if !KSQ_FROM_CC\n#error \"built without CC's arguments\"\n#endif\n{seed}"),
    )
    .unwrap();
    let (code, j, stderr) = eval(&task, &candidate, &[("CC", "cc -DKSQ_FROM_CC=1")]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(j["status"], "passed", "{j}");
}
