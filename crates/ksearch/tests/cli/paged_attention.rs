//! `mlx/paged_attention` (issue 46) on MLX's CPU device: its seed and its baseline agree with
//! the reference, and the ragged contexts are real (a kernel that reads every sequence's pages
//! to full length is wrong). The Metal and CUDA paths are not run here.

use std::path::Path;

use crate::{ksearch, run};

fn eval(candidate: Option<&Path>) -> serde_json::Value {
    let mut args = vec!["eval", "mlx/paged_attention"];
    if let Some(c) = candidate {
        args.push(c.to_str().unwrap());
    }
    args.extend([
        "--target",
        "cpu",
        "--workload",
        "b1",
        "--seeds",
        "1",
        "--no-timing",
        "--json",
    ]);
    let (_, stdout, stderr) = run(&mut ksearch(&args));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"))
}

#[test]
#[cfg_attr(
    not(has_mlx),
    ignore = "needs python3 with MLX (`.ci/run` installs it: pip install \"mlx[cpu]\")"
)]
fn the_seed_and_the_baseline_agree_with_the_reference_and_a_full_length_read_does_not() {
    let task = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/mlx/paged_attention");
    let seed = eval(None);
    assert_eq!(seed["status"], "passed", "{seed}");
    let baseline = eval(Some(&task.join("baseline.py")));
    assert_eq!(baseline["status"], "passed", "{baseline}");
    // The seed without its mask: every sequence attends to all 8192 keys its pages hold.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(task.join("seed.py")).unwrap();
    let unmasked = text.replace(
        "    s = mx.where(inside[:, None, None, :], s, -mx.inf)\n",
        "",
    );
    assert_ne!(text, unmasked);
    let file = dir.path().join("full_length.py");
    std::fs::write(&file, unmasked).unwrap();
    let wrong = eval(Some(&file));
    assert_eq!(wrong["status"], "incorrect", "{wrong}");
}

#[test]
#[cfg_attr(
    not(all(has_mlx, has_gxx)),
    ignore = "needs python3 with MLX and g++ (`.ci/run` installs both)"
)]
fn the_hand_written_flash_decode_kernel_computes_the_reference_when_emulated_on_the_cpu() {
    // bench/mlx_paged_decode.py's CUDA kernel, run by the tests' CUDA emulation
    // (fixtures/cuda_emulate) at small sizes: a copy of the task whose block tables and contexts
    // fit them (64 pages, contexts of 1 to 128 tokens). Two wrong copies must fail: one reading
    // every page of the table whatever the context, one ignoring the table.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let task = root.join("tasks/mlx/paged_attention");
    let dir = tempfile::tempdir().unwrap();
    for f in ["reference.py", "seed.py", "baseline.py"] {
        std::fs::copy(task.join(f), dir.path().join(f)).unwrap();
    }
    let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
    let small = toml
        .replace("randint = [0, 4095]", "randint = [0, 63]")
        .replace("randint = [1, 8192]", "randint = [1, 128]");
    assert_eq!(small.matches("randint = [").count(), 2);
    assert_ne!(small, toml);
    std::fs::write(dir.path().join("task.toml"), small).unwrap();
    let kernel = root.join("bench/mlx_paged_decode.py");
    let right = std::fs::read_to_string(&kernel).unwrap();
    let mut args = vec![
        dir.path().as_os_str().to_owned(),
        r#"{"batch": 3, "kv_heads": 2, "group": 4, "heads": 8, "dim": 64, "page": 16, "pages_per_seq": 8, "num_pages": 64}"#.into(),
        dir.path().join("seed.py").into_os_string(),
        kernel.into_os_string(),
    ];
    for (name, from, to) in [
        ("full", "t < n; t += WARPS", "t < PPS * P; t += WARPS"),
        (
            "page",
            "block_table[(size_t)b * PPS + t / P]",
            "t / P + 0 * block_table[0]",
        ),
    ] {
        // The CUDA source comes first in the module; the Metal one has the same line.
        assert_eq!(right.matches(from).count(), 2, "{from}");
        let wrong = dir.path().join(format!("wrong-{name}.py"));
        std::fs::write(&wrong, right.replacen(from, to, 1)).unwrap();
        args.push(wrong.into_os_string());
    }
    let (code, stdout, stderr) = run(std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda_emulate/emulate.py"))
        .args(&args));
    assert_eq!(code, 1, "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}{stderr}");
    assert!(lines[0].starts_with("ok  seed.py: o: 0 of"), "{stdout}");
    assert!(
        lines[1].starts_with("ok  mlx_paged_decode.py: o: 0 of"),
        "{stdout}"
    );
    assert!(lines[2].starts_with("BAD wrong-full.py"), "{stdout}");
    assert!(lines[3].starts_with("BAD wrong-page.py"), "{stdout}");
}
