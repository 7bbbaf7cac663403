//! `ksearch report` as a user runs it.

use crate::support::{counts, json, ksearch, real_run, run_ok, s, sample_run};

#[test]
fn report_writes_one_self_contained_page() {
    let (_tmp, dir) = sample_run(ksearch_core::task::BackendKind::C);
    let out = run_ok(&["report", s(&dir)]);
    let path = dir.join("report.html");
    assert!(out.contains(s(&path)), "{out}");
    let html = std::fs::read_to_string(&path).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("Content-Security-Policy\" content=\"default-src 'none'"));
    // Nothing is loaded from anywhere: no external script, style, image, font or link.
    for needle in [
        " src=",
        "href=\"http",
        "href=\"//",
        "@import",
        "url(",
        "<link",
        "<iframe",
    ] {
        assert!(!html.contains(needle), "the page contains `{needle}`");
    }
    let (attempts, nodes) = counts(&dir);
    assert_eq!(html.matches("<circle class=\"attempt ").count(), attempts);
    assert_eq!(html.matches("<g class=\"node ").count(), nodes);

    // Header facts.
    for fact in [
        "cpu/softmax",
        "Sample CPU @ 3.0GHz",
        "openai:gpt-5-mini",
        "device-seconds spent evaluating",
        "10000 tokens",
        "$0.0259",
    ] {
        assert!(html.contains(fact), "the header lacks `{fact}`");
    }

    // To standard output, as JSON, quietly.
    let to_stdout = run_ok(&["report", s(&dir), "-o", "-"]);
    assert_eq!(to_stdout, html);
    let other = dir.join("other.html");
    let j = json(&["report", s(&dir), "-o", s(&other), "--json"]);
    assert_eq!(j["path"], s(&other));
    assert_eq!(j["bytes"].as_u64().unwrap() as usize, html.len());
    assert_eq!(j["attempts"].as_u64().unwrap() as usize, attempts);
    assert_eq!(j["nodes"].as_u64().unwrap() as usize, nodes);
    assert_eq!(j["best"]["node"], 4);
    assert_eq!(run_ok(&["report", s(&dir), "-o", s(&other), "--quiet"]), "");

    // The same run gives the same page.
    assert_eq!(std::fs::read_to_string(&other).unwrap(), html);
}

#[test]
fn report_of_a_real_run_is_complete() {
    let run = real_run();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("r.html");
    run_ok(&["report", s(run), "-o", s(&path), "--quiet"]);
    let html = std::fs::read_to_string(&path).unwrap();
    let (attempts, nodes) = counts(run);
    assert_eq!(attempts, 7, "the seed and 6 rounds");
    assert_eq!(html.matches("<circle class=\"attempt ").count(), attempts);
    assert_eq!(html.matches("<g class=\"node ").count(), nodes);
    for id in [
        "id=\"chart\"",
        "id=\"tree\"",
        "id=\"details\"",
        "id=\"best-source\"",
        "id=\"workload-table\"",
        "id=\"calibration-table\"",
        "id=\"calibration-plot\"",
        "id=\"run-data\"",
    ] {
        assert!(html.contains(id), "the page lacks {id}");
    }
    // The best kernel is shown with its diff against its parent (unless nothing measured
    // faster than the seed, which has no parent).
    let best = crate::support::json(&["show", s(run), "best", "--json"]);
    assert_eq!(
        html.contains("id=\"diff-parent\""),
        best["node"]["id"] != 0,
        "best: {}",
        best["node"]["id"]
    );
    assert!(html.contains("builtin"));
}

#[test]
fn report_errors_are_the_users() {
    let tmp = tempfile::tempdir().unwrap();
    let out = ksearch(&["report", s(tmp.path())]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("holds no run"), "{err}");
}
