//! A real OpenAI-compatible server no one here wrote: llama.cpp's, serving a small model from
//! PyPI, driven by `bench/llamacpp_local.sh`. Slow (the first run builds llama.cpp from source,
//! minutes on two cores; each answer takes most of a minute on a CPU), so it runs only when asked.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

#[test]
#[ignore = "slow: builds llama.cpp from source and runs a search against its server (minutes); run it with `cargo test -p ksearch --test search llama_cpp -- --ignored`"]
fn a_search_against_llama_cpp_ends_cleanly_with_every_answer_accounted_for() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = tempfile::tempdir().unwrap();
    let status = Command::new("bash")
        .arg(root.join("bench/llamacpp_local.sh"))
        .arg(env!("CARGO_BIN_EXE_ksearch"))
        .arg(out.path())
        .arg("10")
        .env("TIME", "15m")
        .status()
        .expect("bash runs");
    assert!(status.success(), "bench/llamacpp_local.sh: {status}");

    let read = |name: &str| std::fs::read_to_string(out.path().join(name)).unwrap();
    let run: Value = serde_json::from_str(read("run.json").trim()).unwrap();
    let stop = run["stop_reason"].as_str().unwrap();
    assert!(
        ["iterations", "time", "unusable_model"].contains(&stop),
        "a clean stop: {run}"
    );
    // Every call the server answered is in the summary: used, or counted as empty or cut off.
    let calls: Vec<Value> = serde_json::from_str(&read("calls.json")).unwrap();
    assert!(!calls.is_empty(), "the model was asked");
    let roles = run["llm"].as_object().unwrap().values();
    let (mut made, mut cut, mut empty) = (0, 0, 0);
    for r in roles {
        made += r["calls"].as_u64().unwrap();
        cut += r["truncated_answers"].as_u64().unwrap();
        empty += r["empty_answers"].as_u64().unwrap();
    }
    assert_eq!(made as usize, calls.len(), "{run}");
    let length = calls
        .iter()
        .filter(|c| c["finish_reason"] == "length")
        .count();
    assert_eq!(cut as usize, length, "every cut-off answer counted: {run}");
    let blank = calls.iter().filter(|c| c["empty"] == true).count();
    assert_eq!(empty as usize, blank, "every empty answer counted: {run}");
    assert!(
        run["tokens"].as_u64().unwrap() > 0,
        "tokens recorded: {run}"
    );
    assert!(run["wall_s"].as_f64().unwrap() > 0.0);
    let report = read("report.html");
    assert!(report.contains("gemma3-270m"), "the report names the model");
}
