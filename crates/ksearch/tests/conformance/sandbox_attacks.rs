//! Attacks on the sandbox and on the memory a runner shares with its judge: resizing the shared
//! regions under the judge, and (where the sandbox has no namespaces) reading the directory a
//! runner was started in.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ksearch_core::protocol::Status;
use ksearch_eval::Evaluation;

use crate::c_fixture::CFixture;
use crate::support::Fixture;

#[path = "../common/softmax_kernels.rs"]
mod kernels;
use kernels::{ALL_ROWS, softmax_candidate as candidate};

/// Everything a candidate printed.
fn printed(e: &Evaluation) -> String {
    format!("{}{}", e.result.output.head, e.result.output.tail)
}

/// A C candidate that tries to grow and to truncate every descriptor it holds (its outputs and
/// its control page are writable memfds the judge maps; its inputs it reopens writable): a
/// truncated file would kill the judge with SIGBUS when it read its own mapping. It does so at
/// its first call and again once timed, then computes honestly.
#[test]
fn resizing_the_shared_memory_harms_no_judge() {
    let prelude = r#"#include <fcntl.h>
#include <sys/stat.h>
static long ksq_calls;
static void ksq_resize(void) {
  for (int fd = 0; fd < 256; fd++) {
    char p[64], l[128];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(p, l, sizeof l - 1);
    if (n <= 0) continue;
    l[n] = 0;
    struct stat st;
    if (fstat(fd, &st) != 0) continue;
    int fl = fcntl(fd, F_GETFL);
    int w = (fl & O_ACCMODE) == O_RDONLY ? open(p, O_RDWR) : dup(fd);
    if (w < 0) w = dup(fd);
    int memfd = strncmp(l, "/memfd:", 7) == 0;
    if (ftruncate(w, st.st_size * 2 + 4096) == 0) printf("GREW %s\n", l); else if (memfd) printf("grow refused: %s\n", l);
    if (ftruncate(w, 0) == 0) printf("TRUNCATED %s\n", l); else if (memfd) printf("truncate refused: %s\n", l);
    close(w);
  }
  fflush(stdout);
}
"#;
    let source = candidate(&format!(
        "if (++ksq_calls == 1 || ksq_calls == 6) ksq_resize();\n{ALL_ROWS}"
    ))
    .replacen(
        "\nstatic void row(",
        &format!("\n{prelude}\nstatic void row("),
        1,
    );
    let e = CFixture::new().evaluate_text("candidate.c", &source);
    let out = printed(&e);
    assert_eq!(
        e.result.status,
        Status::Passed,
        "{}\n{out}",
        e.result.message
    );
    assert!(!out.contains("TRUNCATED") && !out.contains("GREW"), "{out}");
    for region in ["ksearch-outputs", "ksearch-control"] {
        for what in ["truncate", "grow"] {
            assert!(
                out.contains(&format!("{what} refused: /memfd:{region}")),
                "{what} {region}: {out}"
            );
        }
    }
}

/// Without namespaces (`KSEARCH_SANDBOX_NO_NAMESPACES=1`, which must reach the Python judge),
/// a runner started in `/tmp` reads nothing there: not a file another program of the same user
/// keeps only for itself.
#[test]
#[cfg_attr(
    not(has_numpy),
    ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
)]
fn without_namespaces_a_python_runner_reads_nothing_in_tmp() {
    use std::os::unix::fs::PermissionsExt;
    let secret = tempfile::Builder::new()
        .prefix("ksearch-test-secret-")
        .tempfile_in("/tmp")
        .unwrap();
    std::fs::write(secret.path(), "sk-kept-in-tmp\n").unwrap();
    std::fs::set_permissions(secret.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("candidate.py");
    std::fs::write(
        &module,
        format!(
            "import os\nimport numpy as np\n\nfor path in [{path:?}, {name:?}]:\n    try:\n        print('READ', open(path).read(), flush=True)\n    except OSError as e:\n        print('secret refused:', e, flush=True)\nprint('cwd', os.getcwd(), sorted(os.listdir('.')), flush=True)\n\n\ndef run(x, *, rows, cols):\n    e = np.exp(x - x.max(axis=1, keepdims=True))\n    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)\n",
            path = secret.path().display().to_string(),
            name = secret.path().file_name().unwrap().to_string_lossy(),
        ),
    )
    .unwrap();
    let task = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/numpy_softmax");
    let j = eval_json_without_namespaces(&task, &module);
    let sandbox = &j["sandbox"];
    assert_eq!(
        sandbox["pid_namespace"], false,
        "the setting applied: {sandbox}"
    );
    let missing = sandbox["missing"].to_string();
    if missing.contains("no Landlock") {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "skipped: this kernel has no Landlock, so a runner reads your files ({missing})"
            );
        }
        return;
    }
    assert_eq!(j["status"], "passed", "{j}");
    let out = format!("{}{}", j["output"]["head"], j["output"]["tail"]);
    assert!(!out.contains("sk-kept-in-tmp"), "{out}");
    assert_eq!(out.matches("secret refused").count(), 2, "{out}");
}

/// `ksearch eval TASK MODULE --target numpy --json` with `KSEARCH_SANDBOX_NO_NAMESPACES=1`.
fn eval_json_without_namespaces(task: &Path, module: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ksearch"))
        .args(["eval", task.to_str().unwrap(), module.to_str().unwrap()])
        .args(["--target", "numpy", "--json", "--workload", "small"])
        .args(["--min-runs", "3", "--min-time-ms", "5", "--warmup-ms", "1"])
        .env("KSEARCH_SANDBOX_NO_NAMESPACES", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "stdout is one JSON object ({e}): {stdout:?} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}
