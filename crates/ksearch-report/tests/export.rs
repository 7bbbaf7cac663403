//! `export::write` writes an export's files inside its directory and nowhere else.

use ksearch_core::task::BackendKind;
use ksearch_report::export::{export_with, write};
use ksearch_report::sample::run_data;

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
