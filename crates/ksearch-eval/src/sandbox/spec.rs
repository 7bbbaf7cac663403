//! What a sandboxed process gets (the spec the judge hands the launcher) and what confinement it
//! really got (the report the launcher hands back). Both cross a process boundary as JSON.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use ksearch_core::protocol::Confinement;

/// The uid (and gid) untrusted code runs as when ksearch itself runs as root.
pub const UNPRIVILEGED_ID: u32 = 65534;

/// How a sandboxed program is started and confined.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSpec {
    pub program: PathBuf,
    /// `argv[1..]`.
    pub args: Vec<String>,
    /// The program's whole environment: nothing else is inherited.
    pub env: Vec<(String, String)>,
    /// Working directory, as seen inside.
    pub cwd: PathBuf,
    /// An empty directory the launcher may mount the private root on (Linux).
    pub root_dir: PathBuf,
    /// Host paths visible inside, at the same path, read-only (files or directories).
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Host directories visible inside, at the same path, writable.
    #[serde(default)]
    pub writable: Vec<PathBuf>,
    /// Size of the private `/tmp`.
    pub tmp_bytes: u64,
    /// Expose the GPU: `/dev/nvidia*`, `/dev/dri` and a read-only `/sys`.
    #[serde(default)]
    pub gpu: bool,
    /// May create processes (the compiler); runners may only create threads.
    #[serde(default)]
    pub allow_fork: bool,
    /// Pin to this CPU.
    #[serde(default)]
    pub cpu: Option<usize>,
    /// Where `cpu` is unset, run on these CPUs (when not empty) rather than on those the
    /// launcher inherited: a GPU runner's, whose judge has pinned itself to one CPU.
    #[serde(default)]
    pub cpus: Vec<usize>,
    pub limits: Limits,
    /// Descriptors the program keeps, already at these numbers when the launcher starts.
    #[serde(default)]
    pub keep_fds: Vec<i32>,
    /// Where the launcher writes its report (closed before the program starts).
    pub report_fd: i32,
    /// Use no namespaces even where the kernel allows them: the confinement of a machine that
    /// refuses them (limits, seccomp, Landlock), for testing it.
    #[serde(default)]
    pub no_namespaces: bool,
}

/// Resource limits, applied with `setrlimit` (inherited by everything the program starts); a
/// limit above the hard limit already in force is lowered to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Private memory (heap, anonymous mappings, static data): `RLIMIT_DATA`.
    pub memory_bytes: u64,
    /// CPU time: `RLIMIT_CPU`.
    pub cpu_seconds: u64,
    /// Largest file it may write: `RLIMIT_FSIZE`.
    pub file_bytes: u64,
    /// Processes and threads of its user: `RLIMIT_NPROC`.
    pub processes: u64,
    pub open_files: u64,
}

/// A line of the launcher's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Report {
    /// The program's process id, as seen from the launcher's side (written by the launcher).
    Pid(i32),
    /// Written just before the program is executed.
    Ready(Confinement),
    /// Setting up failed; the program was not started.
    Failed(String),
}

/// Write a report line on `fd`; a launcher whose judge went away has nobody to tell.
pub(crate) fn report(fd: i32, r: &Report) {
    use std::io::Write as _;
    use std::os::fd::FromRawFd as _;
    // SAFETY: the fd stays open for the life of the process; ManuallyDrop keeps it so.
    let f = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    let mut line = serde_json::to_string(r).expect("reports serialize");
    line.push('\n');
    let _ = (&*f).write_all(line.as_bytes());
}

/// Every report line, read until the launcher and the program have closed the pipe.
pub(crate) fn read_reports(pipe: std::fs::File) -> Vec<Report> {
    use std::io::Read as _;
    let mut text = String::new();
    let _ = pipe.take(1 << 20).read_to_string(&mut text);
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
