//! What a newcomer trips over (issue 47): each fault said as what it is, with what to do.

use crate::{ksearch, run};

/// A machine without a C compiler: every command that would compile says that `cc` is missing
/// and how to install it, rather than blaming the task ("the reference does not build … the
/// sandbox could not be set up") or each point of a space.
#[test]
fn a_missing_c_compiler_is_said_with_how_to_install_one() {
    let empty = tempfile::tempdir().unwrap();
    let path = empty.path().to_str().unwrap();
    let rd = empty.path().join("run");
    for args in [
        vec!["eval", "cpu/softmax", "--workload", "small"],
        vec![
            "run",
            "cpu/softmax",
            "--workload",
            "small",
            "--run-dir",
            rd.to_str().unwrap(),
        ],
        vec!["space", "check", "cpu/rmsnorm", "--limit", "2"],
    ] {
        let (code, _, stderr) = run(ksearch(&args).env("PATH", path).env_remove("CC"));
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains("no C compiler is installed (`cc` is not on PATH)")
                && stderr.contains("install one with")
                && stderr.contains("CC="),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("at fault"), "{args:?}: {stderr}");
    }
    assert!(!rd.exists(), "no run is left behind");
    // A compiler that CC names is looked for as named.
    let (code, _, stderr) = run(ksearch(&["eval", "cpu/softmax", "--workload", "small"])
        .env("CC", "no-such-compiler-here -O1"));
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("the C compiler `no-such-compiler-here` that CC names is not found"),
        "{stderr}"
    );
}

/// A run whose production baseline is missing here says so at the end too (in the summary and
/// the report), as its opening note did: not that the task has none.
#[test]
fn a_baseline_missing_here_is_not_called_absent_from_the_task() {
    let dir = tempfile::tempdir().unwrap();
    let task = super::libraries::task_with_fake_baseline(dir.path());
    let rd = dir.path().join("run");
    let mut args = vec![
        "run",
        task.to_str().unwrap(),
        "--iterations",
        "0",
        "--no-timing",
        "--run-dir",
        rd.to_str().unwrap(),
    ];
    args.extend_from_slice(super::QUICK);
    let (code, stdout, stderr) = run(&mut ksearch(&args));
    assert_eq!(code, 0, "{stderr}");
    let said = "a deliberately simple implementation: the task's production baseline, `FakeBLAS softmax`, needs FakeBLAS (-lksearchfake), which the machine that started the run lacked";
    assert!(stdout.contains(said), "{stdout}");
    assert!(!stdout.contains("no production baseline"), "{stdout}");
    let (_, json, _) = run(&mut ksearch(&["tree", rd.to_str().unwrap(), "--json"]));
    let summary: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        summary["summary"]["baseline_left_out"]["name"], "FakeBLAS softmax",
        "{summary}"
    );
    let report = dir.path().join("report.html");
    let (code, _, stderr) = run(&mut ksearch(&[
        "report",
        rd.to_str().unwrap(),
        "-o",
        report.to_str().unwrap(),
    ]));
    assert_eq!(code, 0, "{stderr}");
    let html = std::fs::read_to_string(&report).unwrap();
    // The baseline's line and the headline.
    let html = html.replace("&#39;", "'").replace("&#x27;", "'");
    assert!(
        html.contains("none here (the task's production baseline, FakeBLAS softmax, needs FakeBLAS (-lksearchfake)"),
        "the report's baseline line"
    );
    assert!(
        html.contains("a deliberately simple implementation: the task's production baseline, `FakeBLAS softmax`"),
        "the report's headline"
    );
    assert!(!html.contains("the task has no production baseline"));
}

/// Mistyped names: the help names every proposer, a misspelt one is a usage error (exit 2)
/// that lists them and suggests the closest, a misspelt task gets the closest built-in one,
/// and a misspelt command is never pointed at the commands ksearch starts for itself.
#[test]
fn mistyped_names_get_the_closest_and_usage_errors_exit_2() {
    let (code, help, _) = run(&mut ksearch(&["run", "--help"]));
    assert_eq!(code, 0);
    assert!(
        help.contains("`builtin`") && help.contains("`manual`"),
        "{help}"
    );

    for (flag, typed, meant) in [
        ("--model", "manul", "manual"),
        ("--model", "opeanai:gpt-5", "openai:gpt-5"),
        ("--codegen-model", "biultin", "builtin"),
    ] {
        let (code, _, stderr) = run(&mut ksearch(&["run", "cpu/softmax", flag, typed]));
        assert_eq!(code, 2, "{flag} {typed}: {stderr}");
        assert!(
            stderr.contains(&format!("did you mean `{meant}`?"))
                && stderr.contains("`builtin`")
                && stderr.contains("`manual`"),
            "{stderr}"
        );
    }
    let (code, _, stderr) = run(&mut ksearch(&["contract", "cpu/softmx"]));
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("did you mean `cpu/softmax`?"), "{stderr}");

    let (code, _, stderr) = run(&mut ksearch(&["runn"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("'run'"), "{stderr}");
    assert!(!stderr.contains("runner"), "{stderr}");
}

/// `ksearch answer` with nothing to answer, or nothing in the answer, is the user's input that
/// does not fit (exit 3), not an internal failure; a report or an export that cannot be
/// written into the run directory says so, with the error that stopped it and `-o`.
#[test]
fn answer_and_report_say_what_the_user_can_do() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let rd_s = rd.to_str().unwrap();
    let mut args = vec![
        "run",
        "cpu/softmax",
        "--model",
        "manual",
        "--iterations",
        "1",
        "--no-timing",
        "--run-dir",
        rd_s,
    ];
    args.extend_from_slice(super::QUICK);
    let (code, _, stderr) = run(&mut ksearch(&args));
    assert_eq!(code, 4, "paused: {stderr}");
    let empty = dir.path().join("empty.md");
    std::fs::write(&empty, "\n").unwrap();
    let (code, _, stderr) = run(&mut ksearch(&["answer", rd_s, empty.to_str().unwrap()]));
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("the answer is empty"), "{stderr}");
    let answer = dir.path().join("answer.md");
    std::fs::write(&answer, "something").unwrap();
    let (code, _, stderr) = run(&mut ksearch(&["answer", rd_s, answer.to_str().unwrap()]));
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = run(&mut ksearch(&["answer", rd_s, answer.to_str().unwrap()]));
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("has no model call waiting for an answer"),
        "{stderr}"
    );

    // Where the page or the export cannot go (here: a directory, and a file, in their way).
    std::fs::create_dir_all(rd.join("report.html").join("in-the-way")).unwrap();
    let (code, _, stderr) = run(&mut ksearch(&["report", rd_s]));
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("failed to write the report into the run directory")
            && stderr.contains("`-o FILE`")
            && stderr.contains("report.html"),
        "{stderr}"
    );
    std::fs::write(rd.join("export"), "in the way").unwrap();
    let (code, _, stderr) = run(&mut ksearch(&["export", rd_s]));
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("failed to write the export into the run directory")
            && stderr.contains("`-o DIR`"),
        "{stderr}"
    );
    let page = dir.path().join("page.html");
    let (code, _, stderr) = run(&mut ksearch(&[
        "report",
        rd_s,
        "-o",
        page.to_str().unwrap(),
    ]));
    assert_eq!(code, 0, "{stderr}");
}

/// A space that reads the device's limits, checked where no GPU is found and none is named:
/// the failures say that `--hardware NAME` is what is missing; with it, the points pass.
#[test]
fn a_space_check_without_a_device_says_to_name_one() {
    let (_, known, _) = run(&mut ksearch(&["knowledge", "hardware"]));
    let args = [
        "space",
        "check",
        "mlx/attention",
        "--limit",
        "2",
        "--no-compile",
    ];
    let hint = "no GPU was found here: name the device to check them for with `--hardware NAME`";
    if known.contains("detected: no GPU found") {
        let (code, stdout, stderr) = run(&mut ksearch(&args));
        assert_eq!(code, 1, "{stdout}{stderr}");
        assert!(stdout.contains(hint), "{stdout}");
    }
    let mut named = args.to_vec();
    named.extend(["--hardware", "h100-sxm"]);
    let (code, stdout, stderr) = run(&mut ksearch(&named));
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stdout.contains(hint), "{stdout}");
}

/// `eval --against` names the file it compares with as that, and a broken one is not the
/// task's fault; one workload's speedup is not "the geometric mean of 1 workloads".
#[test]
fn eval_names_what_it_compares_in_plain_words() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.c");
    std::fs::write(&broken, super::kernels::broken()).unwrap();
    let seed =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/cpu/softmax/seed.c");
    let seed = seed.to_str().unwrap();
    let mut args = vec![
        "eval",
        "cpu/softmax",
        seed,
        "--against",
        broken.to_str().unwrap(),
    ];
    args.extend_from_slice(super::QUICK);
    let (code, _, stderr) = run(&mut ksearch(&args));
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("the file given with --against (`broken.c`) does not build"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("at fault") && !stderr.contains("parent ("),
        "{stderr}"
    );

    let mut args = vec!["eval", "cpu/softmax", seed, "--against", seed];
    args.extend_from_slice(super::QUICK);
    let (code, stdout, stderr) = run(&mut ksearch(&args));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("× (on its one workload)"), "{stdout}");
    assert!(!stdout.contains("of 1 workloads"), "{stdout}");
    assert!(stdout.contains("speedup over seed.c"), "{stdout}");
}

/// A run whose model fails after the seed was measured is kept, and says so with how to go on;
/// one that measured nothing leaves nothing and says it failed to start.
#[test]
fn a_run_that_stops_early_says_whether_it_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let mut args = vec![
        "run",
        "cpu/softmax",
        "--model",
        "exec:false",
        "--iterations",
        "1",
        "--no-timing",
        "--run-dir",
        rd.to_str().unwrap(),
    ];
    args.extend_from_slice(super::QUICK);
    let (code, _, stderr) = run(&mut ksearch(&args));
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the run in {} stopped, and is kept: `ksearch resume {}` goes on",
            rd.display(),
            rd.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("failed to start"), "{stderr}");
    assert!(rd.join("run.sqlite").exists());

    let gone = dir.path().join("gone");
    let (code, _, stderr) = run(&mut ksearch(&[
        "run",
        "cpu/softmax",
        "--workload",
        "no-such-workload",
        "--run-dir",
        gone.to_str().unwrap(),
    ]));
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains(&format!("failed to start the run in {}", gone.display())),
        "{stderr}"
    );
    assert!(!gone.exists());
}

/// Reading a finished run writes nothing into its directory: no `run.sqlite-shm` or `-wal`.
#[test]
fn reading_a_run_leaves_no_files_behind() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let rd_s = rd.to_str().unwrap();
    let mut args = vec![
        "run",
        "cpu/softmax",
        "--iterations",
        "1",
        "--no-timing",
        "--run-dir",
        rd_s,
    ];
    args.extend_from_slice(super::QUICK);
    let (code, _, stderr) = run(&mut ksearch(&args));
    assert_eq!(code, 0, "{stderr}");
    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(&rd)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let before = listing();
    let out = dir.path().join("out");
    for args in [
        vec!["tree", rd_s],
        vec!["tree", rd_s, "--json"],
        vec!["show", rd_s, "best"],
        vec!["export", rd_s, "-o", out.to_str().unwrap()],
        vec!["report", rd_s, "-o", "-"],
    ] {
        let (code, _, stderr) = run(&mut ksearch(&args));
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert_eq!(listing(), before, "{args:?}");
    }
    assert!(
        !before
            .iter()
            .any(|n| n.ends_with("-shm") || n.ends_with("-wal")),
        "{before:?}"
    );
}

/// `ksearch eval` of a candidate that hangs, with no `--timeout`: the judge stops a call that
/// takes far longer than the reference's (100 times, at least 10 s) as `timeout`, instead of
/// waiting out the evaluation's 5-minute limit.
#[test]
fn eval_of_a_hanging_candidate_stops_in_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let hang = dir.path().join("hang.c");
    std::fs::write(
        &hang,
        "#include <stdint.h>\nvoid softmax(const float *x, float *y, int64_t rows, int64_t cols) {\n  (void)x; (void)y; (void)rows; (void)cols;\n  for (volatile int spin = 1; spin;) {}\n}\n",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let (code, stdout, stderr) = run(&mut ksearch(&[
        "eval",
        "cpu/softmax",
        hang.to_str().unwrap(),
        "--workload",
        "small",
    ]));
    let took = started.elapsed();
    assert!(
        stdout.contains("timeout") && stdout.contains("derived from the reference's time"),
        "{code} {stdout} {stderr}"
    );
    assert!(took < std::time::Duration::from_secs(60), "took {took:?}");
}
