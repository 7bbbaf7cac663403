//! The `ksearch` binary as a user runs it.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

mod baselines;
mod external_worker;
mod fallback;
mod import;
#[path = "../common/softmax_kernels.rs"]
mod kernels;
mod libraries;
mod limits;
mod newcomer;
mod paged_attention;
mod space;
mod space_compiled;
mod space_emulated;
mod task_build;
mod unprivileged;

fn ksearch(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ksearch"));
    c.args(args);
    c
}

fn run(cmd: &mut Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("ksearch runs");
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

const QUICK: &[&str] = &[
    "--workload",
    "small",
    "--min-runs",
    "3",
    "--min-time-ms",
    "5",
    "--warmup-ms",
    "1",
];

fn eval_json(task: &str, candidate: Option<&Path>, extra_env: &[(&str, &str)]) -> (i32, Value) {
    let mut args = vec!["eval", task];
    let cand;
    if let Some(p) = candidate {
        cand = p.display().to_string();
        args.push(&cand);
    }
    args.push("--json");
    args.extend_from_slice(QUICK);
    let mut cmd = ksearch(&args);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let (code, stdout, stderr) = run(&mut cmd);
    let json = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is one JSON object ({e}): {stdout:?} {stderr}"));
    (code, json)
}

#[test]
fn tasks_lists_the_builtin_cpu_tasks() {
    let (code, stdout, _) = run(&mut ksearch(&["tasks"]));
    assert_eq!(code, 0);
    for name in [
        "cpu/softmax",
        "cpu/matmul",
        "cpu/linear_recurrence",
        "cpu/rmsnorm",
        "mlx/paged_attention",
        "torch/gemm",
        "torch/gemm_bf16",
        "torch/gqa_paged_decode",
        "torch/kb_l1_softmax",
    ] {
        assert!(stdout.contains(name), "{stdout}");
    }
    // Each workload's size, the axes in the task's order.
    assert!(
        stdout.contains("sizes: small (m=67 n=45 k=83) · square1024 (m=1024 n=1024 k=1024)"),
        "{stdout}"
    );
    let (_, json, _) = run(&mut ksearch(&["tasks", "--json"]));
    let rows: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        rows.as_array().unwrap().len(),
        17,
        "four cpu, four mlx and nine torch tasks"
    );
    let matmul = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "cpu/matmul")
        .unwrap();
    assert_eq!(matmul["sizes"][1]["workload"], "square1024");
    assert_eq!(matmul["sizes"][1]["axes"]["k"], 1024);
}

#[test]
fn eval_json_has_the_documented_shape() {
    for task in ["cpu/softmax", "cpu/matmul", "cpu/linear_recurrence"] {
        let (code, j) = eval_json(task, None, &[]);
        assert_eq!(code, 0);
        assert_eq!(j["status"], "passed", "{task}: {j}");
        assert!(j["speedup"].as_f64().unwrap() > 0.0);
        let w = &j["workloads"][0];
        assert_eq!(w["name"], "small");
        for key in ["max_abs_err", "max_rel_err", "norm_rel_err", "speedup"] {
            assert!(w[key].is_number(), "{task}: workloads[0].{key} in {w}");
        }
        for key in ["median", "p10", "p90"] {
            assert!(w["latency_ms"][key].as_f64().unwrap() > 0.0, "{w}");
            assert!(w["baseline_latency_ms"][key].as_f64().unwrap() > 0.0, "{w}");
        }
        for key in ["compile", "check", "timing", "total"] {
            assert!(j["time_s"][key].is_number(), "time_s.{key}");
        }
    }
}

#[test]
fn a_failing_candidate_still_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zeros.c");
    std::fs::write(&path, "#include <stdint.h>\n#include <string.h>\nvoid softmax(const float *x, float *y, int64_t rows, int64_t cols) { memset(y, 0, 4 * rows * cols); }\n").unwrap();
    let (code, j) = eval_json("cpu/softmax", Some(&path), &[]);
    assert_eq!(code, 0);
    assert_eq!(j["status"], "incorrect");
    assert!(j["speedup"].is_null());
}

/// What a candidate prints reaches the report as text: the control sequences in it (clear the
/// screen, set the window title, paint a forged "passed") are shown, not obeyed.
#[test]
fn a_candidates_control_sequences_never_reach_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("escapes.c");
    std::fs::write(&path, "#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\nvoid softmax(const float *x, float *y, int64_t rows, int64_t cols) { printf(\"\\x1b[2J\\x1b]0;pwned\\x07\\x1b[32mpassed 99x\\x1b[0m\\n\"); fflush(stdout); exit(3); }\n").unwrap();
    let mut args = vec!["eval", "cpu/softmax", path.to_str().unwrap()];
    args.extend_from_slice(QUICK);
    let (code, stdout, stderr) = run(&mut ksearch(&args));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("runtime_error"), "{stdout}");
    assert!(
        stdout.contains("\\u{1b}]0;pwned"),
        "the output is shown: {stdout:?}"
    );
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
        "{stdout:?}"
    );
}

#[test]
fn a_rejected_candidate_names_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("main.c");
    std::fs::write(&path, "#include <stdint.h>\nvoid softmax(const float *x, float *y, int64_t r, int64_t c) {}\nint main(void) { return 0; }\n").unwrap();
    let (code, j) = eval_json("cpu/softmax", Some(&path), &[]);
    assert_eq!(code, 0);
    assert_eq!(j["status"], "rejected");
    assert!(j["message"].as_str().unwrap().contains("main.c:3:"), "{j}");
}

#[test]
fn secrets_do_not_reach_candidate_code() {
    // The candidate looks for the secrets in its environment and in every process it can see
    // (`/proc/*/environ` and `/proc/*/cmdline`: the orchestrator's hold them), prints what it
    // finds, and is correct only if it finds nothing. Its environment is the runner's own: not
    // even a plain variable of the user's arrives.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snoop.c");
    std::fs::write(
        &path,
        r#"#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int scan(const char *file) {
    FILE *f = fopen(file, "r"); if (!f) return 0;
    char buf[1 << 16]; size_t n = fread(buf, 1, sizeof buf - 1, f); fclose(f);
    for (size_t i = 0; i < n; i++) if (buf[i] == 0) buf[i] = ' ';
    buf[n] = 0;
    char *hit = strstr(buf, "sk-test-should-not-leak");
    if (hit) printf("LEAKED from %s\n", file);
    return hit != 0;
}
void softmax(const float *x, float *y, int64_t rows, int64_t cols) {
    int leaked = getenv("OPENAI_API_KEY") || getenv("ANTHROPIC_API_KEY") || getenv("HF_TOKEN") || getenv("MY_SECRET") || getenv("PLAIN_VAR_FOR_TEST");
    DIR *d = opendir("/proc"); struct dirent *e; char p[300];
    while (d && (e = readdir(d))) {
        snprintf(p, sizeof p, "/proc/%s/environ", e->d_name); leaked |= scan(p);
        snprintf(p, sizeof p, "/proc/%s/cmdline", e->d_name); leaked |= scan(p);
    }
    if (d) closedir(d);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols; float *yr = y + r * cols;
        float m = xr[0];
        for (int64_t c = 1; c < cols; c++) if (xr[c] > m) m = xr[c];
        float s = 0.0f;
        for (int64_t c = 0; c < cols; c++) { yr[c] = expf(xr[c] - m); s += yr[c]; }
        for (int64_t c = 0; c < cols; c++) yr[c] = leaked ? 0.0f : yr[c] / s;
    }
}
"#,
    )
    .unwrap();
    let env = [
        ("OPENAI_API_KEY", "sk-test-should-not-leak"),
        ("ANTHROPIC_API_KEY", "sk-ant"),
        ("HF_TOKEN", "hf"),
        ("MY_SECRET", "s"),
        ("PLAIN_VAR_FOR_TEST", "sk-test-should-not-leak too"),
    ];
    let (code, j) = eval_json("cpu/softmax", Some(&path), &env);
    assert_eq!(code, 0);
    assert_eq!(j["status"], "passed", "{j}");
    assert!(!j.to_string().contains("LEAKED"), "{j}");
}

#[test]
fn a_malformed_task_names_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let toml = ksearch_tasks::builtin_task_toml("cpu/softmax")
        .unwrap()
        .replace(
            "dtype = \"f32\"\n# Logits",
            "dtype = \"f32\"\nshapes = 3\n# Logits",
        );
    std::fs::write(dir.path().join("task.toml"), &toml).unwrap();
    let (code, stdout, stderr) = run(&mut ksearch(&["eval", dir.path().to_str().unwrap()]));
    assert_eq!(code, 3, "{stdout}{stderr}");
    let line = toml.lines().position(|l| l == "shapes = 3").unwrap() + 1;
    let expected = format!(
        "{}:{line}:1: field `inputs[0].shapes`: unknown field `shapes`",
        dir.path().join("task.toml").display()
    );
    assert!(stderr.contains(&expected), "{stderr}\nexpected: {expected}");
}

#[test]
fn usage_and_input_errors_have_their_exit_codes() {
    let (code, _, stderr) = run(&mut ksearch(&["eval", "cpu/nope"]));
    assert_eq!(code, 3);
    assert!(stderr.contains("built-in: "), "{stderr}");
    let (code, _, stderr) = run(&mut ksearch(&["eval", "cpu/softmax", "--workload", "huge"]));
    assert_eq!(code, 3);
    assert!(
        stderr
            .contains("workload `huge` is not in task `cpu/softmax` (it has: small, rows4k, wide)"),
        "{stderr}"
    );
    let (code, _, _) = run(&mut ksearch(&["eval"]));
    assert_eq!(code, 2);
    let (code, _, _) = run(&mut ksearch(&["--help"]));
    assert_eq!(code, 0);
    let (code, _, stderr) = run(&mut ksearch(&["eval", "cpu/softmax", "/nonexistent/x.c"]));
    assert_eq!(code, 3, "{stderr}");
    // A reference that does not compile is the task's fault: named, with the compiler's line.
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("softmax");
    std::fs::create_dir(&task).unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/cpu/softmax");
    for f in ["task.toml", "seed.c", "reference.c"] {
        std::fs::copy(from.join(f), task.join(f)).unwrap();
    }
    let reference = std::fs::read_to_string(task.join("reference.c")).unwrap();
    std::fs::write(
        task.join("reference.c"),
        format!("{reference}int oops = ;\n"),
    )
    .unwrap();
    let line = reference.lines().count() + 1;
    let (code, _, stderr) = run(&mut ksearch(&[
        "eval",
        task.to_str().unwrap(),
        "--no-timing",
        "--workload",
        "small",
    ]));
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the task `{}` is at fault: the reference does not build",
            task.display()
        )) && stderr.contains(&format!("reference.c:{line}:")),
        "{stderr}"
    );
}

#[test]
fn negative_numbers_and_repeated_workloads_are_refused_with_a_reason() {
    for (args, expected) in [
        (
            vec!["run", "cpu/softmax", "--iterations", "-3"],
            "`-3` is not a whole number of 0 or more",
        ),
        (
            vec!["eval", "cpu/softmax", "--timeout", "-3"],
            "it must be a number of seconds greater than 0",
        ),
        (
            vec![
                "eval",
                "cpu/softmax",
                "--workload",
                "small",
                "--workload",
                "small",
            ],
            "--workload `small` is given twice",
        ),
    ] {
        let (code, _, stderr) = run(&mut ksearch(&args));
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("-- -3"), "no clap tip: {stderr}");
    }
}

/// With `--json`, a failure is a JSON object on stdout too: a script reading stdout always
/// reads JSON.
#[test]
fn with_json_errors_are_json_objects() {
    for (args, code) in [
        (vec!["eval", "cpu/nope", "--json"], 3),
        (vec!["eval", "cpu/softmax", "--timeout", "abc", "--json"], 2),
        (vec!["tree", "/nonexistent/run", "--json"], 3),
    ] {
        let (got, stdout, stderr) = run(&mut ksearch(&args));
        assert_eq!(got, code, "{args:?}: {stderr}");
        let j: Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {stdout:?}"));
        assert_eq!(j["exit_code"], code);
        let message = j["error"].as_str().unwrap();
        assert!(
            !message.is_empty() && stderr.contains(message),
            "{j} / {stderr}"
        );
    }
}

#[test]
fn without_timing_a_pass_does_not_speak_of_timing() {
    let (code, stdout, stderr) = run(&mut ksearch(&[
        "eval",
        "cpu/softmax",
        "--no-timing",
        "--workload",
        "small",
        "--json",
    ]));
    assert_eq!(code, 0, "{stderr}");
    let j: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(j["status"], "passed");
    assert_eq!(
        j["message"],
        "passed 1 workload(s) × 3 seed(s) and a re-check on fresh inputs (not timed)"
    );
}

/// A directory here named like a built-in task is the one read, and that is said.
#[test]
fn a_directory_that_shadows_a_builtin_task_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("cpu/softmax");
    std::fs::create_dir_all(&task).unwrap();
    std::fs::write(task.join("task.toml"), "x\n").unwrap();
    let (code, _, stderr) = run(ksearch(&["contract", "cpu/softmax"]).current_dir(dir.path()));
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("`cpu/softmax` is the directory cpu/softmax/ here, which shadows the built-in task of that name")
            && stderr.contains("cpu/softmax/task.toml:1:"),
        "{stderr}"
    );
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/cpu/softmax");
    for f in ["task.toml", "seed.c", "reference.c"] {
        std::fs::copy(from.join(f), task.join(f)).unwrap();
    }
    let (code, _, stderr) = run(ksearch(&["contract", "cpu/softmax"]).current_dir(dir.path()));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("note: `cpu/softmax` is the directory"),
        "{stderr}"
    );
    let (_, _, stderr) = run(ksearch(&["contract", "./cpu/softmax"]).current_dir(dir.path()));
    assert!(!stderr.contains("note:"), "{stderr}");
}

#[test]
fn contract_prints_the_signature() {
    let (code, stdout, _) = run(&mut ksearch(&["contract", "cpu/linear_recurrence"]));
    assert_eq!(code, 0);
    assert!(stdout.contains("void linear_recurrence(const float *restrict a, const float *restrict b, float *restrict h, int64_t rows, int64_t len);"), "{stdout}");
}

#[test]
fn the_human_report_shows_workloads_and_speedup() {
    let mut args = vec!["eval", "cpu/softmax"];
    args.extend_from_slice(QUICK);
    let (code, stdout, _) = run(&mut ksearch(&args));
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with("cpu/softmax · seed.c · passed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("speedup over reference (reference.c)"),
        "{stdout}"
    );
}

#[test]
fn against_times_a_second_kernel_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.c");
    let slow = dir.path().join("slow.c");
    std::fs::write(&good, kernels::good()).unwrap();
    std::fs::write(&slow, kernels::twice_as_slow()).unwrap();
    let mut args = vec![
        "eval",
        "cpu/softmax",
        slow.to_str().unwrap(),
        "--against",
        good.to_str().unwrap(),
        "--json",
        "--min-runs",
        "15",
        "--min-time-ms",
        "100",
        "--workload",
        "small",
    ];
    args.extend_from_slice(&["--warmup-ms", "5"]);
    let (code, stdout, stderr) = run(&mut ksearch(&args));
    assert_eq!(code, 0, "{stderr}");
    let j: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(j["against"], "good.c");
    assert_eq!(j["status"], "passed", "{}", j["message"]);
    let s = j["speedup_vs_against"].as_f64().unwrap();
    assert!(s < 0.75, "twice the work measured {s:.2}× of the original");
    // The acceptance gate on the paired samples, as a search judges a candidate.
    let gate = &j["vs_against"];
    assert_eq!(gate["verdict"], "worse", "{gate}");
    let (lo, hi) = (
        gate["interval"][0].as_f64().unwrap(),
        gate["interval"][1].as_f64().unwrap(),
    );
    assert!(lo <= gate["ratio"].as_f64().unwrap() && hi < 1.0, "{gate}");
    // Per workload: the other kernel's time from the same rounds.
    let w = &j["workloads"][0];
    let (mine, other) = (
        w["latency_ms"]["median"].as_f64().unwrap(),
        w["against_latency_ms"]["median"].as_f64().unwrap(),
    );
    assert!(
        (w["speedup_vs_against"].as_f64().unwrap() - other / mine).abs() < 1e-9,
        "{w}"
    );
}

#[test]
fn the_builtin_proposer_declines_tasks_it_has_no_templates_for() {
    // The built-in mlx/attention without its template space.
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("attention");
    std::fs::create_dir(&task).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/mlx/attention");
    for f in ["reference.py", "seed.py", "baseline.py"] {
        std::fs::copy(src.join(f), task.join(f)).unwrap();
    }
    let toml = std::fs::read_to_string(src.join("task.toml")).unwrap();
    let without = toml.replace("[space]\nfile = \"space/space.toml\"\n", "");
    assert_ne!(toml, without);
    std::fs::write(task.join("task.toml"), without).unwrap();
    let rd = dir.path().join("run");
    let (code, _, stderr) = run(&mut ksearch(&[
        "run",
        task.to_str().unwrap(),
        "--model",
        "builtin",
        "--run-dir",
        rd.to_str().unwrap(),
    ]));
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("the builtin proposer cannot work on task"),
        "{stderr}"
    );
    assert!(stderr.contains("ships no template space"), "{stderr}");
    assert!(
        stderr.contains("softmax, matmul, linear_recurrence"),
        "{stderr}"
    );
    assert!(!rd.exists());
}

#[test]
fn mlx_tasks_load_and_state_their_contract() {
    let (code, stdout, _) = run(&mut ksearch(&["contract", "mlx/selective_scan"]));
    assert_eq!(code, 0);
    assert!(
        stdout.contains("def run(u, delta, A, B, C, Dskip, z, *, batch, seqlen, dinner, dstate):"),
        "{stdout}"
    );
    assert!(stdout.contains("return (y, state)"), "{stdout}");
}

#[test]
fn every_mlx_seed_passes_the_knowledge_rules_of_both_targets() {
    // The Metal paths cannot run here (no Apple GPU); the rules are what checks them.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/mlx");
    for task in [
        "attention",
        "paged_attention",
        "selective_scan",
        "selective_state_update",
    ] {
        let seed = root.join(task).join("seed.py");
        for target in ["metal", "cuda"] {
            let (code, stdout, stderr) = run(&mut ksearch(&[
                "knowledge",
                "check",
                seed.to_str().unwrap(),
                "--backend",
                "mlx",
                "--target",
                target,
            ]));
            assert_eq!(code, 0, "{task} on {target}: {stdout}{stderr}");
            assert!(stdout.contains("clean"), "{stdout}");
        }
    }
}

#[test]
fn knowledge_rules_reject_a_candidate_before_it_runs() {
    // CUDA's barrier in a Metal kernel: found by the rules, reported as `rejected`, never compiled.
    let dir = tempfile::tempdir().unwrap();
    let seed = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/mlx/attention/seed.py"),
    )
    .unwrap();
    let bad = seed.replace(
        "const float scale = metal::rsqrt(float(D));",
        "const float scale = metal::rsqrt(float(D));\n    __syncthreads();",
    );
    assert_ne!(bad, seed);
    let path = dir.path().join("bad.py");
    std::fs::write(&path, &bad).unwrap();
    let (code, stdout, _) = run(&mut ksearch(&[
        "knowledge",
        "check",
        path.to_str().unwrap(),
        "--backend",
        "mlx",
        "--target",
        "metal",
    ]));
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("__syncthreads"), "{stdout}");
    // Through `eval`, the same candidate is rejected before any worker starts (no MLX needed).
    let (code, stdout, stderr) = run(&mut ksearch(&[
        "eval",
        "mlx/attention",
        path.to_str().unwrap(),
        "--target",
        "metal",
        "--json",
        "--hardware",
        "m3-max",
    ]));
    assert_eq!(code, 0, "{stderr}");
    let j: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(j["status"], "rejected", "{j}");
    assert!(
        j["message"].as_str().unwrap().contains("__syncthreads"),
        "{j}"
    );
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let (code, out, _) = run(&mut ksearch(&["--version"]));
    assert_eq!(code, 0);
    // What git says of this checkout, where there is one (the build asked the same).
    let expected = Command::new("git")
        .args(["log", "-1", "--format=%h %cs"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown commit".into());
    assert_eq!(
        out.trim(),
        format!("ksearch {} ({expected})", env!("CARGO_PKG_VERSION"))
    );
}
