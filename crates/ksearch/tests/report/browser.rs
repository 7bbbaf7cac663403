//! The report in a real browser: headless Chromium driven over the DevTools protocol.

use std::path::Path;

use ksearch_core::task::BackendKind;
use serde_json::Value;

use crate::cdp::{Browser, find_chromium};
use crate::support::{counts, real_run, run_ok, s, sample_run};

/// The browser build.rs found (`has_chromium`).
fn chromium() -> std::path::PathBuf {
    find_chromium().expect(
        "Chromium was found when the tests were built but is gone now (Debian: `apt-get install \
         -y chromium`; or set KSEARCH_CHROMIUM to a Chrome/Chromium binary)",
    )
}

fn file_url(p: &Path) -> String {
    let abs = std::fs::canonicalize(p).expect("the report exists");
    format!("file://{}", abs.display())
}

fn count(b: &mut Browser, selector: &str) -> u64 {
    b.eval(&format!(
        "document.querySelectorAll({}).length",
        serde_json::to_string(selector).unwrap()
    ))
    .as_u64()
    .expect("a count")
}

/// Open a report, check it against its run, click a node, and return nothing on success.
fn check_report(b: &mut Browser, run_dir: &Path, html: &Path, click_node: u64, title: &str) {
    let url = file_url(html);
    let from = b.navigate(&url);
    let (attempts, nodes) = counts(run_dir);

    // One point per attempt, one tree node per node, a details panel per node.
    assert_eq!(count(b, "svg#chart circle.attempt") as usize, attempts);
    assert_eq!(count(b, "svg#tree g.node") as usize, nodes);
    assert_eq!(count(b, "#details .node-detail") as usize, nodes);
    assert_eq!(count(b, "svg#chart path#best-line"), 1);
    assert!(count(b, "#workload-table tr.workload") >= 1);
    let data: Value = serde_json::from_str(
        b.eval("document.getElementById('run-data').textContent")
            .as_str()
            .expect("the embedded data"),
    )
    .expect("the embedded data is JSON");
    assert_eq!(data["attempts"].as_array().unwrap().len(), attempts);

    // Nothing selected yet; clicking a node shows its details and only them.
    assert_eq!(count(b, "#details .node-detail:not([hidden])"), 0);
    b.click(&format!(
        "svg#tree g.node[data-node=\"{click_node}\"] circle"
    ));
    let shown = b.eval(
        "Array.from(document.querySelectorAll('#details .node-detail'))\
         .filter(d => !d.hidden && d.offsetParent !== null).map(d => d.dataset.node)",
    );
    assert_eq!(shown, serde_json::json!([click_node.to_string()]));
    let text = b
        .eval(&format!(
            "document.querySelector('#details .node-detail[data-node=\"{click_node}\"]').innerText"
        ))
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains(title), "details of node {click_node}: {text}");
    assert!(
        text.contains("Attempts") || text.contains("ATTEMPTS"),
        "{text}"
    );
    assert_eq!(
        b.eval("document.querySelector('svg#tree g.node.selected').dataset.node"),
        Value::String(click_node.to_string())
    );
    assert_eq!(
        b.eval("document.getElementById('details-empty').hidden"),
        Value::Bool(true)
    );

    // The page made exactly one request, for itself, and reported no problem.
    assert_eq!(b.requests(from), vec![url.clone()], "requests of {url}");
    let problems = b.problems(from);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs Chromium (Debian: `apt-get install chromium`; or set KSEARCH_CHROMIUM to a Chrome/Chromium binary)"
)]
fn the_report_of_a_real_run_works_in_headless_chromium_without_the_network() {
    let exe = chromium();
    let run = real_run();
    let tmp = tempfile::tempdir().unwrap();
    let html = tmp.path().join("report.html");
    run_ok(&["report", s(run), "-o", s(&html), "--quiet"]);
    let best = crate::support::json(&["show", s(run), "best", "--json"]);
    let best_id = best["node"]["id"].as_u64().unwrap();
    let title = best["node"]["action"]["title"].as_str().unwrap().to_owned();

    let (_sample_tmp, sample) = sample_run(BackendKind::C);
    let sample_html = tmp.path().join("sample.html");
    run_ok(&["report", s(&sample), "-o", s(&sample_html), "--quiet"]);

    let mut b = Browser::launch(&exe);
    check_report(&mut b, run, &html, best_id, &title);
    // The sample has failed attempts (drawn on the bottom axis), a failed node and attempts on
    // a node since removed from the tree.
    check_report(&mut b, &sample, &sample_html, 3, "unroll the exp loop by 4");
    assert_eq!(b.eval("document.querySelectorAll('svg#chart circle.attempt[data-status=\"compile_error\"]').length"), 1);
    assert_eq!(
        b.eval("document.querySelector('svg#tree g.node[data-node=\"3\"]').dataset.status"),
        Value::String("failed".into())
    );
    // Clicking a point of the chart selects its node.
    b.click("svg#chart circle.attempt[data-round=\"6\"]");
    assert_eq!(
        b.eval("document.getElementById('details').dataset.selected"),
        Value::String("4".into())
    );
}
