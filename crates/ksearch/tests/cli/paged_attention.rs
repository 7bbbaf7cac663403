//! `mlx/paged_attention` (issue 46) on MLX's CPU device: its seed and its baseline agree with
//! the reference, and the ragged contexts are real (a kernel that reads every sequence's pages
//! to full length is wrong). The Metal and CUDA paths are not run here.

use std::path::Path;

use crate::{ksearch, run};

fn eval(candidate: Option<&Path>) -> serde_json::Value {
    let mut args = vec!["eval", "mlx/paged_attention"];
    if let Some(c) = candidate {
        args.push(c.to_str().unwrap());
    }
    args.extend([
        "--target",
        "cpu",
        "--workload",
        "b1",
        "--seeds",
        "1",
        "--no-timing",
        "--json",
    ]);
    let (_, stdout, stderr) = run(&mut ksearch(&args));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"))
}

#[test]
#[cfg_attr(
    not(has_mlx),
    ignore = "needs python3 with MLX (`.ci/run` installs it: pip install \"mlx[cpu]\")"
)]
fn the_seed_and_the_baseline_agree_with_the_reference_and_a_full_length_read_does_not() {
    let task = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/mlx/paged_attention");
    let seed = eval(None);
    assert_eq!(seed["status"], "passed", "{seed}");
    let baseline = eval(Some(&task.join("baseline.py")));
    assert_eq!(baseline["status"], "passed", "{baseline}");
    // The seed without its mask: every sequence attends to all 8192 keys its pages hold.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(task.join("seed.py")).unwrap();
    let unmasked = text.replace(
        "    s = mx.where(inside[:, None, None, :], s, -mx.inf)\n",
        "",
    );
    assert_ne!(text, unmasked);
    let file = dir.path().join("full_length.py");
    std::fs::write(&file, unmasked).unwrap();
    let wrong = eval(Some(&file));
    assert_eq!(wrong["status"], "incorrect", "{wrong}");
}
