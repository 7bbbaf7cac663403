//! The repository's Python unit tests (`harness/tests`, `adapters/tests`, `bench/tests`), run from `cargo test`
//! so the one test command covers them.

use std::path::PathBuf;
use std::process::Command;

/// `python3 -m unittest discover -s DIR` from the repository's root, with `env`: whether it
/// passed, and everything it printed.
fn unittest_discover(dir: &str, env: &[(&str, &str)]) -> (bool, String) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("python3")
        .args(["-m", "unittest", "discover", "-s", dir])
        .envs(env.iter().copied())
        .current_dir(&root)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
#[cfg_attr(
    not(has_numpy),
    ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
)]
fn the_python_harness_unit_tests_pass() {
    // Runners start in ksearch's sandbox, as they do under ksearch.
    let (ok, text) = unittest_discover(
        "harness/tests",
        &[("KSEARCH_SANDBOX_EXE", env!("CARGO_BIN_EXE_ksearch"))],
    );
    assert!(ok, "{text}");
    assert!(text.contains("OK"), "{text}");
    // Tests of the MLX parts skip themselves without MLX; where it is installed, none may.
    if cfg!(has_mlx) {
        assert!(!text.contains("skipped"), "{text}");
    }
}

/// The mlx-lm Mamba adapter's tests (`adapters/tests`): mlx-lm's real model on MLX's CPU device.
#[test]
#[cfg_attr(
    not(all(has_mlx, has_mlx_lm)),
    ignore = "needs python3 with MLX and mlx-lm (`.ci/run` installs them: pip install \"mlx[cpu]\"; pip install --no-deps mlx-lm==0.32.2)"
)]
fn the_mlx_lm_mamba_adapter_tests_pass() {
    let (ok, text) = unittest_discover("adapters/tests", &[]);
    assert!(ok, "{text}");
    // None skipped: the convolution step's test needs g++, which `.ci/run` has.
    assert!(
        text.contains("Ran 8 tests") && text.contains("OK") && !text.contains("skipped"),
        "{text}"
    );
}

/// The bench scripts' parsers (`bench/tests`): the Python standard library is enough.
#[test]
#[cfg_attr(not(has_python3), ignore = "needs python3")]
fn the_bench_scripts_unit_tests_pass() {
    let (ok, text) = unittest_discover("bench/tests", &[]);
    assert!(ok, "{text}");
    assert!(
        text.contains("OK") && !text.contains("Ran 0 tests"),
        "{text}"
    );
}
