//! Optional libraries (issue 18): a baseline whose library is missing gives way to the
//! reference, said once; a run that cannot start leaves nothing behind; a stored run whose
//! baseline library went missing refuses to resume and says how to install it. The Python
//! backends' baselines name the modules they import instead, optional the same way.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{QUICK, ksearch, run};

const LIB: &str = "ksearchfake";

/// The built-in softmax task with a baseline that links `-lksearchfake`.
pub(super) fn task_with_fake_baseline(dir: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/cpu/softmax");
    let task = dir.join("softmax");
    std::fs::create_dir_all(&task).unwrap();
    for f in ["reference.c", "seed.c"] {
        std::fs::copy(from.join(f), task.join(f)).unwrap();
    }
    std::fs::copy(from.join("reference.c"), task.join("baseline.c")).unwrap();
    let toml = std::fs::read_to_string(from.join("task.toml")).unwrap();
    std::fs::write(
        task.join("task.toml"),
        format!(
            "{toml}\n[baseline]\nname = \"FakeBLAS softmax\"\nfile = \"baseline.c\"\nlibs = [\"{LIB}\"]\n\n[baseline.install.{LIB}]\nname = \"FakeBLAS\"\ndebian = \"libfakeblas-dev\"\n"
        ),
    )
    .unwrap();
    task
}

/// A directory holding `libksearchfake.so`, for LIBRARY_PATH and LD_LIBRARY_PATH.
fn fake_library(dir: &Path) -> PathBuf {
    let lib_dir = dir.join("lib");
    std::fs::create_dir_all(&lib_dir).unwrap();
    std::fs::write(
        lib_dir.join("fake.c"),
        "int ksearchfake_answer(void) { return 42; }\n",
    )
    .unwrap();
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(lib_dir.join(format!("lib{LIB}.so")))
        .arg(lib_dir.join("fake.c"))
        .status()
        .unwrap();
    assert!(status.success());
    lib_dir
}

fn assert_one_notice(stderr: &str) {
    let notice = format!(
        "note: the baseline `FakeBLAS softmax` needs FakeBLAS (-l{LIB}), which the linker does not find on this machine: speedups are quoted against the reference (reference.c) instead. To measure against it, "
    );
    assert_eq!(stderr.matches(&notice).count(), 1, "{stderr}");
    assert!(
        stderr.contains("apt-get install libfakeblas-dev`")
            || stderr.contains(&format!("install FakeBLAS (the development package that provides -l{LIB}) with your system's package manager")),
        "{stderr}"
    );
}

#[test]
fn eval_without_the_baseline_library_uses_the_reference_and_says_so_once() {
    let dir = tempfile::tempdir().unwrap();
    let task = task_with_fake_baseline(dir.path());
    let mut args = vec!["eval", task.to_str().unwrap(), "--json"];
    args.extend_from_slice(QUICK);
    let (code, stdout, stderr) = run(&mut ksearch(&args));
    assert_eq!(code, 0, "{stderr}");
    assert_one_notice(&stderr);
    let j: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(j["status"], "passed", "{j}");
    assert_eq!(j["baseline"], "reference (reference.c)");
    assert!(j["speedup"].as_f64().unwrap() > 0.0);

    // With the library where the linker looks, the baseline is the task's.
    let lib = fake_library(dir.path());
    let (code, stdout, stderr) = run(ksearch(&args)
        .env("LIBRARY_PATH", &lib)
        .env("LD_LIBRARY_PATH", &lib));
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("note:"), "{stderr}");
    let j: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(j["baseline"], "FakeBLAS softmax", "{j}");
}

#[test]
fn a_run_without_the_baseline_library_searches_against_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let task = task_with_fake_baseline(dir.path());
    let rd = dir.path().join("run");
    let (code, stdout, stderr) = run(&mut ksearch(&[
        "run",
        task.to_str().unwrap(),
        "--model",
        "builtin",
        "--iterations",
        "2",
        "--workload",
        "small",
        "--min-runs",
        "3",
        "--min-time-ms",
        "5",
        "--run-dir",
        rd.to_str().unwrap(),
    ]));
    assert_eq!(code, 0, "{stderr}");
    assert_one_notice(&stderr);
    assert!(stdout.contains("over reference (reference.c)"), "{stdout}");
    // The stored task has no baseline: every later command agrees with the run.
    let (code, tree, _) = run(&mut ksearch(&["tree", rd.to_str().unwrap(), "--json"]));
    assert_eq!(code, 0);
    assert!(tree.contains("reference (reference.c)"), "{tree}");
}

#[test]
fn a_run_whose_baseline_library_went_missing_does_not_resume() {
    let dir = tempfile::tempdir().unwrap();
    let task = task_with_fake_baseline(dir.path());
    let lib = fake_library(dir.path());
    let rd = dir.path().join("run");
    let rd = rd.to_str().unwrap();
    let (code, stdout, stderr) = run(ksearch(&[
        "run",
        task.to_str().unwrap(),
        "--iterations",
        "1",
        "--no-timing",
        "--workload",
        "small",
        "--run-dir",
        rd,
    ])
    .env("LIBRARY_PATH", &lib)
    .env("LD_LIBRARY_PATH", &lib));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("over FakeBLAS softmax"), "{stdout}");
    let before = run(&mut ksearch(&["tree", rd, "--json"])).1;

    let (code, _, stderr) = run(&mut ksearch(&["resume", rd, "--iterations", "1"]));
    assert_ne!(code, 0);
    assert!(
        stderr.contains(&format!(
            "`FakeBLAS softmax` needs FakeBLAS (-l{LIB}), which the linker does not find on this machine; "
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("libfakeblas-dev") || stderr.contains("package manager"),
        "{stderr}"
    );
    assert_eq!(
        run(&mut ksearch(&["tree", rd, "--json"])).1,
        before,
        "the run is unchanged"
    );
}

#[test]
fn a_run_that_cannot_start_leaves_no_directory() {
    let dir = tempfile::tempdir().unwrap();
    let task = task_with_fake_baseline(dir.path());
    std::fs::write(task.join("seed.c"), "this is not C\n").unwrap();
    let runs = dir.path().join("runs");
    let rd = runs.join("run");
    let (code, _, stderr) = run(&mut ksearch(&[
        "run",
        task.to_str().unwrap(),
        "--iterations",
        "1",
        "--no-timing",
        "--run-dir",
        rd.to_str().unwrap(),
    ]));
    assert_ne!(code, 0);
    assert!(stderr.contains("seed"), "{stderr}");
    assert!(
        !runs.exists(),
        "a half-made run was left in {}",
        runs.display()
    );
    // A directory that was there before is never removed, and keeps only what it held: the
    // same command runs into it again.
    std::fs::create_dir_all(&rd).unwrap();
    std::fs::write(rd.join("mine.txt"), "kept").unwrap();
    for _ in 0..2 {
        let (code, _, stderr) = run(&mut ksearch(&[
            "run",
            task.to_str().unwrap(),
            "--iterations",
            "1",
            "--no-timing",
            "--run-dir",
            rd.to_str().unwrap(),
        ]));
        assert_ne!(code, 0);
        assert!(!stderr.contains("already holds a run"), "{stderr}");
        let left: Vec<_> = std::fs::read_dir(&rd)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, ["mine.txt"]);
    }
}

/// A C compiler that cannot find `-lopenblas` and is `cc` otherwise: OpenBLAS as missing, on
/// any machine.
fn compiler_without_openblas(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let cc = dir.join("cc-without-openblas");
    std::fs::write(
        &cc,
        "#!/bin/sh\nfor a in \"$@\"; do\n  if [ \"$a\" = -lopenblas ]; then echo 'ld: cannot find -lopenblas' >&2; exit 1; fi\ndone\nexec cc \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&cc, std::fs::Permissions::from_mode(0o755)).unwrap();
    cc
}

#[test]
fn matmul_without_openblas_quotes_the_reference_and_says_how_to_install_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["eval", "cpu/matmul", "--json"];
    args.extend_from_slice(QUICK);
    let (code, stdout, stderr) =
        run(ksearch(&args).env("CC", compiler_without_openblas(dir.path())));
    assert_eq!(code, 0, "{stderr}");
    let j: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(j["status"], "passed", "{j}");
    assert_eq!(j["baseline"], "reference (reference.c)");
    assert_eq!(stderr.matches("note:").count(), 1, "{stderr}");
    assert!(
        stderr.contains("note: the baseline `OpenBLAS cblas_sgemm (1 thread)` needs OpenBLAS (-lopenblas), which the linker does not find on this machine: speedups are quoted against the reference (reference.c) instead."),
        "{stderr}"
    );
    assert!(
        stderr.contains("apt-get install libopenblas-dev`")
            || stderr.contains("install OpenBLAS (the development package that provides -lopenblas) with your system's package manager"),
        "{stderr}"
    );
}

#[test]
#[cfg_attr(
    not(has_openblas),
    ignore = "needs OpenBLAS (Debian/Ubuntu: sudo apt-get install libopenblas-dev; `.ci/run` installs it)"
)]
fn matmul_quotes_openblas_where_it_is_installed() {
    let mut args = vec!["eval", "cpu/matmul", "--json"];
    args.extend_from_slice(QUICK);
    let (code, stdout, stderr) = run(&mut ksearch(&args));
    assert_eq!(code, 0, "{stderr}");
    let j: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(j["status"], "passed", "{j}");
    // The baseline says what it ran: OpenBLAS's build and the kernels it picked for this CPU,
    // in the label speedups are quoted against too.
    let described = j["baseline_description"].as_str().expect("described");
    assert!(
        described.starts_with("OpenBLAS ") && described.contains("; core "),
        "{described}"
    );
    assert_eq!(
        j["baseline"],
        format!("OpenBLAS cblas_sgemm (1 thread) [{described}]")
    );
    assert!(!stderr.contains("note:"), "{stderr}");
}

/// The torch test task (`tests/fixtures/torch_softmax`) with a baseline that imports `module`,
/// whose PyPI package is `ksearch-fake-blas`.
fn torch_task_with_baseline_importing(dir: &Path, module: &str) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/torch_softmax");
    let task = dir.join("torch_softmax");
    std::fs::create_dir_all(&task).unwrap();
    for f in ["reference.py", "seed.py"] {
        std::fs::copy(from.join(f), task.join(f)).unwrap();
    }
    let reference = std::fs::read_to_string(from.join("reference.py")).unwrap();
    std::fs::write(
        task.join("baseline.py"),
        format!("import {module}\n{reference}"),
    )
    .unwrap();
    let toml = std::fs::read_to_string(from.join("task.toml")).unwrap();
    std::fs::write(
        task.join("task.toml"),
        format!(
            "{toml}\n[baseline]\nname = \"FakeBLAS softmax\"\nfile = \"baseline.py\"\nmodules = [\"{module}\"]\n\n[baseline.install.{module}]\nname = \"FakeBLAS\"\npip = \"ksearch-fake-blas\"\n"
        ),
    )
    .unwrap();
    task
}

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn a_torch_baseline_whose_module_is_missing_gives_way_to_the_reference_with_its_pip_package() {
    let dir = tempfile::tempdir().unwrap();
    let eval = |task: &Path| {
        let mut args = vec!["eval", task.to_str().unwrap(), "--target", "cpu", "--json"];
        args.extend_from_slice(QUICK);
        let (code, stdout, stderr) = run(&mut ksearch(&args));
        assert_eq!(code, 0, "{stderr}");
        let j: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(j["status"], "passed", "{j}");
        (j, stderr)
    };
    let missing =
        torch_task_with_baseline_importing(&dir.path().join("missing"), "ksearchfakeblas");
    let (j, stderr) = eval(&missing);
    assert_eq!(j["baseline"], "reference (reference.py)", "{j}");
    assert_eq!(stderr.matches("note:").count(), 1, "{stderr}");
    assert!(
        stderr.contains("note: the baseline `FakeBLAS softmax` needs FakeBLAS (Python module `ksearchfakeblas`), which `python3` does not find on this machine: speedups are quoted against the reference (reference.py) instead. To measure against it, install it with `python3 -m pip install ksearch-fake-blas`."),
        "{stderr}"
    );

    // A module the worker's Python has: the baseline is the task's.
    let present = torch_task_with_baseline_importing(&dir.path().join("present"), "json");
    let (j, stderr) = eval(&present);
    assert_eq!(j["baseline"], "FakeBLAS softmax", "{j}");
    assert!(!stderr.contains("note:"), "{stderr}");
}
