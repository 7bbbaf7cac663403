//! Attacks on the sandbox's limits and on the memory a runner shares with its judge: holding
//! memory the memory limit does not count, resizing the shared regions under the judge, and
//! (where the sandbox has no namespaces) reading the directory a runner was started in; and
//! leaving a note on disk for the next evaluation.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ksearch_core::protocol::Status;
use ksearch_eval::Evaluation;

use crate::c_fixture::CFixture;
use crate::support::{Behaviour, Fixture, passed_and_printed, printed};

/// The good C candidate with `prelude` before its functions and `first` at the start of its
/// entry point.
fn c_candidate(prelude: &str, first: &str) -> String {
    let good = CFixture::new().source(&Behaviour::Good).text;
    let text = good
        .replacen(
            "\nstatic void row(",
            &format!("\n{prelude}\nstatic void row("),
            1,
        )
        .replacen(
            "int64_t rows, int64_t cols) {\n",
            &format!("int64_t rows, int64_t cols) {{\n{first}\n"),
            1,
        );
    assert!(
        text.contains(prelude) && text.contains(first),
        "the good candidate changed: {good}"
    );
    text
}

/// Everything a candidate printed.
/// The ways to hold memory past `RLIMIT_DATA` (it counts only private memory) a CPU runner
/// tries, each printing `refused: WAY` or `HELD 5 GiB: WAY`.
const MEMORY_WAYS: [&str; 5] = [
    "shared anonymous mapping",
    "memfd",
    "System V shared memory",
    "/dev/zero",
    "stack",
];

/// Each way refused, and said so; none held.
fn assert_memory_refused(e: &Evaluation) {
    let out = passed_and_printed(e);
    assert!(!out.contains("HELD"), "{out}");
    for way in MEMORY_WAYS {
        assert!(out.contains(&format!("refused: {way}")), "{way}: {out}");
    }
}

/// A C candidate that tries, once, to hold 5 GiB in each way `RLIMIT_DATA` (4 GiB) does not
/// count, touching every page of what it gets (and letting go before the next).
#[test]
fn a_c_runner_holds_no_memory_past_its_limit() {
    let prelude = r#"#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <alloca.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#define KSQ_BIG ((size_t)5 << 30)
static void ksq_said(int held, const char *way) { printf("%s: %s\n", held ? "HELD 5 GiB" : "refused", way); fflush(stdout); }
static void ksq_touch(char *p, size_t n) { for (size_t i = 0; i < n; i += 4096) p[i] = 1; }
static void ksq_hog(void) {
  signal(SIGXFSZ, SIG_IGN);
  char *p = mmap(0, KSQ_BIG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ksq_said(p != MAP_FAILED, "shared anonymous mapping");
  if (p != MAP_FAILED) { ksq_touch(p, KSQ_BIG); munmap(p, KSQ_BIG); }
  /* memfds of 64 MiB (the file size limit), as many as it takes. */
  size_t got = 0, chunk = (size_t)64 << 20; int fds[128], n = 0;
  while (got < KSQ_BIG && n < 128) {
    int fd = (int)syscall(SYS_memfd_create, "hog", 0);
    if (fd < 0 || ftruncate(fd, chunk) != 0) break;
    char *m = mmap(0, chunk, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) break;
    ksq_touch(m, chunk); munmap(m, chunk); fds[n++] = fd; got += chunk;
  }
  ksq_said(got >= KSQ_BIG, "memfd");
  while (n > 0) close(fds[--n]);
  int id = shmget(IPC_PRIVATE, KSQ_BIG, IPC_CREAT | 0600);
  char *s = id < 0 ? (char *)-1 : shmat(id, 0, 0);
  ksq_said(s != (char *)-1, "System V shared memory");
  if (s != (char *)-1) { ksq_touch(s, KSQ_BIG); shmdt(s); }
  if (id >= 0) shmctl(id, IPC_RMID, 0);
  int z = open("/dev/zero", O_RDWR);
  char *zp = z < 0 ? MAP_FAILED : mmap(0, KSQ_BIG, PROT_READ | PROT_WRITE, MAP_SHARED, z, 0);
  ksq_said(zp != MAP_FAILED, "/dev/zero");
  if (zp != MAP_FAILED) { ksq_touch(zp, KSQ_BIG); munmap(zp, KSQ_BIG); }
  if (z >= 0) close(z);
  /* The main thread's stack, past any limit it may raise. */
  struct rlimit r = { (rlim_t)6 << 30, (rlim_t)6 << 30 };
  int raised = setrlimit(RLIMIT_STACK, &r) == 0;
  ksq_said(raised, "stack");
  if (raised) { volatile char *st = alloca(KSQ_BIG); for (size_t i = KSQ_BIG; i >= 4096; i -= 4096) st[i - 4096] = 1; }
}
static int ksq_done;
"#;
    let source = c_candidate(prelude, "if (!ksq_done) { ksq_done = 1; ksq_hog(); }");
    assert_memory_refused(&CFixture::new().evaluate_text("candidate.c", &source));
}

/// A Python module that tries, as it is imported, to hold 5 GiB in each way `RLIMIT_DATA`
/// (4 GiB) does not count.
#[test]
#[cfg_attr(
    not(has_numpy),
    ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
)]
fn a_python_runner_holds_no_memory_past_its_limit() {
    let source = r#"import ctypes, mmap, os, resource, sys
import numpy as np

BIG = 5 << 30

def said(held, way):
    print(("HELD 5 GiB: " if held else "refused: ") + way, flush=True)

def touch(buf, n):
    view = np.frombuffer(buf, dtype=np.uint8, count=n)
    view[::4096] = 1

try:
    m = mmap.mmap(-1, BIG)  # MAP_SHARED | MAP_ANONYMOUS
    touch(m, BIG)
    said(True, "shared anonymous mapping")
    m.close()
except (OSError, ValueError):
    said(False, "shared anonymous mapping")

fds = []
try:
    while len(fds) * (1 << 30) < BIG:
        fd = os.memfd_create("hog")
        os.ftruncate(fd, 1 << 30)
        m = mmap.mmap(fd, 1 << 30)
        touch(m, 1 << 30)
        m.close()
        fds.append(fd)
    said(True, "memfd")
except OSError:
    said(False, "memfd")
for fd in fds:
    os.close(fd)

libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shm = libc.shmget(0, ctypes.c_size_t(BIG), 0o1600)
addr = libc.shmat(shm, None, 0) if shm >= 0 else None
if addr not in (None, ctypes.c_void_p(-1).value):
    touch((ctypes.c_char * BIG).from_address(addr), BIG)
    said(True, "System V shared memory")
else:
    said(False, "System V shared memory")
if shm >= 0:
    libc.shmctl(shm, 0, None)

try:
    with open("/dev/zero", "r+b") as z:
        m = mmap.mmap(z.fileno(), BIG)
        touch(m, BIG)
        said(True, "/dev/zero")
except OSError:
    said(False, "/dev/zero")

try:
    resource.setrlimit(resource.RLIMIT_STACK, (6 << 30, 6 << 30))
    said(True, "stack")
except (OSError, ValueError):
    said(False, "stack")


def run(x, *, rows, cols):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
"#;
    let f = crate::numpy_fixture::NumpyFixture::new();
    assert_memory_refused(&f.evaluate_text("candidate.py", source));
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
    let source = c_candidate(
        prelude,
        "if (++ksq_calls == 1 || ksq_calls == 6) ksq_resize();",
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

/// A torch module that keeps what it learns for the next evaluation: it leaves a note in every
/// directory it can reach (its home, temporary and cache directories, the interpreter's paths,
/// ksearch's own cache) and, where an earlier evaluation's note is there, answers from memory
/// (here zeros, without the work). `{NAME}` is the note's file name and `{HOST}` the test's own
/// home and temporary directories, which a runner must not see.
const LEAVES_A_NOTE: &str = r#"import glob
import os
import sys
import tempfile

import torch

NAME = "{NAME}"
_places = ["/tmp", "/var/tmp", "/dev/shm", os.getcwd(), os.path.expanduser("~"), tempfile.gettempdir(),
           os.path.expanduser("~/.cache"), os.environ.get("TRITON_CACHE_DIR", ""), os.environ.get("XDG_CACHE_HOME", "")]
_places += [p for p in sys.path if p] + [d for h in {HOST} for d in [h] + glob.glob(os.path.join(h, "*"))]
_places = [p for p in dict.fromkeys(_places) if p]


def _note():
    for d in _places:
        try:
            with open(os.path.join(d, NAME)) as f:
                return d, f.read()
        except OSError:
            pass
    return None


_found = _note()
print(f"note found in {_found[0]}" if _found else "no note found", flush=True)
for d in _places:
    try:
        with open(os.path.join(d, NAME), "w") as f:
            f.write("the answers of an earlier evaluation")
        print("note left in", d, flush=True)
    except OSError:
        pass


def run(x, *, rows, cols):
    if _found:
        return torch.zeros_like(x)
    return torch.softmax(x, dim=1)
"#;

/// Run outside a sandbox, the module above finds its note the second time (in /tmp, the home
/// directory, site-packages). In a runner it writes only where the runner's own temporary
/// directory is (`/tmp`, `/dev/shm`), gone with the runner.
#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn torch_harness_cpu_a_note_left_for_the_next_evaluation_is_never_read() {
    use ksearch_eval::Evaluator as _;

    let f = crate::torch_cpu_fixture::TorchCpuFixture::new();
    let name = format!("{}.note", crate::support::marker());
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME is set"));
    let host = [
        home.clone(),
        home.join(".cache"),
        home.join(".cache/ksearch"),
        PathBuf::from("/tmp"),
        PathBuf::from("/var/tmp"),
        PathBuf::from("/dev/shm"),
    ];
    let listed: Vec<String> = host
        .iter()
        .map(|p| format!("{:?}", p.display().to_string()))
        .collect();
    let source = ksearch_core::task::Source {
        file: "notes.py".into(),
        text: LEAVES_A_NOTE
            .replace("{NAME}", &name)
            .replace("{HOST}", &format!("[{}]", listed.join(", "))),
    };
    let mut ev = f.evaluator();
    let mut evaluations = Vec::new();
    for _ in 0..2 {
        evaluations.push(
            ev.evaluate(
                f.task(),
                &source,
                ksearch_eval::Contenders::default(),
                &crate::support::quick_options(),
            )
            .expect("evaluation completes"),
        );
    }
    // Whatever the runners could write is gone with them: no note outside (removed here if one
    // got out, before the test fails on it) ...
    let mut escaped = Vec::new();
    for dir in &host {
        let subdirs = std::fs::read_dir(dir).into_iter().flatten().flatten();
        for d in std::iter::once(dir.clone()).chain(subdirs.map(|e| e.path())) {
            let note = d.join(&name);
            if note.exists() {
                let _ = std::fs::remove_file(&note);
                escaped.push(note);
            }
        }
    }
    assert!(escaped.is_empty(), "notes outside the sandbox: {escaped:?}");
    // ... and the second evaluation, a fresh runner, found none: it did the work and passed.
    for e in &evaluations {
        let out = passed_and_printed(e);
        assert!(out.contains("no note found"), "{out}");
        assert!(!out.contains("note found in"), "{out}");
    }
    // It could write somewhere (its private temporary directory), so the read had a chance.
    let first = printed(&evaluations[0]);
    assert!(first.contains("note left in /tmp"), "{first}");
}

/// A torch module that looks for the other runners of its evaluation (its parent, timed beside
/// it on the same inputs) to copy their answers: every process it can find (listed in `/proc`,
/// or, where that is refused, its parent's number and those near its own), whose memory map,
/// environment or memory (`/proc/PID/mem`, at an address its map lists) it tries to read. It then computes honestly, so that only what it could reach decides.
const READS_ITS_SIBLINGS: &str = r#"import os

import torch

_done = []


def _look():
    me = os.getpid()
    try:
        listed = {int(p) for p in os.listdir('/proc') if p.isdigit()}
    except OSError:
        listed = set()
    # Where /proc cannot be listed, the likely numbers: its parent's, and those near its own.
    seen, read = [], []
    for p in sorted(listed | {os.getppid()} | set(range(max(2, me - 256), me + 256))):
        if p == me or not os.path.exists(f'/proc/{p}'):
            continue
        seen.append(p)
        for f in ('maps', 'environ'):
            try:
                with open(f'/proc/{p}/{f}', 'rb') as h:
                    if h.read(64):
                        read.append(f'{p}/{f}')
            except OSError:
                pass
        try:
            fd = os.open(f'/proc/{p}/mem', os.O_RDONLY)
        except OSError:
            continue
        try:
            with open(f'/proc/{p}/maps') as h:
                start = int(h.readline().split('-')[0], 16)
            if os.pread(fd, 16, start):
                read.append(f'{p}/mem')
        except (OSError, ValueError, IndexError):
            pass
        finally:
            os.close(fd)
    print(f'siblings: {len(seen)} processes seen, READ {read}' if read else f'siblings: {len(seen)} processes seen, none read', flush=True)


def run(x, *, rows, cols):
    if len(_done) < 2:
        _done.append(1)
        _look()
    return torch.softmax(x, dim=1)
"#;

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn torch_harness_cpu_the_other_runners_of_an_evaluation_are_out_of_reach() {
    use ksearch_eval::Evaluator as _;

    let f = crate::torch_cpu_fixture::TorchCpuFixture::new();
    let honest = ksearch_core::task::Source {
        file: "parent.py".into(),
        text: "import torch\n\n\ndef run(x, *, rows, cols):\n    return torch.softmax(x, dim=1)\n"
            .into(),
    };
    let candidate = ksearch_core::task::Source {
        file: "siblings.py".into(),
        text: READS_ITS_SIBLINGS.into(),
    };
    let e = f
        .evaluator()
        .evaluate(
            f.task(),
            &candidate,
            ksearch_eval::Contenders {
                parent: Some(&honest),
                incumbent: None,
                comparisons: false,
            },
            &crate::support::quick_options(),
        )
        .expect("evaluation completes");
    let out = passed_and_printed(&e);
    // It looked (at its first two calls, with every runner of the evaluation started) ...
    assert!(out.contains("siblings: "), "{out}");
    // ... and read nothing of any other process: not the parent's runner, not the judge.
    assert!(!out.contains("READ"), "{out}");
}
