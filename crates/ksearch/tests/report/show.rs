//! `ksearch show RUN_DIR NODE`.

use ksearch_core::task::BackendKind;

use crate::support::{json, ksearch, real_run, run_ok, s, sample_run};

#[test]
fn show_prints_what_the_library_renders() {
    let (_tmp, dir) = sample_run(BackendKind::C);
    let data = ksearch_report::load(&dir).unwrap();
    for node in ["0", "1", "3", "4", "6"] {
        let id = node.parse().unwrap();
        assert_eq!(
            run_ok(&["show", s(&dir), node]),
            ksearch_report::show::render(&data, id).unwrap(),
            "node {node}"
        );
    }
    // The snapshots of the library's rendering are those of the sample, in memory: the run
    // read back from its store renders the same.
    let memory = ksearch_report::sample::run_data(BackendKind::C);
    assert_eq!(
        ksearch_report::show::render(&data, 3).unwrap(),
        ksearch_report::show::render(&memory, 3).unwrap()
    );
    assert_eq!(
        run_ok(&["show", s(&dir), "best"]),
        run_ok(&["show", s(&dir), "4"])
    );
    assert_eq!(run_ok(&["show", s(&dir)]), run_ok(&["show", s(&dir), "4"]));
    assert_eq!(
        run_ok(&["show", s(&dir), "seed"]),
        run_ok(&["show", s(&dir), "0"])
    );
}

#[test]
fn show_json_has_the_node_its_attempts_and_its_source() {
    let (_tmp, dir) = sample_run(BackendKind::C);
    let j = json(&["show", s(&dir), "3", "--json"]);
    assert_eq!(j["node"]["id"], 3);
    assert_eq!(j["status"], "failed");
    assert_eq!(j["path"], serde_json::json!([0, 3]));
    let attempts = j["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(
        attempts[0]["evaluation"]["result"]["status"],
        "compile_error"
    );
    assert_eq!(attempts[1]["evaluation"]["result"]["status"], "incorrect");
    assert!(j["source"].is_null());

    let j = json(&["show", s(&dir), "4", "--json"]);
    assert_eq!(j["best"], true);
    assert!(
        j["source"]["text"]
            .as_str()
            .unwrap()
            .contains("const float inv")
    );
    let w = &j["attempts"][0]["evaluation"]["result"]["workloads"];
    assert_eq!(w.as_array().unwrap().len(), 2);
    assert!(w[0]["timings"][0]["stats"]["median_ms"].as_f64().unwrap() > 0.0);
}

#[test]
fn show_a_node_of_a_real_run() {
    let run = real_run();
    let text = run_ok(&["show", s(run), "best"]);
    assert!(text.contains("★ best"), "{text}");
    assert!(text.contains("\nattempts ("), "{text}");
    assert!(text.contains("\nsource ("), "{text}");
    assert!(text.contains("void softmax("), "{text}");
    let seed = run_ok(&["show", s(run), "seed"]);
    assert!(seed.contains("round 0 · seed · cycle 0 · passed"), "{seed}");
}

#[test]
fn show_errors_are_the_users() {
    let (_tmp, dir) = sample_run(BackendKind::C);
    for (node, message) in [
        ("99", "has no node 99"),
        ("five", "`five` is not a node"),
        ("5", "has no node 5"),
    ] {
        let out = ksearch(&["show", s(&dir), node]);
        assert_eq!(out.status.code(), Some(3), "node {node}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(message), "{err}");
    }
}
