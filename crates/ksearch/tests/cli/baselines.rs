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
