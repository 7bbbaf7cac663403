//! What a newcomer trips over (issue 47): each fault said as what it is, with what to do.

use crate::{ksearch, run};

/// A machine without a C compiler: every command that would compile says that `cc` is missing
/// and how to install it, rather than blaming the task ("the reference does not build … the
/// sandbox could not be set up") or each point of a space.
#[test]
fn a_missing_c_compiler_is_said_with_how_to_install_one() {
    let empty = tempfile::tempdir().unwrap();
    let path = empty.path().to_str().unwrap();
    let rd = empty.path().join("run");
    for args in [
        vec!["eval", "cpu/softmax", "--workload", "small"],
        vec![
            "run",
            "cpu/softmax",
            "--workload",
            "small",
            "--run-dir",
            rd.to_str().unwrap(),
        ],
        vec!["space", "check", "cpu/rmsnorm", "--limit", "2"],
    ] {
        let (code, _, stderr) = run(ksearch(&args).env("PATH", path).env_remove("CC"));
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains("no C compiler is installed (`cc` is not on PATH)")
                && stderr.contains("install one with")
                && stderr.contains("CC="),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("at fault"), "{args:?}: {stderr}");
    }
    assert!(!rd.exists(), "no run is left behind");
    // A compiler that CC names is looked for as named.
    let (code, _, stderr) = run(ksearch(&["eval", "cpu/softmax", "--workload", "small"])
        .env("CC", "no-such-compiler-here -O1"));
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("the C compiler `no-such-compiler-here` that CC names is not found"),
        "{stderr}"
    );
}
