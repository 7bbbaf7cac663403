//! Template spaces' kernels run on the CPU and checked against their tasks' references: Triton's
//! interpreter for the Triton spaces, and an emulation of the MLX spaces' CUDA kernels
//! (`tests/fixtures/cuda_emulate`), which must also tell wrong kernels from right ones.

use std::path::{Path, PathBuf};

use super::{ksearch, run};

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
                "block=64 tpc=1 vec=4 loads_first=1",
                "block=64 tpc=4 vec=4 loads_first=1",
                "block=64 tpc=2 vec=1 loads_first=1",
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
