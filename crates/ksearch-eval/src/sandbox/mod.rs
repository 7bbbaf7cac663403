//! Running untrusted code: the compiler on a candidate's source, and the runner that executes a
//! candidate. Both are started through the launcher (`ksearch sandbox`, this module's
//! [`launcher_main`]), which confines the program before executing it; [`Sandbox::spawn`] is the
//! side that asks for it. `docs/sandbox.md` describes what each layer does and what a user
//! without root, or on macOS, gets.

#[cfg(target_os = "linux")]
mod landlock;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(not(target_os = "linux"))]
mod other;
#[cfg(target_os = "linux")]
mod seccomp;
mod spec;

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

#[cfg(target_os = "linux")]
use linux as platform;
#[cfg(not(target_os = "linux"))]
use other as platform;
pub use spec::{Confinement, Limits, SandboxSpec, UNPRIVILEGED_ID};
use spec::{Report, read_reports};

/// Pin the calling thread to one CPU (Linux; elsewhere a no-op: macOS has no CPU affinity).
pub(crate) fn pin_to_cpu(cpu: usize) {
    pin_to_cpus(&[cpu]);
}

/// Let the calling thread run on `cpus` only (those of 1024 and over are left out; a set left
/// empty changes nothing). Linux; elsewhere a no-op.
pub(crate) fn pin_to_cpus(cpus: &[usize]) {
    #[cfg(target_os = "linux")]
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET stays in bounds for cpu < 1024.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let mut any = false;
        for &cpu in cpus.iter().filter(|&&c| c < 1024) {
            libc::CPU_SET(cpu, &mut set);
            any = true;
        }
        if any {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &raw const set);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpus;
}

/// Entry point of `ksearch sandbox SPEC_JSON`: confine, then execute the program. Returns an
/// exit code only when that failed.
pub fn launcher_main(spec_json: &OsStr) -> i32 {
    platform::main_with(spec_json)
}

/// Whether the user asked for the confinement of a machine without namespaces
/// (`KSEARCH_SANDBOX_NO_NAMESPACES=1`): to see what a user there gets, or to test it.
pub fn no_namespaces_asked() -> bool {
    std::env::var_os(NO_NAMESPACES_VAR).is_some_and(|v| v == "1")
}

/// See [`no_namespaces_asked`].
pub const NO_NAMESPACES_VAR: &str = "KSEARCH_SANDBOX_NO_NAMESPACES";

/// What can go wrong starting a sandboxed program.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("could not start the sandbox launcher `{launcher}`")]
    Spawn {
        launcher: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the sandbox could not be set up: {0}")]
    Setup(String),
}

/// Starts programs in sandboxes.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// The binary that hosts the launcher (`ksearch`).
    pub launcher: PathBuf,
}

/// A program started in a sandbox.
#[derive(Debug)]
pub struct Sandboxed {
    launcher: Child,
    /// The program's process id as this process sees it.
    pid: i32,
    pub confinement: Confinement,
    exit: Option<ExitStatus>,
}

impl Sandbox {
    /// Start `spec`'s program with `fds` (our descriptor, its number in the program) and the
    /// given stdout and stderr. `spec.keep_fds` and `spec.report_fd` are filled in here.
    pub fn spawn(
        &self,
        mut spec: SandboxSpec,
        fds: Vec<(OwnedFd, RawFd)>,
        stdout: Stdio,
        stderr: Stdio,
    ) -> Result<Sandboxed, SandboxError> {
        let spawn_err = |source| SandboxError::Spawn {
            launcher: self.launcher.display().to_string(),
            source,
        };
        let (report_r, report_w) = cloexec_pipe().map_err(spawn_err)?;
        let report_fd = fds.iter().map(|(_, t)| *t).max().unwrap_or(2).max(2) + 1;
        spec.keep_fds = fds.iter().map(|(_, t)| *t).collect();
        spec.report_fd = report_fd;
        let mut moves: Vec<(RawFd, RawFd)> = fds.iter().map(|(f, t)| (f.as_raw_fd(), *t)).collect();
        moves.push((report_w.as_raw_fd(), report_fd));
        let json = serde_json::to_string(&spec).expect("specs serialize");
        let mut command = Command::new(&self.launcher);
        command
            .arg("sandbox")
            .arg(json)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        // SAFETY: the hook only calls async-signal-safe functions (fcntl, dup2, close).
        unsafe {
            command.pre_exec(move || {
                // Move every descriptor out of the way first, so no dup2 clobbers another's
                // source, then into place.
                let mut high = Vec::with_capacity(moves.len());
                for &(from, _) in &moves {
                    let h = libc::fcntl(from, libc::F_DUPFD_CLOEXEC, 100);
                    if h < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    high.push(h);
                }
                for (&h, &(_, to)) in high.iter().zip(&moves) {
                    if libc::dup2(h, to) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    libc::close(h);
                }
                Ok(())
            });
        }
        let launcher = command.spawn().map_err(spawn_err)?;
        drop(command);
        drop(report_w);
        drop(fds);
        let mut sandboxed = Sandboxed {
            launcher,
            pid: 0,
            confinement: Confinement::default(),
            exit: None,
        };
        let mut ready = false;
        for r in read_reports(File::from(report_r)) {
            match r {
                Report::Pid(p) => sandboxed.pid = p,
                Report::Ready(c) => {
                    sandboxed.confinement = c;
                    ready = true;
                }
                Report::Failed(e) => {
                    sandboxed.kill();
                    return Err(SandboxError::Setup(e));
                }
            }
        }
        if !ready || sandboxed.pid <= 0 {
            sandboxed.kill();
            let status = sandboxed.wait_timeout(Duration::from_secs(2));
            return Err(SandboxError::Setup(format!(
                "the launcher stopped before the program started ({})",
                status.map_or_else(|| "still running".into(), |s| s.to_string())
            )));
        }
        Ok(sandboxed)
    }
}

impl Sandboxed {
    /// The program's process id, as this process sees it.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Kill the program and everything it started.
    pub fn kill(&mut self) {
        if self.exit.is_some() {
            return;
        }
        let pgid = self.launcher.id() as i32;
        // SAFETY: signalling the launcher's process group (it called setsid) and the launcher;
        // the program dies with the launcher (parent-death signal), and with it its namespace.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
            libc::kill(pgid, libc::SIGKILL);
        }
        if let Ok(s) = self.launcher.wait() {
            self.exit = Some(s);
        }
    }

    /// Whether it has ended; how.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none()
            && let Ok(Some(s)) = self.launcher.try_wait()
        {
            self.exit = Some(s);
        }
        self.exit
    }

    /// Wait up to `limit` for it to end.
    pub fn wait_timeout(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.try_wait() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// CPU time (user + system) the program has used so far; `None` where the platform does
    /// not say.
    pub fn cpu_time(&self) -> Option<CpuTime> {
        platform_cpu_time(self.pid)
    }
}

impl Drop for Sandboxed {
    fn drop(&mut self) {
        self.kill();
    }
}

/// CPU time a process has used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuTime {
    pub seconds: f64,
    /// Nanosecond accounting (the scheduler's) rather than clock ticks (10 ms).
    pub precise: bool,
}

#[cfg(target_os = "linux")]
fn platform_cpu_time(pid: i32) -> Option<CpuTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is field 3; utime and stime
    // are fields 14 and 15. They count every thread, live or gone, in clock ticks.
    let rest = stat.rsplit_once(") ")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf cannot fail for this name.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let ticks = (utime + stime) as f64 / tick;
    // The scheduler's nanoseconds, summed over the live threads.
    let precise = std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
                .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .sum::<u64>() as f64
                * 1e-9
        });
    Some(match precise {
        Some(ns) if ns > 0.0 => CpuTime {
            seconds: ns.max(ticks),
            precise: true,
        },
        _ => CpuTime {
            seconds: ticks,
            precise: false,
        },
    })
}

#[cfg(not(target_os = "linux"))]
fn platform_cpu_time(_pid: i32) -> Option<CpuTime> {
    None
}

/// A pipe whose ends close on exec.
pub(crate) fn cloexec_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two fds into the array on success.
    #[cfg(target_os = "linux")]
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    #[cfg(not(target_os = "linux"))]
    let r = unsafe {
        let r = libc::pipe(fds.as_mut_ptr());
        if r == 0 {
            libc::fcntl(fds[0], libc::F_SETFD, libc::FD_CLOEXEC);
            libc::fcntl(fds[1], libc::F_SETFD, libc::FD_CLOEXEC);
        }
        r
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both fds are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The directories a Python interpreter needs to run (its prefixes and `sys.path`), asked of the
/// interpreter itself, so a sandbox can expose them read-only.
pub fn python_paths(python: &Path) -> Vec<PathBuf> {
    let out = Command::new(python)
        .args([
            "-c",
            "import sys; print('\\n'.join([sys.prefix, sys.base_prefix, sys.exec_prefix] + [p for p in sys.path if p]))",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    let mut paths: Vec<PathBuf> = out
        .ok()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(PathBuf::from)
                .filter(|p| p.is_absolute() && p.exists())
                .collect()
        })
        .unwrap_or_default();
    if let Ok(resolved) = which(python) {
        paths.push(resolved);
    }
    paths.sort();
    paths.dedup();
    paths
}

/// `program` resolved through `PATH`, as the shell would.
pub fn which(program: &Path) -> std::io::Result<PathBuf> {
    if program.components().count() > 1 {
        return Ok(program.to_owned());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(program);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("`{}` is not on PATH", program.display()),
    ))
}
