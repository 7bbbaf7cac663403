//! `export::write` writes an export's files inside its directory and nowhere else, whatever
//! names the run's task gives them.

use ksearch_core::task::BackendKind;
use ksearch_report::ReportError;
use ksearch_report::export::{ExportFile, export_with, write};
use ksearch_report::sample::run_data;

#[test]
fn files_outside_the_export_s_layout_are_refused_and_nothing_is_written() {
    let data = run_data(BackendKind::C);
    let good = export_with(&data, data.summary.best.node, None).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let abs = tmp.path().join("abs/pwned.h");
    for path in [
        "../pwned.h",
        "../../../escape_probe/pwned.h",
        abs.to_str().unwrap(),
        "softmax/../../pwned.h",
        "./softmax.h",
        "a/b/pwned.h",
        "",
    ] {
        let mut export = good.clone();
        export.files.insert(
            1,
            ExportFile {
                path: path.to_owned(),
                text: "int pwned;".into(),
            },
        );
        let dir = tmp.path().join("deep/out");
        let e = write(&export, &dir).unwrap_err();
        assert!(
            matches!(&e, ReportError::OutsideExport { path: p } if p == path),
            "{path}: {e}"
        );
        assert!(e.is_input());
        assert!(!dir.exists(), "{path}: nothing is written");
    }
    assert!(!tmp.path().join("abs").exists() && !tmp.path().join("pwned.h").exists());

    // The export's own layout is written.
    let dir = tmp.path().join("out");
    let written = write(&good, &dir).unwrap();
    assert_eq!(written.len(), good.files.len());
    assert!(dir.join("softmax.h").is_file() && dir.join("provenance.json").is_file());
}

#[test]
fn a_package_directory_that_is_a_link_is_refused() {
    let data = run_data(BackendKind::Mlx);
    let export = export_with(&data, data.summary.best.node, None).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let dir = tmp.path().join("out");
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join("softmax")).unwrap();
    let e = write(&export, &dir).unwrap_err();
    assert!(e.to_string().contains("is a symbolic link"), "{e}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}
