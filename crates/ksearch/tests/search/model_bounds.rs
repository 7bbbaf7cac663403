//! What a model's provider, its command or ksearch.toml can send cannot crash a run, swell its
//! record, or carry a secret into an error, the record or a prompt.

use std::path::{Path, PathBuf};

use crate::support::{QUICK, ksearch};

const KEY: &str = "sk-REDTEAM-SECRET-7777";
/// Another variable named like a secret, which a command inherits too.
const TOKEN: &str = "tok_OtherService-424242";

/// No form of a secret: as written, in another case, or without its prefix.
fn assert_no_secret(what: &str, text: &str) {
    let lower = text.to_ascii_lowercase();
    for core in ["redteam-secret-7777", "otherservice-424242"] {
        assert!(!lower.contains(core), "{what} holds a secret: {text}");
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// `ksearch run cpu/softmax --model MODEL` in `dir`, with the secrets in its environment.
fn run_with(dir: &Path, model: &str) -> std::process::Output {
    let rd = dir.join("run");
    let mut args = vec![
        "run",
        "cpu/softmax",
        "--model",
        model,
        "--iterations",
        "5",
        "--run-dir",
        rd.to_str().unwrap(),
    ];
    args.extend_from_slice(QUICK);
    ksearch(&args)
        .current_dir(dir)
        .env("OPENAI_API_KEY", KEY)
        .env("OTHER_SERVICE_TOKEN", TOKEN)
        .output()
        .unwrap()
}

/// A number no `Duration` holds in ksearch.toml is refused naming the file, line and field
/// (`timeout_s = -1` had panicked where the client was built).
#[test]
fn a_bad_timeout_in_ksearch_toml_names_its_line_instead_of_panicking() {
    for value in ["-1", "nan", "inf", "1e308", "18446744073709551615.0"] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("ksearch.toml"),
            format!("[llm]\nmax_retries = 0\ntimeout_s = {value}\n"),
        )
        .unwrap();
        let out = run_with(dir.path(), "exec:cat");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && out.status.code() != Some(101),
            "{value}: {:?} {stderr}",
            out.status
        );
        assert!(
            stderr.contains("ksearch.toml:3:") && stderr.contains("llm.timeout_s"),
            "{value}: {stderr}"
        );
        assert!(!dir.path().join("run").exists(), "{value}: no run started");
    }
}

/// A command that prints the key it inherited on its stderr and fails: ksearch's error quotes
/// its stderr scrubbed, in every case and form (it had printed the key as is).
#[test]
fn a_failing_command_s_secrets_stay_out_of_ksearch_s_errors() {
    let dir = tempfile::tempdir().unwrap();
    let model = "exec:cat >/dev/null; \
                 echo \"fatal: auth failed with key $OPENAI_API_KEY\" >&2; \
                 k=$OPENAI_API_KEY; echo \"${k#sk-}\" | tr A-Z a-z >&2; \
                 echo \"token $OTHER_SERVICE_TOKEN\" >&2; exit 1";
    let out = run_with(dir.path(), model);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("fatal: auth failed with key [redacted]"),
        "{stderr}"
    );
    assert_no_secret("stderr", &stderr);
    assert_no_secret("stdout", &stdout);
    for file in files_under(&dir.path().join("run")) {
        let bytes = std::fs::read(&file).unwrap();
        assert_no_secret(
            &file.display().to_string(),
            &String::from_utf8_lossy(&bytes),
        );
    }
}

/// A command whose answers carry the key: the answers are unusable and sent back to it with
/// the error (its prompts), and kept in the run's record; neither holds the key.
#[test]
fn a_command_s_answers_reach_neither_the_record_nor_its_prompts_with_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("prompts.log");
    let model = format!(
        "exec:cat >> {}; echo \"my key is $OPENAI_API_KEY, my token $OTHER_SERVICE_TOKEN\"",
        prompts.display()
    );
    let out = run_with(dir.path(), &model);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("could not be used"), "{stdout}");
    let sent = std::fs::read_to_string(&prompts).unwrap();
    assert!(
        sent.contains("### ksearch assistant\nmy key is [redacted]"),
        "its answers were sent back, scrubbed: {sent}"
    );
    assert_no_secret("the prompts", &sent);
    assert_no_secret("stdout", &stdout);
    assert_no_secret("stderr", &stderr);
    for file in files_under(&dir.path().join("run")) {
        let bytes = std::fs::read(&file).unwrap();
        assert_no_secret(
            &file.display().to_string(),
            &String::from_utf8_lossy(&bytes),
        );
    }
}

/// Answers of 10 MB each: each is an unusable answer (over the cap), cut to an excerpt; the
/// run stops as for any unusable model and its record stays small (a 100 MB answer had made
/// a 100 MB run.sqlite).
#[test]
fn huge_answers_do_not_swell_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let model = "exec:cat >/dev/null; head -c 10000000 /dev/zero | tr '\\0' y";
    let out = run_with(dir.path(), model);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("could not be used") && stdout.contains("answer_over_cap"),
        "{stdout}"
    );
    let total: u64 = files_under(&dir.path().join("run"))
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    assert!(total < 4 << 20, "the run holds {total} bytes");
}
