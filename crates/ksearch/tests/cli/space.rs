//! Template spaces as files: `ksearch space check` and the builtin proposer searching a task's
//! own space (the built-in `cpu/rmsnorm`, and copies of it broken on purpose).

use std::path::{Path, PathBuf};

use super::{ksearch, run};

/// A copy of the built-in `cpu/rmsnorm` task directory, to change.
fn rmsnorm_copy(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/cpu/rmsnorm");
    let dst = dir.join("rmsnorm");
    std::fs::create_dir_all(dst.join("space")).unwrap();
    for f in [
        "task.toml",
        "reference.c",
        "seed.c",
        "space/space.toml",
        "space/kernel.c.j2",
    ] {
        std::fs::copy(src.join(f), dst.join(f)).unwrap();
    }
    dst
}

pub(super) fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{} holds {from:?}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn space_check_renders_and_compiles_every_point_of_a_small_space() {
    let (code, stdout, stderr) = run(&mut ksearch(&["space", "check", "cpu/rmsnorm"]));
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("checked every one of its 24 points"),
        "{stdout}"
    );
    assert!(
        stdout.contains("22 ok, 2 excluded by constraints, 0 failed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("excluded  acc=4 recip=0 vec=16: more than 32 floats"),
        "{stdout}"
    );
}

#[test]
fn space_check_samples_a_large_space_and_says_so() {
    let (code, stdout, _) = run(&mut ksearch(&[
        "space",
        "check",
        "cpu/rmsnorm",
        "--limit",
        "5",
        "--no-compile",
    ]));
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("a sample of 5 of its 24 points"),
        "{stdout}"
    );
    // The seed point comes first.
    assert!(
        stdout
            .lines()
            .nth(1)
            .unwrap()
            .contains("acc=1 recip=0 vec=1"),
        "{stdout}"
    );
}

#[test]
fn space_check_names_the_knobs_of_a_point_that_does_not_compile() {
    let tmp = tempfile::tempdir().unwrap();
    let task = rmsnorm_copy(tmp.path());
    edit(
        &task.join("space/kernel.c.j2"),
        "#include <string.h>",
        "#include <string.h>\n{% if vec == 8 and recip %}this is not C;{% endif %}",
    );
    let (code, stdout, stderr) = run(&mut ksearch(&["space", "check", task.to_str().unwrap()]));
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("19 ok, 2 excluded by constraints, 3 failed"),
        "{stdout}"
    );
    for point in [
        "acc=1 recip=1 vec=8",
        "acc=2 recip=1 vec=8",
        "acc=4 recip=1 vec=8",
    ] {
        assert!(
            stdout.contains(&format!("FAILED    {point}:")),
            "{point}: {stdout}"
        );
    }
    assert!(stdout.contains("does not compile"), "{stdout}");
}

#[test]
fn space_check_reports_a_template_error_and_a_rule() {
    let tmp = tempfile::tempdir().unwrap();
    let task = rmsnorm_copy(tmp.path());
    // An undefined variable in one branch, and `main` (which the contract forbids) in another.
    edit(
        &task.join("space/kernel.c.j2"),
        "#include <string.h>",
        "#include <string.h>\n{% if acc == 2 %}{{ no_such_knob }}{% endif %}{% if acc == 4 %}int main(void) { return 0; }{% endif %}",
    );
    let (code, stdout, _) = run(&mut ksearch(&[
        "space",
        "check",
        task.to_str().unwrap(),
        "--no-compile",
    ]));
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("no_such_knob"), "{stdout}");
    assert!(stdout.contains("rule `"), "{stdout}");
    assert!(
        stdout.contains("8 ok, 2 excluded by constraints, 14 failed"),
        "{stdout}"
    );
}

#[test]
fn a_broken_space_file_is_an_input_error_naming_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let task = rmsnorm_copy(tmp.path());
    edit(&task.join("space/space.toml"), "seed = 0", "seed = 2");
    let (code, _, stderr) = run(&mut ksearch(&["space", "check", task.to_str().unwrap()]));
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("space/space.toml:"), "{stderr}");
    assert!(stderr.contains("field `knobs[2].seed`"), "{stderr}");

    let task = rmsnorm_copy(&tmp.path().join("second"));
    edit(&task.join("space/space.toml"), "kernel.c.j2", "kernl.c.j2");
    let (code, _, stderr) = run(&mut ksearch(&["space", "check", task.to_str().unwrap()]));
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("field `template`"), "{stderr}");

    let (code, _, stderr) = run(&mut ksearch(&["space", "check", "cpu/softmax"]));
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("ships no template space"), "{stderr}");
}

#[test]
fn the_builtin_proposer_searches_a_task_s_own_space() {
    let tmp = tempfile::tempdir().unwrap();
    let task = rmsnorm_copy(tmp.path());
    let rd = tmp.path().join("run");
    let (code, stdout, stderr) = run(&mut ksearch(&[
        "run",
        task.to_str().unwrap(),
        "--model",
        "builtin",
        "--iterations",
        "4",
        "--workload",
        "small",
        "--min-runs",
        "3",
        "--min-time-ms",
        "5",
        "--warmup-ms",
        "1",
        "--run-dir",
        rd.to_str().unwrap(),
        "--quiet",
    ]));
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, tree, _) = run(&mut ksearch(&["tree", rd.to_str().unwrap(), "--json"]));
    assert_eq!(code, 0);
    let tree: serde_json::Value = serde_json::from_str(&tree).unwrap();
    let nodes = tree["nodes"].as_array().expect("nodes");
    let tactics: Vec<&str> = nodes
        .iter()
        .filter(|n| n["id"] != 0)
        .filter_map(|n| n["decision"].as_str())
        .collect();
    // Every action is one of the space's tactics, and its description is the knob's.
    assert!(tactics.len() >= 3, "{tactics:?}");
    for t in &tactics {
        assert!(
            [
                "explicit vectorization",
                "multiple accumulators",
                "reciprocal multiply"
            ]
            .iter()
            .any(|k| t.starts_with(k)),
            "{t}"
        );
    }
    let rationale = nodes
        .iter()
        .filter_map(|n| n["action"]["rationale"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        rationale.contains("the task's space expects"),
        "{rationale}"
    );
    // Something was rendered from the template and measured.
    let artifacts = std::fs::read_dir(rd.join("artifacts")).unwrap().count();
    assert!(artifacts >= 2, "{artifacts} artifacts");
    let mut sources = String::new();
    for e in std::fs::read_dir(rd.join("artifacts")).unwrap() {
        sources.push_str(&std::fs::read_to_string(e.unwrap().path()).unwrap_or_default());
    }
    assert!(
        sources.contains("Builtin template space of cpu/rmsnorm"),
        "no rendered candidate among the artifacts"
    );
}

#[test]
fn the_built_in_gpu_spaces_render_and_meet_the_rules_of_both_targets() {
    for task in [
        "mlx/attention",
        "mlx/selective_scan",
        "mlx/selective_state_update",
    ] {
        for hw in ["h200", "m3-max"] {
            let (code, stdout, stderr) = run(&mut ksearch(&[
                "space",
                "check",
                task,
                "--hardware",
                hw,
                "--no-compile",
                "--limit",
                "12",
            ]));
            assert_eq!(code, 0, "{task} on {hw}: {stdout}{stderr}");
            // The seed point, the points one knob away from it, then others: all 16384 points of
            // the attention space take minutes in a debug build (under a minute in a release
            // build, where `space check --limit 100000` checks them all).
            assert!(stdout.contains("checked a sample of 12"), "{stdout}");
            assert!(stdout.contains(", 0 failed"), "{task} on {hw}: {stdout}");
            assert!(stdout.contains(" ok, "), "{stdout}");
        }
    }
}

/// An MLX point the space allows on an H200 but not on Apple GPUs (8 warps of tensor-core tiles
/// with 128-key tiles need more than 32 KB) carries a Metal kernel over Apple's limit: checked
/// for the H200, its Metal kernel is left out of the rules, and the check says so; checked for
/// an Apple GPU, the point is excluded.
#[test]
fn a_point_another_target_excludes_is_not_held_to_that_targets_rules() {
    let pins = [
        "--set",
        "mma=1",
        "--set",
        "warps=8",
        "--set",
        "block_n=128",
        "--set",
        "wgmma=0",
    ];
    let check = |hw: &str| {
        let mut args = vec![
            "space",
            "check",
            "mlx/attention",
            "--hardware",
            hw,
            "--no-compile",
            "--limit",
            "24",
        ];
        args.extend(pins);
        run(&mut ksearch(&args))
    };
    let (code, stdout, stderr) = check("h200");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains(", 0 failed"), "{stdout}");
    let ok: usize = stdout
        .lines()
        .find_map(|l| {
            l.split_once(" ok, ")
                .map(|(n, _)| n.trim().parse().unwrap())
        })
        .unwrap();
    assert!(ok > 0, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "({ok} of these points carry `metal` kernels that the space excludes on "
        )),
        "{stdout}"
    );
    let (code, stdout, stderr) = check("m3-max");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("0 ok, 24 excluded by constraints, 0 failed"),
        "{stdout}"
    );
    assert!(!stdout.contains("carry `"), "{stdout}");
}

/// A copy of the built-in task `name` (its files and its `space/`) at `to`.
pub(super) fn copy_task(name: &str, to: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tasks")
        .join(name);
    for dir in [src.clone(), src.join("space")] {
        let into = to.join(dir.strip_prefix(&src).unwrap());
        std::fs::create_dir_all(&into).unwrap();
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_file() {
                std::fs::copy(&path, into.join(path.file_name().unwrap())).unwrap();
            }
        }
    }
}

/// The numbers before `what` in `text` ("108 kernels", "54 with wgmma").
pub(super) fn count(text: &str, what: &str) -> usize {
    let at = text
        .find(what)
        .unwrap_or_else(|| panic!("{what:?} in {text}"));
    let digits: String = text[..at]
        .trim_end()
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().unwrap()
}
