//! One worker process: spawned in its own process group, in a fresh temporary directory, with a
//! scrubbed environment; requests go in on fd 3, messages come out on fd 4, and stdout/stderr
//! are captured separately. Stopped the way nextest stops tests: SIGTERM to the group, a grace
//! period, then SIGKILL to the group.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ksearch_core::protocol::{Envelope, PROTOCOL_VERSION, Request, WorkerMessage};

use crate::env_scrub::scrubbed;
use crate::error::EvalError;
use crate::output_capture::OutputCapture;

/// File descriptors a worker reads requests from and writes messages to; passed to it in
/// `KSEARCH_PROTOCOL_FDS` as `"<in>,<out>"`.
pub(crate) const REQUEST_FD: i32 = 3;
pub(crate) const MESSAGE_FD: i32 = 4;
pub(crate) const PROTOCOL_FDS_VAR: &str = "KSEARCH_PROTOCOL_FDS";

/// Worker directories are named `ksearch-worker-<orchestrator pid>-<random>`.
const DIR_PREFIX: &str = "ksearch-worker-";

/// Remove the directories of workers whose orchestrator is gone: one killed with SIGKILL never
/// removed its own (its workers die with it).
fn sweep_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(DIR_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(pid as i32, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive && e.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Longest protocol line accepted from a worker.
const MAX_LINE: u64 = 64 << 20;

/// How to start a worker.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Set on top of the scrubbed environment.
    pub env: Vec<(String, String)>,
    /// How long the worker may take to say hello.
    pub startup_timeout: Duration,
    /// Where it runs; `None`: its fresh temporary directory (always its `TMPDIR`).
    pub current_dir: Option<PathBuf>,
}

impl WorkerCommand {
    pub fn display(&self) -> String {
        let mut s = self.program.display().to_string();
        for a in &self.args {
            s.push(' ');
            s.push_str(a);
        }
        s
    }
}

/// What came from the worker's message channel.
#[derive(Debug)]
pub(crate) enum Incoming {
    Message(WorkerMessage),
    /// A line that is not a protocol message.
    Garbage(String),
    /// The channel closed: the worker exited or closed fd 4.
    Closed,
    TimedOut,
}

#[derive(Debug)]
pub(crate) struct WorkerProcess {
    child: Child,
    requests: File,
    messages: Receiver<Incoming>,
    pub(crate) capture: Arc<OutputCapture>,
    output_thread: Option<JoinHandle<()>>,
    exit: Option<ExitStatus>,
    _dir: tempfile::TempDir,
}

fn cloexec_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into the array on success.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both fds are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl WorkerProcess {
    pub(crate) fn spawn(cmd: &WorkerCommand) -> Result<Self, EvalError> {
        let spawn_err = |e: std::io::Error| EvalError::WorkerSpawn {
            command: cmd.display(),
            source: e,
        };
        sweep_stale_dirs();
        let dir = tempfile::Builder::new()
            .prefix(&format!("{DIR_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(spawn_err)?;
        let (req_r, req_w) = cloexec_pipe().map_err(spawn_err)?;
        let (msg_r, msg_w) = cloexec_pipe().map_err(spawn_err)?;
        let (out_r, out_w) = std::io::pipe().map_err(spawn_err)?;

        let mut command = Command::new(&cmd.program);
        command
            .args(&cmd.args)
            .current_dir(cmd.current_dir.as_deref().unwrap_or(dir.path()))
            .env_clear()
            .envs(scrubbed(std::env::vars_os()))
            .env("TMPDIR", dir.path())
            .env(PROTOCOL_FDS_VAR, format!("{REQUEST_FD},{MESSAGE_FD}"))
            .envs(
                cmd.env
                    .iter()
                    .map(|(k, v)| (OsString::from(k), OsString::from(v))),
            )
            .stdin(Stdio::null())
            .stdout(out_w.try_clone().map_err(spawn_err)?)
            .stderr(out_w)
            .process_group(0);
        let (req_fd, msg_fd) = (req_r.as_raw_fd(), msg_w.as_raw_fd());
        // SAFETY: the hook only calls async-signal-safe libc functions.
        unsafe {
            command.pre_exec(move || {
                // Move the protocol ends to fds 3 and 4. Going through fds >= 10 first keeps
                // either dup2 from closing the other end.
                let a = libc::fcntl(req_fd, libc::F_DUPFD, 10);
                let b = libc::fcntl(msg_fd, libc::F_DUPFD, 10);
                if a < 0 || b < 0 || libc::dup2(a, REQUEST_FD) < 0 || libc::dup2(b, MESSAGE_FD) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(a);
                libc::close(b);
                // Die with the thread that spawned us, so an orchestrator killed with SIGKILL
                // leaves no worker behind.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command.spawn().map_err(spawn_err)?;
        // Our copies of the child's ends must close, or EOF never arrives.
        drop((req_r, msg_w));
        drop(command);

        let (capture, output_thread) = OutputCapture::spawn(out_r);
        let (tx, rx) = channel();
        std::thread::Builder::new()
            .name("ksearch-protocol".into())
            .spawn(move || read_messages(File::from(msg_r), &tx))
            .map_err(spawn_err)?;

        let mut worker = Self {
            child,
            requests: File::from(req_w),
            messages: rx,
            capture,
            output_thread: Some(output_thread),
            exit: None,
            _dir: dir,
        };
        worker.await_hello(cmd)?;
        Ok(worker)
    }

    fn await_hello(&mut self, cmd: &WorkerCommand) -> Result<(), EvalError> {
        let deadline = Instant::now() + cmd.startup_timeout;
        loop {
            match self.recv(deadline) {
                Incoming::Message(WorkerMessage::Hello { .. }) => return Ok(()),
                Incoming::Message(_) | Incoming::Garbage(_) => {}
                Incoming::Closed | Incoming::TimedOut => {
                    self.stop(Duration::from_millis(200));
                    let out = self.capture.take();
                    return Err(EvalError::WorkerStart {
                        command: cmd.display(),
                        output: format!("{}{}", out.head, out.tail).trim().to_owned(),
                    });
                }
            }
        }
    }

    pub(crate) fn send(&mut self, request: &Request) -> std::io::Result<()> {
        let mut line = serde_json::to_string(&Envelope::new(request))?;
        line.push('\n');
        self.requests.write_all(line.as_bytes())?;
        self.requests.flush()
    }

    pub(crate) fn recv(&self, deadline: Instant) -> Incoming {
        let wait = deadline.saturating_duration_since(Instant::now());
        match self.messages.recv_timeout(wait) {
            Ok(incoming) => incoming,
            Err(RecvTimeoutError::Timeout) => Incoming::TimedOut,
            Err(RecvTimeoutError::Disconnected) => Incoming::Closed,
        }
    }

    /// Wait up to `timeout` for the worker to exit on its own.
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exit {
                return Some(status);
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exit = Some(status);
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stop the worker and everything in its process group: SIGTERM, up to `grace` for the
    /// leader to exit, then SIGKILL to the whole group. Returns how the leader ended.
    pub(crate) fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        let pgid = self.child.id() as i32;
        if self.exit.is_none() {
            // SAFETY: signalling a process group we created.
            unsafe { libc::kill(-pgid, libc::SIGTERM) };
            self.wait_exit(grace);
        }
        // Always: children of the candidate may outlive the leader.
        // SAFETY: as above; ESRCH when the group is already empty is fine.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        if self.exit.is_none() {
            self.exit = self.child.wait().ok();
        }
        self.exit
    }

    /// After the worker ended: wait for the output pipe to close so the capture is complete.
    pub(crate) fn finish_output(&mut self) {
        self.capture.wait_closed(Duration::from_millis(500));
        if let Some(h) = self.output_thread.take()
            && h.is_finished()
        {
            let _ = h.join();
        }
    }

    /// Ask the worker to exit, then make sure it did.
    pub(crate) fn shutdown(mut self) {
        if self.exit.is_none() && self.send(&Request::Shutdown).is_ok() {
            self.wait_exit(Duration::from_millis(500));
        }
        self.stop(Duration::from_millis(500));
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.stop(Duration::from_millis(200));
    }
}

fn read_messages(pipe: File, tx: &Sender<Incoming>) {
    let mut reader = BufReader::new(pipe);
    loop {
        let mut line = Vec::new();
        match (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let incoming = match serde_json::from_str::<Envelope<WorkerMessage>>(text.trim_end()) {
            Ok(env) if env.protocol == PROTOCOL_VERSION => Incoming::Message(env.message),
            Ok(env) => Incoming::Garbage(format!(
                "message of protocol version {} (this ksearch speaks {PROTOCOL_VERSION})",
                env.protocol
            )),
            Err(_) => Incoming::Garbage(text.chars().take(200).collect()),
        };
        if tx.send(incoming).is_err() {
            return;
        }
    }
    let _ = tx.send(Incoming::Closed);
}

/// A readable name for a signal that ended a process.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGSEGV => "SIGSEGV, segmentation fault",
        libc::SIGBUS => "SIGBUS, bus error",
        libc::SIGFPE => "SIGFPE, arithmetic exception",
        libc::SIGILL => "SIGILL, illegal instruction",
        libc::SIGABRT => "SIGABRT, abort",
        libc::SIGKILL => "SIGKILL, killed",
        libc::SIGTERM => "SIGTERM, terminated",
        libc::SIGTRAP => "SIGTRAP, trap",
        libc::SIGSYS => "SIGSYS, bad system call",
        _ => return format!("signal {sig}"),
    };
    format!("signal {sig} ({name})")
}

/// How a worker ended, in words.
pub(crate) fn describe_exit(status: Option<ExitStatus>) -> (bool, String) {
    match status {
        Some(s) if s.signal().is_some() => (
            true,
            format!("killed by {}", signal_name(s.signal().unwrap_or(0))),
        ),
        Some(s) => (
            false,
            format!("exited with status {}", s.code().unwrap_or(-1)),
        ),
        None => (false, "closed its protocol channel".to_owned()),
    }
}
