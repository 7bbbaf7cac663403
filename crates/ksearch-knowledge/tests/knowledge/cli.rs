//! The `ksearch knowledge` subcommands, tested through the crate's functions (the binary's own
//! tests run the command line).

use ksearch_knowledge::cli::{self, CliError};
use ksearch_knowledge::{Detection, Platform};

use crate::{fixture_path, knowledge};

#[test]
fn list_text_and_json() {
    let k = knowledge();
    let text = cli::list(&k, false);
    assert!(text.contains("hardware (9):"));
    assert!(text.contains("syncthreads"));
    let json: serde_json::Value = serde_json::from_str(&cli::list(&k, true)).expect("json");
    assert_eq!(json["hardware"].as_array().map(Vec::len), Some(9));
    assert!(
        json["translations"]
            .as_array()
            .is_some_and(|a| a.len() >= 30)
    );
    assert!(json["patterns"].as_array().is_some_and(|a| a.len() >= 15));
    assert!(json["rules"][0]["kind"].is_string());
}

#[test]
fn show_finds_entries_by_id_or_alias() {
    let k = knowledge();
    let metal = cli::show(&k, "syncthreads", Some("metal")).expect("found");
    assert!(metal.contains("threadgroup_barrier(mem_flags::mem_threadgroup)"));
    assert!(metal.contains("CUDA:") && !metal.contains("MLX:"));
    let by_alias = cli::show(&k, "__syncthreads()", Some("mlx")).expect("found");
    assert!(by_alias.starts_with("syncthreads") && by_alias.contains("MLX:"));
    let backwards = cli::show(&k, "simd_shuffle_xor", Some("cuda")).expect("found");
    assert!(backwards.contains("__shfl_xor_sync"));
    assert!(
        cli::show(&k, "online-softmax", Some("metal"))
            .expect("pattern")
            .contains("Sketch (metal)")
    );
    assert!(
        cli::show(&k, "mlx-grid-is-threads", None)
            .expect("rule")
            .contains("mlx-grid rule")
    );
    assert!(
        cli::show(&k, "m3-max", None)
            .expect("hardware")
            .contains("Provenance")
    );
    let err = cli::show(&k, "syncthread", None).expect_err("unknown");
    assert!(
        err.to_string().contains("did you mean: syncthreads"),
        "{err}"
    );
    let err = cli::show(&k, "syncthreads", Some("fortran")).expect_err("bad --to");
    assert!(matches!(err, CliError::Usage(_)));
}

#[test]
fn hardware_lists_and_describes() {
    let k = knowledge();
    let detected = Detection {
        name: "NVIDIA H200".into(),
        via: "nvidia-smi --query-gpu=name --format=csv,noheader".into(),
        hardware: Some("h200".into()),
    };
    let list = cli::hardware(&k, None, false, Some(&detected)).expect("list");
    assert!(list.contains("m2-ultra") && list.contains("detected: NVIDIA H200"));
    let list = cli::hardware(&k, None, false, None).expect("list");
    assert!(list.contains("detected: no GPU found"));
    let json: serde_json::Value =
        serde_json::from_str(&cli::hardware(&k, None, true, Some(&detected)).expect("json"))
            .expect("json");
    assert_eq!(json["detected"]["hardware"], "h200");
    let one: serde_json::Value =
        serde_json::from_str(&cli::hardware(&k, Some("NVIDIA H200"), true, None).expect("json"))
            .expect("json");
    assert_eq!(one["id"], "h200");
    assert_eq!(one["memory"]["bandwidth_gbs"]["value"], 4800.0);
    assert!(one["fp32_ridge_point_flop_per_byte"].as_f64().is_some());
    let text = cli::hardware(&k, Some("m1-max"), false, None).expect("text");
    assert!(text.contains("10.4 TFLOPS") && text.contains("source: Apple newsroom"));
    let err = cli::hardware(&k, Some("tpu-v5"), false, None).expect_err("unknown");
    assert!(matches!(err, CliError::UnknownHardware { .. }), "{err}");
}

#[test]
fn check_outcomes() {
    let k = knowledge();
    let metal = fixture_path("metal_attention.metal");
    let clean = cli::check_file(&k, &metal, "metal", None, Some("m3-max"), false).expect("ran");
    assert!(!clean.violations, "{}", clean.stdout);
    assert!(clean.stdout.contains("clean"));

    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.metal");
    let src = std::fs::read_to_string(&metal).expect("fixture").replacen(
        "threadgroup_barrier(mem_flags::mem_threadgroup);",
        "__syncthreads();",
        1,
    );
    std::fs::write(&bad, src).expect("write");
    let found = cli::check_file(&k, &bad, "metal", Some("metal"), None, false).expect("ran");
    assert!(found.violations);
    assert!(found.stdout.contains("[cuda-token-in-metal]") && found.stdout.contains("1 violation"));
    let json = cli::check_file(&k, &bad, "metal", None, None, true).expect("ran");
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("json");
    assert_eq!(v["clean"], false);
    assert_eq!(v["platform"], "metal");
    assert_eq!(v["violations"][0]["rule"], "cuda-token-in-metal");
    assert!(v["violations"][0]["line"].as_u64().is_some());

    // MLX: the target comes from --target or the device.
    let mlx = fixture_path("mlx_softmax.py");
    let out = cli::check_file(&k, &mlx, "mlx", None, Some("M3 Max"), false).expect("ran");
    assert!(!out.violations, "{}", out.stdout);
    let out = cli::check_file(&k, &mlx, "mlx", Some("metal"), None, true).expect("ran");
    assert!(!out.violations);

    // Usage and input errors: an error, which the binary gives exit code 3.
    let errors = [
        cli::check_file(
            &k,
            &dir.path().join("missing.metal"),
            "metal",
            None,
            None,
            false,
        ),
        cli::check_file(&k, &mlx, "mlx", None, None, false),
        cli::check_file(&k, &mlx, "python", Some("metal"), None, false),
        cli::check_file(&k, &mlx, "mlx", Some("tpu"), None, false),
        cli::check_file(&k, &metal, "metal", None, Some("h200"), false),
        cli::check_file(&k, &metal, "metal", None, Some("nonexistent-gpu"), false),
        cli::check_file(&k, &metal, "cuda", Some("metal"), None, false),
    ];
    for e in errors {
        e.expect_err("an input error");
    }
    assert!(matches!(
        cli::check_file(
            &k,
            &dir.path().join("missing.metal"),
            "metal",
            None,
            None,
            false
        ),
        Err(CliError::Unreadable { .. })
    ));
    // The pure variant.
    let out = cli::check_source(&k, "int x;", "x.cu", Platform::CUDA, None, false);
    assert!(!out.violations);
}
