//! Finds the optional tools some tests need and sets a cfg for each one found:
//!
//! - `has_chromium`: Chromium or Chrome (`KSEARCH_CHROMIUM`, else on `PATH`), for the report in a
//!   real browser;
//! - `has_python3`, `has_numpy`: `python3`, and `python3` with numpy, for the MLX harness on its
//!   CPU target and the exported Python package;
//! - `has_mlx`: `python3` with MLX (its CPU device is enough), for the MLX harness's graph
//!   runners on the `cpu` target;
//! - `has_mlx_lm`: `python3` with mlx-lm (its model code; it may be installed without its
//!   dependencies), for the mlx-lm Mamba adapter's tests;
//! - `has_torch`: `python3` with PyTorch (its CPU use is enough), for the torch backend's
//!   harness on its `cpu` target;
//! - `has_triton`: `python3` with Triton (PyPI's Linux PyTorch wheel brings it), for Triton
//!   kernels compiled ahead of time for an NVIDIA GPU (`space check --hardware`), without one;
//! - `has_gxx`: `g++` (C++20), for MLX CUDA kernels run on the CPU by the tests' emulation;
//! - `has_openblas`: the C compiler links `-lopenblas`, for `cpu/matmul`'s production baseline;
//! - `has_slurm`: Slurm's `sbatch`, `squeue` and `scancel`, for `--executor slurm` (the tests
//!   need a running cluster too: `.ci/slurm-one-node` starts one on this machine).
//!
//! It also sets `KSEARCH_COMMIT` (the commit and its date, for `--version`) where the source is a
//! git checkout and `git` is installed, else `unknown commit`.
//!
//! A test that needs a missing tool is marked `#[cfg_attr(not(has_…), ignore = "why")]`, so
//! `cargo test` reports it as ignored with its reason instead of passing without running;
//! `.ci/run` installs every tool and fails when any test is ignored.
//!
//! A tool installed (or removed) later is noticed on the next build: the script runs again when
//! `PATH` or the tool variables change, when a directory it searched changes (a new file in it
//! changes its time), when the package database or the dynamic linker's cache changes, or when a
//! tool it found changes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn main() {
    println!(
        "cargo::rustc-check-cfg=cfg(has_chromium, has_python3, has_numpy, has_mlx, has_mlx_lm, has_torch, has_triton, has_gxx, has_openblas, has_slurm)"
    );
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rustc-env=KSEARCH_COMMIT={}", commit());
    for var in [
        "PATH",
        "KSEARCH_CHROMIUM",
        "CC",
        "LIBRARY_PATH",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONUSERBASE",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    // What package managers and `ldconfig` touch on every install.
    for file in [
        "/var/lib/dpkg/status",
        "/etc/ld.so.cache",
        "/var/lib/rpm/rpmdb.sqlite",
    ] {
        watch(Path::new(file));
    }

    if let Some(chromium) = find_chromium() {
        watch(&chromium);
        enable("has_chromium");
    }
    if let (Some(sbatch), Some(_), Some(_)) = (
        on_path(&["sbatch"]),
        on_path(&["squeue"]),
        on_path(&["scancel"]),
    ) {
        watch(&sbatch);
        enable("has_slurm");
    }
    if let Some(cxx) = on_path(&["g++"]) {
        watch(&cxx);
        enable("has_gxx");
    }

    if let Some(sys_path) = python3_path() {
        enable("has_python3");
        match numpy_init() {
            Some(init) => {
                watch(&init);
                enable("has_numpy");
            }
            // Where pip would put it.
            None => {
                for dir in sys_path.iter().filter(|d| d.ends_with("-packages")) {
                    watch(dir);
                }
            }
        }
        // Each package where it is found (its directory watched), else where pip would put it.
        for (code, cfg) in [
            (
                "import mlx.core, os\nprint(os.path.dirname(mlx.core.__file__))",
                "has_mlx",
            ),
            (
                "import torch, os\nprint(os.path.dirname(torch.__file__))",
                "has_torch",
            ),
            (
                "import triton, os\nprint(os.path.dirname(triton.__file__))",
                "has_triton",
            ),
            // Found without importing it: its package __init__ imports the hub client.
            (
                "import importlib.util as u\ns = u.find_spec('mlx_lm')\nprint(list(s.submodule_search_locations)[0])",
                "has_mlx_lm",
            ),
        ] {
            match python(code) {
                Some(dir) => {
                    watch(Path::new(dir.trim()));
                    enable(cfg);
                }
                None => {
                    for dir in sys_path.iter().filter(|d| d.ends_with("-packages")) {
                        watch(dir);
                    }
                }
            }
        }
    }

    if links("openblas") {
        enable("has_openblas");
    }
}

fn enable(cfg: &str) {
    println!("cargo::rustc-cfg={cfg}");
}

/// Rerun when `path` changes; only paths that exist (cargo reruns on every build for a path
/// that does not).
fn watch(path: &Path) {
    if path.exists() {
        println!("cargo::rerun-if-changed={}", path.display());
    }
}

/// The same search as the browser test's (`tests/report/cdp.rs`); the directories of `PATH` are
/// watched so that a browser installed into one is noticed.
fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KSEARCH_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    on_path(&[
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ])
}

/// The first of `names` found on `PATH` (each directory watched when none is).
fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    let found = dirs.iter().find_map(|dir| {
        names
            .iter()
            .map(|name| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        for dir in &dirs {
            watch(dir);
        }
    }
    found
}

/// `abc1234 2026-12-01` for the checked-out commit; the build runs again when it changes.
fn commit() -> String {
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    // HEAD, the branch it names and the packed refs: what moves when the commit changes.
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            watch(Path::new(&path));
        }
    }
    git(&["log", "-1", "--format=%h %cs"])
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown commit".to_owned())
}

fn python(code: &str) -> Option<String> {
    let out = Command::new("python3")
        .args(["-c", code])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `sys.path` of `python3`, when there is one.
fn python3_path() -> Option<Vec<PathBuf>> {
    let text = python("import sys\nfor p in sys.path: print(p)")?;
    Some(
        text.lines()
            .filter(|l| !l.is_empty())
            .map(PathBuf::from)
            .collect(),
    )
}

/// numpy's `__init__.py`, when `python3` imports numpy.
fn numpy_init() -> Option<PathBuf> {
    let text = python("import numpy\nprint(numpy.__file__)")?;
    Some(PathBuf::from(text.trim()))
}

/// Whether the C compiler (`$CC`, else `cc`) links a shared object with `-l<lib>`, as the
/// worker links a baseline.
fn links(lib: &str) -> bool {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let compiler = std::env::var("CC")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "cc".into());
    Command::new(compiler)
        .args(["-shared", "-fPIC", "-x", "c", "-", "-o"])
        .arg(out_dir.join(format!("probe-{lib}.so")))
        .arg(format!("-l{lib}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
