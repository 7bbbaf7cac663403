//! The renderings of the hand-built sample run: snapshots of `ksearch show` and of the export's
//! files, and the structure of the HTML report.

use ksearch_core::task::BackendKind;
use ksearch_report::sample::{run_data, write_run};
use ksearch_report::{export, html, show};

#[test]
fn show_of_each_kind_of_node() {
    let data = run_data(BackendKind::C);
    // The seed, a node measured better with children, a node that failed and was judged too
    // hard, and the best.
    for (id, name) in [
        (0, "show_seed"),
        (1, "show_better"),
        (3, "show_failed"),
        (4, "show_best"),
    ] {
        insta::assert_snapshot!(name, show::render(&data, id).unwrap());
    }
    // An open node that nothing was tried on yet.
    insta::assert_snapshot!("show_open", show::render(&data, 7).unwrap());
}

#[test]
fn show_json_of_the_best_node() {
    let data = run_data(BackendKind::C);
    let j = serde_json::to_string_pretty(&show::json(&data, 4).unwrap()).unwrap();
    insta::assert_snapshot!("show_json_best", j);
}

#[test]
fn show_of_a_missing_node_lists_the_nodes() {
    let data = run_data(BackendKind::C);
    let err = show::render(&data, 5).unwrap_err();
    assert!(err.is_input());
    assert_eq!(
        err.to_string(),
        "the run has no node 5 (nodes: 0, 1, 2, 3, 4, 6, 7)"
    );
    assert_eq!(data.resolve("best").unwrap(), 4);
    assert_eq!(data.resolve("seed").unwrap(), 0);
    assert!(data.resolve("x").unwrap_err().is_input());
}

#[test]
fn export_of_a_c_kernel() {
    let data = run_data(BackendKind::C);
    let x = export::export_with(&data, 4, Some("format = 1\n")).unwrap();
    let names: Vec<&str> = x.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(names, ["softmax.h", "softmax.c", "provenance.json"]);
    for f in &x.files {
        insta::assert_snapshot!(format!("export_c_{}", f.path), f.text);
    }
}

#[test]
fn export_of_an_mlx_kernel() {
    let data = run_data(BackendKind::Mlx);
    let x = export::export_with(&data, 4, None).unwrap();
    let names: Vec<&str> = x.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        names,
        [
            "softmax/__init__.py",
            "softmax/_candidate.py",
            "provenance.json"
        ]
    );
    assert_eq!(x.files[1].text, data.solution_source(4).unwrap());
    insta::assert_snapshot!("export_mlx_init", x.files[0].text);
    insta::assert_snapshot!("export_mlx_provenance", x.files[2].text);
}

#[test]
fn export_of_a_torch_kernel() {
    let data = run_data(BackendKind::Torch);
    let x = export::export_with(&data, 4, None).unwrap();
    let names: Vec<&str> = x.files.iter().map(|f| f.path.as_str()).collect();
    // No `_reference.py`: the sample's reference builds no model.
    assert_eq!(
        names,
        [
            "softmax/__init__.py",
            "softmax/_candidate.py",
            "softmax/_calling.py",
            "provenance.json"
        ]
    );
    assert_eq!(x.files[1].text, data.solution_source(4).unwrap());
    assert!(x.files[2].text.contains("class Entry:"));
    insta::assert_snapshot!("export_torch_init", x.files[0].text);
}

#[test]
fn export_of_another_node_or_the_seed_says_so() {
    let data = run_data(BackendKind::C);
    let c = |id| {
        export::export_with(&data, id, None).unwrap().files[1]
            .text
            .clone()
    };
    assert!(c(1).contains("Not the run's best kernel: exported by request."));
    assert!(c(0).contains("This is the task's seed kernel."));
    assert!(!c(4).contains("Not the run's best"));
    let err = export::export_with(&data, 7, None).unwrap_err();
    assert_eq!(err.to_string(), "node 7 is open: it has no solution yet");
}

#[test]
fn the_task_toml_is_hashed_only_when_it_still_describes_the_task() {
    let mut data = run_data(BackendKind::C);
    // The sample's task is not the built-in cpu/softmax (other workloads): no hash.
    assert_eq!(export::find_task_toml(&data.task), None);
    let builtin = ksearch_tasks::load_builtin("cpu/softmax").unwrap();
    assert_eq!(
        export::find_task_toml(&builtin).as_deref(),
        ksearch_tasks::builtin_task_toml("cpu/softmax")
    );
    data.task = builtin;
    let p = export::provenance(&data, 4, export::find_task_toml(&data.task).as_deref());
    assert_eq!(
        p.task.task_toml_sha256.unwrap(),
        ksearch_store::content_hash(ksearch_tasks::builtin_task_toml("cpu/softmax").unwrap())
    );
}

fn count(html: &str, needle: &str) -> usize {
    html.matches(needle).count()
}

#[test]
fn the_report_has_a_point_per_attempt_and_a_node_per_tree_node() {
    let data = run_data(BackendKind::C);
    let page = html::render(&data);
    assert_eq!(
        count(&page, "<circle class=\"attempt "),
        data.attempts.len()
    );
    assert_eq!(count(&page, "<g class=\"node "), data.tree.len());
    assert_eq!(count(&page, "<div class=\"node-detail\""), data.tree.len());
    // Failed attempts sit on the bottom axis: the same y for every one of them.
    let failed: Vec<&str> = page
        .lines()
        .filter(|l| l.starts_with("<circle class=\"attempt ") && !l.contains("status-passed"))
        .map(|l| l.split("cy=\"").nth(1).unwrap().split('"').next().unwrap())
        .collect();
    assert_eq!(failed.len(), 3);
    assert!(failed.iter().all(|y| *y == failed[0]), "{failed:?}");
    for status in ["compile_error", "incorrect", "timeout"] {
        assert_eq!(
            count(&page, &format!("data-status=\"{status}\" cx=")),
            1,
            "{status}"
        );
    }
    for status in ["seed", "better", "same", "failed", "open"] {
        assert!(
            page.contains(&format!("class=\"node status-{status}")),
            "{status}"
        );
    }
    // The calibration: one row and one point per measured node.
    let measured = data.summary.calibration.points.len();
    assert_eq!(measured, 3);
    assert_eq!(count(&page, "<tr class=\"calibration-point\""), measured);
    assert_eq!(
        count(&page, "<circle class=\"calibration-point\""),
        measured
    );
    // The best kernel with its diffs; the workload table from the best's evaluation.
    assert!(page.contains("id=\"best-source\""));
    assert!(page.contains("id=\"diff-parent\" data-added=\"3\" data-removed=\"1\""));
    assert!(page.contains("id=\"diff-seed\""));
    assert_eq!(count(&page, "<tr class=\"workload\""), 2);
    assert!(page.contains("removed from the tree"));
    // The embedded data is JSON.
    let blob = page
        .split("<script type=\"application/json\" id=\"run-data\">")
        .nth(1)
        .unwrap()
        .split("</script>")
        .next()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(blob).unwrap();
    assert_eq!(v["attempts"].as_array().unwrap().len(), data.attempts.len());
    assert_eq!(v["nodes"].as_array().unwrap().len(), data.tree.len());
    // The same run gives the same page.
    assert_eq!(html::render(&data), page);
}

#[test]
fn the_report_loads_nothing_and_escapes_what_it_shows() {
    let mut data = run_data(BackendKind::C);
    let evil = "</script><script>alert(1)</script><img src=x onerror=alert(2)>";
    data.task.spec.description = evil.into();
    data.config.machine = evil.into();
    data.attempts[4].note = evil.into();
    let page = html::render(&data);
    assert!(!page.contains("<img"), "unescaped markup");
    assert!(!page.contains("alert(1)</script>"));
    assert_eq!(
        count(&page, "<script"),
        2,
        "only the data and the page's script"
    );
    for needle in ["href=\"http", "@import", "url(", "<link"] {
        assert!(!page.contains(needle), "{needle}");
    }
    assert!(page.contains("default-src 'none'"));
    let clean = html::render(&run_data(BackendKind::C));
    assert!(!clean.contains(" src="));
}

#[test]
fn a_run_written_and_read_back_is_the_sample() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let data = run_data(BackendKind::C);
    write_run(&data, &dir).unwrap();
    let back = ksearch_report::load(&dir).unwrap();
    // Numbers go through JSON, which may move the last bit of a float: compare what is shown.
    let ids = |d: &ksearch_report::RunData| d.tree.nodes().map(|n| n.id).collect::<Vec<_>>();
    assert_eq!(ids(&back), ids(&data));
    assert_eq!(back.attempts.len(), data.attempts.len());
    assert_eq!(back.sources, data.sources);
    assert_eq!(back.summary.best, data.summary.best);
    for id in [0, 1, 3, 4, 6] {
        assert_eq!(
            show::render(&back, id).unwrap(),
            show::render(&data, id).unwrap()
        );
    }
}

#[test]
fn the_report_shows_times_in_units_that_suit_them() {
    let page = html::render(&run_data(BackendKind::C));
    // The workload table: the median with its unit, the spread in the median's unit.
    assert!(
        page.contains("<td class=\"n\">80.00 µs <span class=\"spread\">79.04–85.44</span></td>"),
        "table"
    );
    assert!(
        page.contains("<td class=\"n\">30.00 ms <span class=\"spread\">29.64–32.04</span></td>")
    );
    // The summary: the best kernel's latency beside the seed's.
    assert!(page.contains("<dt>best latency</dt><dd>small 80.00 µs (seed 250.0 µs) · wide 3.600 ms (seed 11.00 ms)</dd>"));
    // A node's details in the tree.
    assert!(page.contains("<dt>median latency</dt><dd>small 80.00 µs · wide 3.600 ms</dd>"));
    // No sub-millisecond time is written as a fraction of a millisecond.
    assert!(!page.contains("0.0800"));
}

/// The page's `<header id="summary">`, one element a line.
fn header_of(page: &str) -> String {
    let start = page.find("<header id=\"summary\">").unwrap();
    let end = page.find("</header>").unwrap() + "</header>".len();
    page[start..end].replace("><", ">\n<")
}

#[test]
fn without_a_production_baseline_the_headline_leads_with_the_seed() {
    let data = run_data(BackendKind::C);
    assert!(data.task.baseline.is_none());
    let header = header_of(&html::render(&data));
    let seed = header.find("id=\"best-vs-seed\"").unwrap();
    let reference = header.find("id=\"best-speedup\"").unwrap();
    assert!(seed < reference, "the speedup over the seed comes first");
    assert!(header.contains("over the reference (reference.c), a deliberately simple"));
    assert!(!header.contains("over the baseline ("));
    insta::assert_snapshot!("report_header_reference", header);
}

#[test]
fn with_a_production_baseline_the_headline_leads_with_it() {
    let mut data = run_data(BackendKind::C);
    let name = "OpenBLAS cblas_sgemm (1 thread)";
    data.task.baseline = Some(
        serde_json::from_value(serde_json::json!({
            "name": name,
            "source": { "file": "baseline.c", "text": "/* calls cblas_sgemm */\n" },
            "libs": ["openblas"],
        }))
        .unwrap(),
    );
    data.summary.baseline = name.into();
    let header = header_of(&html::render(&data));
    let seed = header.find("id=\"best-vs-seed\"").unwrap();
    let baseline = header.find("id=\"best-speedup\"").unwrap();
    assert!(baseline < seed, "the speedup over the baseline comes first");
    assert!(header.contains(&format!("over the baseline ({name})")));
    assert!(!header.contains("reference.c"));
    insta::assert_snapshot!("report_header_production", header);
}

#[test]
fn what_the_baseline_ran_and_the_seeds_caveats_are_in_the_header() {
    let mut data = run_data(BackendKind::C);
    data.task.baseline = Some(
        serde_json::from_value(serde_json::json!({
            "name": "BLAS",
            "source": { "file": "baseline.c", "text": "/* calls cblas_sgemm */\n" },
        }))
        .unwrap(),
    );
    data.summary.baseline = "BLAS [OpenBLAS 0.3.21; core Prescott]".into();
    let seed = data.attempts.iter_mut().find(|a| a.round == 0).unwrap();
    seed.evaluation.as_mut().unwrap().caveats =
        vec!["weak baseline: `BLAS` reached at most 4.4% <of> the peak".into()];
    let header = header_of(&html::render(&data));
    assert!(
        header.contains("BLAS [OpenBLAS 0.3.21; core Prescott]"),
        "{header}"
    );
    assert!(
        header.contains("<li>weak baseline: `BLAS` reached at most 4.4% &lt;of&gt; the peak</li>"),
        "{header}"
    );
}
