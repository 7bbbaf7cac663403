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

fn edit(path: &Path, from: &str, to: &str) {
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
fn copy_task(name: &str, to: &Path) {
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
fn count(text: &str, what: &str) -> usize {
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

#[test]
#[cfg_attr(
    not(all(has_torch, has_triton)),
    ignore = "needs python3 with PyTorch and Triton (`.ci/run` installs them: pip install torch==2.11.0)"
)]
fn space_check_compiles_a_triton_space_for_an_nvidia_gpu_this_machine_lacks() {
    // `space check TASK` of one point: these knobs and three more, for the H200.
    let check = |task: &str, knobs: &[&str]| {
        let mut args = vec!["space", "check", task, "--hardware", "h200", "--limit", "1"];
        for knob in ["block_m=128", "group_m=8", "warps=8"].iter().chain(knobs) {
            args.extend(["--set", knob]);
        }
        run(&mut ksearch(&args))
    };
    // A point with TMA loads: each workload's kernel copies tiles with TMA and multiplies them
    // with wgmma, compiled for compute capability 9.0 with no GPU here.
    let (code, stdout, stderr) = check(
        "torch/gemm",
        &["tma=1", "block_n=256", "block_k=64", "stages=3"],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains(
            "(Triton kernels compiled ahead of time for NVIDIA H200 SXM 141GB (compute capability 9.0)"
        ),
        "{stdout}"
    );
    assert_eq!(count(&stdout, "kernels of 1 point:"), 2, "{stdout}");
    assert_eq!(count(&stdout, "copy tiles with TMA"), 2, "{stdout}");
    assert_eq!(count(&stdout, "use wgmma"), 2, "{stdout}");
    assert_eq!(count(&stdout, "spill registers"), 0, "{stdout}");

    // Without the space's shared-memory constraint, a pipeline over the H200's 227 KiB a block
    // is compiled, and fails naming its knobs.
    let tmp = tempfile::tempdir().unwrap();
    let task = tmp.path().join("gemm");
    copy_task("torch/gemm", &task);
    edit(
        &task.join("space/space.toml"),
        "* stages <= 232448",
        "* stages <= 1000000",
    );
    let (code, stdout, stderr) = check(
        task.to_str().unwrap(),
        &["tma=0", "block_n=256", "block_k=128", "stages=4"],
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("0 ok, 0 excluded by constraints, 1 failed"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "block_k=128 block_m=128 block_n=256 group_m=8 persistent=0 stages=4 tma=0 warps=8"
        ),
        "{stdout}"
    );
    assert!(stdout.contains(": no point passed)"), "{stdout}");
    assert!(
        stdout.contains("bytes of shared memory on workload `M")
            && stdout.contains("a block may have 232448"),
        "{stdout}"
    );
}

/// One point of `task`'s space per entry of `points` (its knobs, space-separated), rendered by
/// `space check --write` as a search renders them, into a temporary directory.
fn rendered(task: &str, points: &[&str]) -> (tempfile::TempDir, Vec<PathBuf>) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    for knobs in points {
        // For the H200 (the device of the GPU measurements): constraints read its limits.
        let mut args = vec![
            "space",
            "check",
            task,
            "--hardware",
            "h200",
            "--limit",
            "1",
            "--no-compile",
            "--write",
            dir,
        ];
        for knob in knobs.split(' ') {
            args.extend(["--set", knob]);
        }
        let (code, stdout, stderr) = run(&mut ksearch(&args));
        assert_eq!(code, 0, "{knobs}: {stdout}{stderr}");
        assert!(stdout.contains("1 ok"), "{knobs}: {stdout}");
    }
    let mut files: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), points.len());
    (tmp, files)
}

/// `python3 tests/fixtures/SCRIPT ARGS...` with `env`: what it printed, once it passed.
fn fixture_script<S: AsRef<std::ffi::OsStr>>(
    script: &str,
    args: &[S],
    env: &[(&str, &str)],
) -> String {
    let (code, stdout, stderr) = run(std::process::Command::new("python3")
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(script),
        )
        .args(args)
        .envs(env.iter().copied()));
    assert_eq!(code, 0, "{stdout}{stderr}");
    stdout
}

#[test]
#[cfg_attr(
    not(all(has_torch, has_triton)),
    ignore = "needs python3 with PyTorch and Triton (`.ci/run` installs them: pip install torch==2.11.0)"
)]
fn the_triton_gemm_space_computes_a_times_b_transposed_under_tritons_interpreter() {
    // Pointer and TMA loads, row-major and grouped tile order, one program per tile or a few
    // persistent ones walking the tiles; run on the CPU by Triton's interpreter on shapes with
    // partial tiles.
    let fixed = "block_m=64 block_n=32 block_k=32 warps=4 stages=2";
    let points = [
        format!("{fixed} tma=0 group_m=1 persistent=0"),
        format!("{fixed} tma=1 group_m=8 persistent=0"),
        format!("{fixed} tma=1 group_m=1 persistent=0"),
        format!("{fixed} tma=1 group_m=8 persistent=1"),
    ];
    let (_tmp, files) = rendered("torch/gemm", &points.each_ref().map(String::as_str));
    let text = fixture_script(
        "triton_interpret/gemm_points.py",
        &files,
        &[("TRITON_INTERPRET", "1")],
    );
    // Two shapes a point, and the unaligned view of each TMA point.
    assert_eq!(
        text.lines().filter(|l| l.starts_with("ok ")).count(),
        11,
        "{text}"
    );
    assert_eq!(text.matches(" tma max error").count(), 6, "{text}");
    assert_eq!(
        text.matches("unaligned view: pointer loads").count(),
        3,
        "{text}"
    );
}

#[test]
#[cfg_attr(
    not(all(has_mlx, has_gxx)),
    ignore = "needs python3 with MLX, and g++ (`.ci/run` installs them)"
)]
fn the_mlx_spaces_cuda_kernels_compute_what_their_references_do_when_emulated_on_the_cpu() {
    // Each point's CUDA kernels, and the seed's, run on the CPU
    // (fixtures/cuda_emulate/emulate.py), checked against the task's reference at its
    // tolerance. The scan: one pass and two-pass chunked scans, one to sixteen threads per
    // channel (warp shuffles), steps loaded one, four or sixteen at a time, prefetching and exp2.
    // The state update: one to sixteen threads per channel, scalar and 2- and 4-wide vector loads.
    // Attention: FMAs, and tensor cores (mma.sync, ldmatrix and cp.async emulated warp-wide as the
    // PTX ISA lays out the fragments) with per-element and ldmatrix fragments, one and two
    // 16-row tiles a warp, one to eight warps, causal or not, head dimensions 128 and 64; and
    // Hopper's warpgroup products (wgmma, one and two warpgroups, 64- and 128-key tiles, one
    // product at a time or the next Q·Kᵀ overlapping P·V, tiles without swizzle or with the
    // 128-byte swizzle), their shared-memory operands read through descriptors as the emulator
    // reads the PTX ISA.
    let cases = [
        (
            "selective_scan",
            r#"{"batch": 2, "seqlen": 256, "dinner": 16, "dstate": 16}"#,
            &[
                "block=64 chunks=1 tile=1 tpc=1 prefetch=0 exp2=0",
                "block=64 chunks=1 tile=4 tpc=1 prefetch=0 exp2=0",
                "block=64 chunks=4 tile=1 tpc=16 prefetch=1 exp2=1",
                "block=64 chunks=16 tile=16 tpc=4 prefetch=0 exp2=0",
            ][..],
        ),
        (
            "selective_state_update",
            r#"{"batch": 3, "dinner": 64, "dstate": 16}"#,
            &[
                "block=64 tpc=1 vec=1",
                "block=64 tpc=4 vec=4",
                "block=64 tpc=8 vec=2",
                "block=64 tpc=16 vec=1",
            ][..],
        ),
        (
            "attention",
            r#"{"batch": 1, "heads": 2, "seq": 256, "dim": 128, "causal": 1}"#,
            &[
                "mma=0 warps=2 block_n=32",
                "mma=1 warps=4 block_n=64 ldmatrix=0",
                "mma=1 warps=4 block_n=64 ldmatrix=1 exp2=1 skip=1 vload=1",
                "mma=1 warps=4 block_n=64 ldmatrix=1 rows=32 cp_async=1 skip=1",
            ][..],
        ),
        (
            "attention",
            r#"{"batch": 1, "heads": 1, "seq": 256, "dim": 64, "causal": 0}"#,
            &[
                "mma=1 warps=8 block_n=16 ldmatrix=1 rows=32 vload=1",
                "mma=1 warps=1 block_n=16 cp_async=1 exp2=1",
                "mma=1 wgmma=1 swizzle=0 warps=4 block_n=128 cp_async=1",
                "mma=1 wgmma=1 swizzle=0 pipeline=1 warps=8 block_n=128 cp_async=1",
                "mma=1 wgmma=1 swizzle=1 pipeline=1 warps=4 block_n=64 cp_async=1",
            ][..],
        ),
        (
            "attention",
            r#"{"batch": 1, "heads": 2, "seq": 256, "dim": 128, "causal": 1}"#,
            &[
                "mma=1 wgmma=1 swizzle=0 warps=4 block_n=64 cp_async=1 skip=1 exp2=1",
                "mma=1 wgmma=1 swizzle=0 warps=8 block_n=128 cp_async=1 skip=1",
                "mma=1 wgmma=1 swizzle=0 warps=8 block_n=64 cp_async=1 skip=0",
                "mma=1 wgmma=1 swizzle=0 pipeline=1 warps=8 block_n=64 cp_async=1 skip=1 exp2=1",
                "mma=1 wgmma=1 swizzle=0 pipeline=1 warps=4 block_n=128 cp_async=1 skip=0",
                "mma=1 wgmma=1 swizzle=1 warps=8 block_n=128 cp_async=1 skip=1",
                "mma=1 wgmma=1 swizzle=1 pipeline=1 warps=8 block_n=64 cp_async=1 skip=1",
            ][..],
        ),
    ];
    for (task, axes, points) in cases {
        let (_tmp, files) = rendered(&format!("mlx/{task}"), points);
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tasks/mlx")
            .join(task);
        // The task's seed as well: the kernel every search starts from.
        let seed = dir.join("seed.py").into_os_string();
        let mut args = vec![dir.into_os_string(), axes.into(), seed];
        args.extend(files.into_iter().map(PathBuf::into_os_string));
        let text = fixture_script("cuda_emulate/emulate.py", &args, &[]);
        assert!(text.starts_with("ok  seed.py: "), "{text}");
        assert_eq!(
            text.lines().filter(|l| l.starts_with("ok ")).count(),
            points.len() + 1,
            "{text}"
        );
    }
}

/// The attention `point` rendered, and copies of it with one edit each (`(name, from, to)`: the
/// only `from` in its source replaced), emulated at `axes`: the point must pass and every copy,
/// as `wrong-NAME.py`, fail.
fn emulated_with_wrong_copies(point: &str, axes: &str, edits: &[(&str, &str, &str)]) {
    let (_tmp, files) = rendered("mlx/attention", &[point]);
    let right = fs_err::read_to_string(&files[0]).unwrap();
    let mut args = vec![files[0].clone()];
    for (name, from, to) in edits {
        assert_eq!(right.matches(from).count(), 1, "{right}");
        let wrong = files[0].with_file_name(format!("wrong-{name}.py"));
        fs_err::write(&wrong, right.replace(from, to)).unwrap();
        args.push(wrong);
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/mlx/attention");
    let (code, stdout, stderr) = run(std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda_emulate/emulate.py"))
        .arg(dir)
        .arg(axes)
        .args(&args));
    assert_eq!(code, 1, "{stdout}{stderr}");
    let lines: Vec<_> = stdout.lines().collect();
    assert_eq!(lines.len(), edits.len() + 1, "{stdout}");
    assert!(lines[0].starts_with("ok  "), "{stdout}");
    for ((name, _, _), line) in edits.iter().zip(&lines[1..]) {
        assert!(
            line.starts_with(&format!("BAD wrong-{name}.py: o: ")),
            "{stdout}"
        );
    }
}

#[test]
#[cfg_attr(
    not(all(has_mlx, has_gxx)),
    ignore = "needs python3 with MLX, and g++ (`.ci/run` installs them)"
)]
fn the_emulator_tells_a_misplaced_tensor_core_fragment_from_a_right_one() {
    // Q's second 16-dim fragment read from 8 dims on instead of 16: the emulated ldmatrix and
    // mma.sync must give wrong outputs for it, or the passing points above would prove nothing.
    emulated_with_wrong_copies(
        "mma=1 warps=2 block_n=32 ldmatrix=1 rows=32",
        r#"{"batch": 1, "heads": 1, "seq": 128, "dim": 64, "causal": 0}"#,
        &[("fragment", "kk * 16 + 16);", "kk * 16 + 8);")],
    );
}

#[test]
#[cfg_attr(
    not(all(has_mlx, has_gxx)),
    ignore = "needs python3 with MLX, and g++ (`.ci/run` installs them)"
)]
fn the_emulator_tells_wrong_warpgroup_layouts_from_right_ones() {
    // A descriptor's two strides (between 8×8 blocks along K, and along M or N) swapped gives
    // wrong tiles, not an error: for Q·Kᵀ (both operands K-major) and for P·V (V transposed), the
    // emulated wgmma must give wrong outputs, or the passing warpgroup points above would prove
    // nothing about the layout. (Which reading the hardware has is checked on a GPU:
    // bench/attention_wgmma_check.py.)
    emulated_with_wrong_copies(
        "mma=1 wgmma=1 swizzle=0 warps=4 block_n=64 cp_async=1",
        r#"{"batch": 1, "heads": 1, "seq": 128, "dim": 128, "causal": 0}"#,
        &[
            ("qk", "GK * 2, 128)", "128, GK * 2)"),
            ("pv", "8 * 16, GK * 2)", "GK * 2, 8 * 16)"),
        ],
    );
    // The same for the 128-byte swizzle: tiles stored without the XOR the descriptors name, and
    // V's two offsets swapped, must fail.
    emulated_with_wrong_copies(
        "mma=1 wgmma=1 swizzle=1 warps=4 block_n=64 cp_async=1",
        r#"{"batch": 1, "heads": 1, "seq": 128, "dim": 128, "causal": 0}"#,
        &[
            ("xor", "((c8 % 8) ^ (r % 8)) * 8", "(c8 % 8) * 8"),
            ("pv", "BN * 128, 1024)", "1024, BN * 128)"),
        ],
    );
}

/// The pipelined warpgroup attention kernel as ptxas schedules it, read from the machine code
/// `space check --write` puts beside the point: in every key-tile loop, the wait for the next
/// tile's scores (`WARPGROUP.DEPBAR.LE gsb0, 0x1`) is followed by the tile's 64 exponentials
/// before the wait for P·V (`... 0x0`), so the softmax runs under P·V. (ptxas hoisted that wait
/// above the exponentials once the branch that pins it tested something it could decide.)
#[test]
#[cfg_attr(
    not(all(has_mlx, has_torch)),
    ignore = "needs python3 with MLX and PyTorch's CUDA wheel, whose NVRTC compiles and whose Triton ships nvdisasm (`.ci/run` installs them)"
)]
fn the_pipelined_attention_kernel_computes_its_exponentials_while_p_v_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let mut args = vec![
        "space",
        "check",
        "mlx/attention",
        "--hardware",
        "h200",
        "--limit",
        "1",
        "--write",
        dir,
    ];
    for kv in [
        "mma=1",
        "wgmma=1",
        "pipeline=1",
        "swizzle=1",
        "cp_async=1",
        "exp2=1",
        "skip=1",
        "vload=1",
        "ldmatrix=1",
        "warps=8",
        "block_n=128",
    ] {
        args.extend(["--set", kv]);
    }
    let (code, stdout, stderr) = run(&mut ksearch(&args));
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("machine code is beside its point in"),
        "{stdout}"
    );
    let mut sass: Vec<PathBuf> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sass"))
        .collect();
    sass.sort();
    // One kernel a workload: 7 workloads, causal and not, head dimensions 128 and 64.
    assert_eq!(sass.len(), 7, "{sass:?}");
    for file in &sass {
        let text = std::fs::read_to_string(file).unwrap();
        let mut between = None;
        let mut loops = 0;
        for line in text.lines() {
            if line.contains("WARPGROUP.DEPBAR.LE gsb0, 0x1") {
                between = Some(0);
            } else if line.contains("WARPGROUP.DEPBAR.LE gsb0, 0x0") {
                if let Some(n) = between.take() {
                    assert!(
                        n >= 64,
                        "{}: {n} exponentials between the two waits",
                        file.display()
                    );
                    loops += 1;
                }
            } else if line.contains("MUFU.EX2")
                && let Some(n) = between.as_mut()
            {
                *n += 1;
            }
        }
        assert!(loops > 0, "{}: no pipelined loop", file.display());
    }
}

#[test]
#[cfg_attr(
    not(all(has_mlx, has_torch)),
    ignore = "needs python3 with MLX and PyTorch's CUDA wheel, whose NVRTC compiles (`.ci/run` installs them)"
)]
fn space_check_compiles_an_mlx_spaces_cuda_kernels_with_nvrtc_for_an_nvidia_gpu_this_machine_lacks()
{
    let point = [
        "--set",
        "chunks=16",
        "--set",
        "tile=8",
        "--set",
        "tpc=4",
        "--set",
        "block=128",
        "--set",
        "prefetch=0",
        "--set",
        "exp2=0",
        "--hardware",
        "h200",
        "--limit",
        "1",
    ];
    let mut args = vec!["space", "check", "mlx/selective_scan"];
    args.extend(point);
    let (code, stdout, stderr) = run(&mut ksearch(&args));
    assert_eq!(code, 0, "{stdout}{stderr}");
    // Two passes of the chunked scan on each of four workloads.
    assert!(
        stdout.contains("(MLX CUDA kernels (NVRTC) compiled ahead of time for NVIDIA H200 SXM 141GB (compute capability 9.0), every workload: 8 kernels of 1 point:"),
        "{stdout}"
    );
    assert_eq!(count(&stdout, "spill registers"), 0, "{stdout}");
    assert!(
        stdout.contains("(their Metal kernels were not compiled"),
        "{stdout}"
    );

    // A kernel that uses a name it never declared fails, with NVRTC's message and its knobs.
    let tmp = tempfile::tempdir().unwrap();
    let task = tmp.path().join("scan");
    copy_task("mlx/selective_scan", &task);
    edit(
        &task.join("space/cuda.cu.j2"),
        "float us[T], ds[T], bs[T][PER];",
        "float us[T], ds[T];",
    );
    let mut args = vec!["space", "check", task.to_str().unwrap()];
    args.extend(point);
    let (code, stdout, stderr) = run(&mut ksearch(&args));
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("FAILED    block=128 chunks=16 exp2=0 prefetch=0 tile=8 tpc=4:"),
        "{stdout}"
    );
    assert!(
        stdout
            .contains("CUDA kernel `scan_summary` does not compile for sm_90a on workload `L512`")
            && stdout.contains("\"bs\""),
        "{stdout}"
    );
}

#[test]
#[cfg_attr(
    not(all(has_torch, has_triton)),
    ignore = "needs python3 with PyTorch and Triton (`.ci/run` installs them: pip install torch==2.11.0)"
)]
fn the_templates_compiled_ahead_of_time_see_no_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let task = tmp.path().join("gemm");
    copy_task("torch/gemm", &task);
    edit(
        &task.join("space/kernel.py.j2"),
        "def run(A, B, *, M, N, K):\n",
        "def run(A, B, *, M, N, K):\n    import os\n    assert not [k for k in os.environ if 'API_KEY' in k], 'a secret reached the template'\n",
    );
    let (code, stdout, stderr) = run(ksearch(&[
        "space",
        "check",
        task.to_str().unwrap(),
        "--hardware",
        "h200",
        "--limit",
        "1",
    ])
    .env("OPENAI_API_KEY", "sk-must-not-leak")
    .env("ANTHROPIC_API_KEY", "sk-ant-must-not-leak"));
    assert_eq!(code, 0, "{stdout}{stderr}");
    // Compiled: `run` got past its check of the environment to the Triton launch.
    assert!(
        stdout.contains("every workload: 2 kernels of 1 point:"),
        "{stdout}"
    );
    assert!(!stdout.contains("not compiled ahead of time"), "{stdout}");
}
