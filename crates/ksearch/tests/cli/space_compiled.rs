//! Template spaces compiled for a GPU this machine lacks: `space check --hardware` with Triton's
//! compiler and NVRTC, the machine code it writes with `--write`, and what the templates see.

use std::path::PathBuf;

use super::space::{copy_task, count, edit};
use super::{ksearch, run};

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
