//! The Python harness's own unit tests (`harness/tests`), run from `cargo test` so the one test
//! command covers them.

use std::path::PathBuf;
use std::process::Command;

#[test]
#[cfg_attr(
    not(has_numpy),
    ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
)]
fn the_python_harness_unit_tests_pass() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("python3")
        .args(["-m", "unittest", "discover", "-s", "harness/tests"])
        // Runners start in ksearch's sandbox, as they do under ksearch.
        .env("KSEARCH_SANDBOX_EXE", env!("CARGO_BIN_EXE_ksearch"))
        .current_dir(&root)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("OK"), "{text}");
}

/// The mlx-lm Mamba adapter's tests (`adapters/tests`): mlx-lm's real model on MLX's CPU device.
#[test]
#[cfg_attr(
    not(all(has_mlx, has_mlx_lm)),
    ignore = "needs python3 with MLX and mlx-lm (`.ci/run` installs them: pip install \"mlx[cpu]\"; pip install --no-deps mlx-lm==0.32.2)"
)]
fn the_mlx_lm_mamba_adapter_tests_pass() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("python3")
        .args(["-m", "unittest", "discover", "-s", "adapters/tests"])
        .current_dir(&root)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("Ran 3 tests") && text.contains("OK"),
        "{text}"
    );
}
