//! Baselines that describe themselves: what a baseline says it ran reaches the label speedups
//! are quoted against.

use std::path::Path;

use super::eval_json;

/// The built-in softmax task with a production baseline (its reference) that describes itself
/// from an environment variable the task sets.
fn task_with_described_baseline(dir: &Path) -> std::path::PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/cpu/softmax");
    let task = dir.join("softmax");
    std::fs::create_dir_all(&task).unwrap();
    for f in ["reference.c", "seed.c"] {
        std::fs::copy(from.join(f), task.join(f)).unwrap();
    }
    let reference = std::fs::read_to_string(from.join("reference.c")).unwrap();
    std::fs::write(
        task.join("baseline.c"),
        format!(
            "{reference}\n#include <stdlib.h>\nconst char *ksearch_describe(void) {{ const char *v = getenv(\"KSQ_KERNELS\"); return v ? v : \"no environment\"; }}\n"
        ),
    )
    .unwrap();
    let toml = std::fs::read_to_string(from.join("task.toml")).unwrap();
    std::fs::write(
        task.join("task.toml"),
        format!(
            "{toml}\n[baseline]\nname = \"Described softmax\"\nfile = \"baseline.c\"\nenv = {{ KSQ_KERNELS = \"generic\\nkernels\" }}\n"
        ),
    )
    .unwrap();
    task
}

#[test]
fn a_baseline_says_what_it_ran_in_its_label() {
    let dir = tempfile::tempdir().unwrap();
    let task = task_with_described_baseline(dir.path());
    let (code, j) = eval_json(task.to_str().unwrap(), None, &[]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["status"], "passed", "{j}");
    // Asked in its runner, after its environment was set; one line.
    assert_eq!(j["baseline_description"], "generic kernels", "{j}");
    assert_eq!(j["baseline"], "Described softmax [generic kernels]", "{j}");
}

/// `eval --target cpu --json` of a copy of the Python test task `fixture` whose baseline
/// `name` is its reference plus `describe` (a `ksearch_describe()`), and whose seed defines a
/// `ksearch_describe()` of its own: the JSON, and stdout as printed.
fn eval_python_task_with_described_baseline(
    fixture: &str,
    name: &str,
    describe: &str,
) -> (serde_json::Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(fixture);
    let task = dir.path().join(fixture);
    std::fs::create_dir_all(&task).unwrap();
    let reference = std::fs::read_to_string(from.join("reference.py")).unwrap();
    std::fs::write(task.join("reference.py"), &reference).unwrap();
    std::fs::write(task.join("baseline.py"), format!("{reference}{describe}")).unwrap();
    let seed = std::fs::read_to_string(from.join("seed.py")).unwrap();
    std::fs::write(
        task.join("seed.py"),
        format!("{seed}\n\ndef ksearch_describe():\n    return \"a candidate's word\"\n"),
    )
    .unwrap();
    let toml = std::fs::read_to_string(from.join("task.toml")).unwrap();
    std::fs::write(
        task.join("task.toml"),
        format!("{toml}\n[baseline]\nname = \"{name}\"\nfile = \"baseline.py\"\n"),
    )
    .unwrap();
    let mut args = vec!["eval", task.to_str().unwrap(), "--target", "cpu", "--json"];
    args.extend_from_slice(super::QUICK);
    let (code, stdout, stderr) = super::run(&mut super::ksearch(&args));
    assert_eq!(code, 0, "{stderr}");
    let j: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(j["status"], "passed", "{j}");
    (j, stdout)
}

/// An MLX baseline describes itself with `ksearch_describe()`, asked in the judge, which loads
/// the task's own modules; a candidate that defines one is not shown.
#[test]
#[cfg_attr(
    not(has_mlx),
    ignore = "needs python3 with MLX (`.ci/run` installs it: pip install \"mlx[cpu]\")"
)]
fn an_mlx_baseline_says_what_it_ran_and_a_candidate_is_not_asked() {
    let (j, stdout) = eval_python_task_with_described_baseline(
        "mlx_softmax",
        "MLX softmax",
        "\ndef ksearch_describe():\n    return f\"plain MLX ops,\\nMLX {mx.__version__} on {mx.default_device()}\"\n",
    );
    let text = j["baseline_description"].as_str().unwrap_or_default();
    assert!(text.starts_with("plain MLX ops, MLX 0."), "{j}");
    assert!(text.contains("cpu"), "{j}");
    assert_eq!(j["baseline"], format!("MLX softmax [{text}]"), "{j}");
    assert!(!stdout.contains("a candidate's word"), "{j}");
}

/// A torch baseline describes itself too, asked in its own runner (where its module loads); a
/// candidate's runner is not asked.
#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn a_torch_baseline_says_what_it_ran_in_its_runner() {
    let (j, stdout) = eval_python_task_with_described_baseline(
        "torch_softmax",
        "torch softmax",
        "\n\ndef ksearch_describe():\n    return f\"torch.softmax, torch {torch.__version__} on {KSEARCH_DEVICE}\"\n",
    );
    let text = j["baseline_description"].as_str().unwrap_or_default();
    assert!(text.starts_with("torch.softmax, torch 2."), "{j}");
    assert!(text.ends_with(" on cpu"), "{j}");
    assert!(!stdout.contains("a candidate's word"), "{j}");
}
