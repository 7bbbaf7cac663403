//! Any command as the model (`exec:CMD`): for each call, `sh -c CMD` gets the conversation on
//! its stdin and writes the answer on its stdout. This is how `llm`, `ollama run` or a coding
//! agent's CLI in print mode serve as the model without an API key in ksearch.
//!
//! The conversation is plain text, each message under a header line of its own:
//!
//! ```text
//! ### ksearch system
//! You optimize compute kernels ...
//!
//! ### ksearch user
//! Implement ONLY this action ...
//! ```
//!
//! (`### ksearch assistant` for an earlier answer of a multi-turn prompt.) The command's
//! environment is ksearch's (it finds its own keys); it runs in its own process group, killed
//! with it at the call's timeout. Exit status 0: stdout, verbatim, is the answer. Exit status
//! [`RETRY_EXIT_CODE`] (75, `EX_TEMPFAIL`): a transient failure, retried like an HTTP 429 up to
//! `ClientSettings::max_retries` times. Any other status fails the call with the end of stderr.
//! Tokens are unknown (usage 0): such calls have no price and count as calls.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::client::LlmClient;
use crate::error::{Failure, LlmError};
use crate::http::{RetryPolicy, retry_delay};
use crate::secret::Scrubber;
use crate::spec::{ModelSpec, Provider};
use crate::types::{
    ANSWER_OVER_CAP, Completion, CompletionRequest, MAX_ANSWER_BYTES, MessageRole, Usage,
};

/// The exit status that asks for another attempt (`EX_TEMPFAIL` of sysexits.h).
pub const RETRY_EXIT_CODE: i32 = 75;

/// Most of the command's stderr quoted in an error.
const STDERR_LIMIT: usize = 2000;

/// The end of stderr kept while the command runs: the error quotes only its end, and a
/// command may write any amount.
const STDERR_KEPT: usize = 64 << 10;

/// How long the pipes are read after the command exits (its process group killed): what its
/// group wrote is in them by then. Only a process it moved out of its group (`setsid`, a
/// daemon) can hold them open longer, and that is not waited for.
const AFTER_EXIT: Duration = Duration::from_millis(200);

/// How often the command is checked for having exited while its pipes are quiet.
const TICK: Duration = Duration::from_millis(20);

/// The conversation as the command reads it on stdin.
pub fn prompt_text(request: &CompletionRequest) -> String {
    let mut out = String::new();
    for m in &request.messages {
        let role = match m.role {
            MessageRole::System => "system",
            MessageRole::User => "user",
            MessageRole::Assistant => "assistant",
        };
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str("### ksearch ");
        out.push_str(role);
        out.push('\n');
        out.push_str(&m.content);
        if !m.content.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

#[derive(Debug)]
pub(crate) struct ExecClient {
    pub(crate) spec: ModelSpec,
    pub(crate) policy: RetryPolicy,
    /// The command inherits ksearch's environment: its stdout and stderr are scrubbed of the
    /// secrets there (and of any key configured).
    pub(crate) scrubber: Scrubber,
}

impl LlmClient for ExecClient {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let input = prompt_text(request);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let failure = match self.run_once(&input)? {
                Ok((text, over_cap)) => {
                    return Ok(Completion {
                        text,
                        usage: Usage::default(),
                        model: self.spec.model.clone(),
                        finish_reason: over_cap.then(|| ANSWER_OVER_CAP.to_string()),
                        http_attempts: attempt,
                    }
                    .capped());
                }
                Err(failure) => failure,
            };
            if attempt > self.policy.max_retries {
                return Err(LlmError::RetriesExhausted {
                    provider: Provider::Exec,
                    attempts: attempt,
                    last: failure,
                });
            }
            std::thread::sleep(retry_delay(&self.policy, attempt - 1, None, true));
        }
    }
}

impl ExecClient {
    /// One run: the answer, and whether it passed the cap. Outer error: give up. Inner error:
    /// worth another attempt.
    fn run_once(&self, input: &str) -> Result<Result<(String, bool), Failure>, LlmError> {
        let fail = |detail: String| LlmError::Command {
            command: self.spec.model.clone(),
            detail,
        };
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&self.spec.model)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| fail(format!("cannot start `sh`: {e}")))?;
        let ended = match Pipes::new(&mut child, input) {
            Ok(mut pipes) => pipes.run(&mut child, self.policy.timeout),
            Err(e) => Err(e),
        };
        let (ended, stdout, stderr) = match ended {
            Ok(done) => done,
            Err(e) => {
                kill_group(child.id());
                let _ = child.wait();
                return Err(fail(format!("cannot read its output: {e}")));
            }
        };
        // A stray byte that is not UTF-8 becomes U+FFFD instead of failing the call (which
        // would end the session): as an HTTP reply's body is decoded, and an answer with a
        // mis-encoded character in its prose is still an answer. One in its code shows as a
        // compile error the debug round sees.
        let stderr = self.scrubber.scrub(&String::from_utf8_lossy(&stderr));
        let stderr_end = tail(stderr.trim(), STDERR_LIMIT);
        // Scrubbed before anything cuts it, so that no part of a secret is left at a cut.
        let answer = || self.scrubber.scrub(&String::from_utf8_lossy(&stdout));
        let status = match ended {
            Ended::Exited(status) => status,
            // An unusable answer that says so, whatever the command would have exited with: it
            // was killed as its output passed the cap.
            Ended::OverCap => return Ok(Ok((answer(), true))),
            Ended::Timeout => {
                return Ok(Err(Failure::Timeout {
                    after: self.policy.timeout,
                }));
            }
        };
        match status.code() {
            Some(0) => Ok(Ok((answer(), false))),
            Some(RETRY_EXIT_CODE) => Ok(Err(Failure::Connection {
                detail: format!(
                    "it exited with status {RETRY_EXIT_CODE} (try again): {stderr_end}"
                ),
            })),
            Some(code) => Err(fail(format!("it exited with status {code}: {stderr_end}"))),
            None => Err(fail(format!("it was killed by a signal: {stderr_end}"))),
        }
    }
}

/// How a run of the command ended.
enum Ended {
    Exited(ExitStatus),
    /// Its stdout passed [`MAX_ANSWER_BYTES`]: it was killed.
    OverCap,
    /// Still running at the call's timeout: it was killed.
    Timeout,
}

/// The command's three pipes, non-blocking, served by one loop: the prompt written as the
/// command reads it, stdout kept up to one byte over the cap, stderr's end kept. No thread is
/// left blocked on a pipe that a process outside the command's group holds open.
struct Pipes {
    stdin: Option<std::process::ChildStdin>,
    stdout: Option<std::process::ChildStdout>,
    stderr: Option<std::process::ChildStderr>,
    input: Vec<u8>,
    written: usize,
    out: Vec<u8>,
    err: Vec<u8>,
}

impl Pipes {
    fn new(child: &mut Child, input: &str) -> std::io::Result<Pipes> {
        let pipes = Pipes {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            input: input.as_bytes().to_vec(),
            written: 0,
            out: Vec::new(),
            err: Vec::new(),
        };
        for fd in pipes.fds() {
            set_nonblocking(fd)?;
        }
        Ok(pipes)
    }

    fn fds(&self) -> Vec<RawFd> {
        let mut fds = Vec::new();
        fds.extend(self.stdin.as_ref().map(AsRawFd::as_raw_fd));
        fds.extend(self.stdout.as_ref().map(AsRawFd::as_raw_fd));
        fds.extend(self.stderr.as_ref().map(AsRawFd::as_raw_fd));
        fds
    }

    /// Serves the pipes until the command exits (and a moment more), its stdout passes the
    /// cap, or the timeout: then its group is killed. Stdout and stderr as read.
    fn run(
        &mut self,
        child: &mut Child,
        timeout: Duration,
    ) -> std::io::Result<(Ended, Vec<u8>, Vec<u8>)> {
        let started = Instant::now();
        let mut exited: Option<(ExitStatus, Instant)> = None;
        let ended = loop {
            self.pump()?;
            if self.out.len() > MAX_ANSWER_BYTES {
                if exited.is_none() {
                    kill_group(child.id());
                    child.wait()?;
                }
                break Ended::OverCap;
            }
            if exited.is_none()
                && let Some(status) = child.try_wait()?
            {
                // Whatever the command left running in its group goes with it; what it wrote
                // is in the pipes. Nothing more is written to it.
                kill_group(child.id());
                self.stdin = None;
                exited = Some((status, Instant::now()));
            }
            let now = Instant::now();
            let open = self.stdout.is_some() || self.stderr.is_some();
            match exited {
                Some((status, _)) if !open => break Ended::Exited(status),
                // A process that left the group (`setsid`) holds a pipe open: not waited for,
                // past a moment for what is in flight or the call's deadline.
                Some((status, at))
                    if now.duration_since(at) >= AFTER_EXIT
                        || now.duration_since(started) >= timeout =>
                {
                    break Ended::Exited(status);
                }
                None if now.duration_since(started) >= timeout => {
                    kill_group(child.id());
                    child.wait()?;
                    break Ended::Timeout;
                }
                _ => {}
            }
            let left = timeout.saturating_sub(now.duration_since(started));
            self.wait_ready(left.min(TICK));
        };
        // Closing the read ends: a process still holding the write ends gets EPIPE.
        self.stdout = None;
        self.stderr = None;
        self.stdin = None;
        Ok((
            ended,
            std::mem::take(&mut self.out),
            std::mem::take(&mut self.err),
        ))
    }

    /// Moves what can move without blocking: the prompt in, stdout and stderr out.
    fn pump(&mut self) -> std::io::Result<()> {
        if let Some(stdin) = &mut self.stdin {
            loop {
                if self.written == self.input.len() {
                    // All written: closing it is the command's end of file.
                    self.stdin = None;
                    break;
                }
                match stdin.write(&self.input[self.written..]) {
                    Ok(n) => self.written += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    // A command that exits without reading closes the pipe: not an error.
                    Err(_) => {
                        self.stdin = None;
                        break;
                    }
                }
            }
        }
        let mut chunk = vec![0u8; 64 << 10];
        if let Some(stdout) = &mut self.stdout
            && drain(stdout, &mut chunk, &mut self.out, MAX_ANSWER_BYTES + 1)?
        {
            self.stdout = None;
        }
        if let Some(stderr) = &mut self.stderr {
            let closed = drain(stderr, &mut chunk, &mut self.err, usize::MAX)?;
            // Only its end is quoted: keep that much, whatever the command writes.
            if self.err.len() > 2 * STDERR_KEPT {
                self.err.drain(..self.err.len() - STDERR_KEPT);
            }
            if closed {
                self.stderr = None;
            }
        }
        Ok(())
    }

    /// Sleeps until a pipe is ready or `limit` passes.
    fn wait_ready(&self, limit: Duration) {
        let mut polled: Vec<libc::pollfd> = Vec::new();
        if let Some(stdin) = &self.stdin {
            polled.push(libc::pollfd {
                fd: stdin.as_raw_fd(),
                events: libc::POLLOUT,
                revents: 0,
            });
        }
        for fd in [
            self.stdout.as_ref().map(AsRawFd::as_raw_fd),
            self.stderr.as_ref().map(AsRawFd::as_raw_fd),
        ]
        .into_iter()
        .flatten()
        {
            polled.push(libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let ms = i32::try_from(limit.as_millis()).unwrap_or(i32::MAX).max(1);
        // SAFETY: `polled` is a live array of `polled.len()` pollfd structs of open
        // descriptors this struct owns. Its result does not matter: the pipes are pumped next
        // whatever woke it (readiness, the limit, a signal).
        unsafe {
            libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, ms);
        }
    }
}

/// Reads what `pipe` has now into `into`, up to `limit` bytes in all. `true` at end of file or
/// at the limit (nothing more is read from it).
fn drain(
    pipe: &mut impl Read,
    chunk: &mut [u8],
    into: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<bool> {
    loop {
        if into.len() >= limit {
            return Ok(true);
        }
        let room = chunk.len().min(limit - into.len());
        match pipe.read(&mut chunk[..room]) {
            Ok(0) => return Ok(true),
            Ok(n) => into.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn set_nonblocking(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor we own; F_GETFL and F_SETFL touch only its flags.
    let ok = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) >= 0
    };
    if ok {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The last `limit` bytes of `text` at most, cut at a character boundary, with an ellipsis
/// before them when cut.
fn tail(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut start = text.len() - limit;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

fn kill_group(pid: u32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: a signal to the process group we created for the command.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Message;

    fn client(command: &str, timeout: Duration, max_retries: u32) -> ExecClient {
        ExecClient {
            spec: ModelSpec::new(Provider::Exec, command),
            policy: RetryPolicy {
                timeout,
                max_retries,
                backoff_initial: Duration::from_millis(5),
                backoff_max: Duration::from_millis(20),
            },
            scrubber: Scrubber::default(),
        }
    }

    fn request() -> CompletionRequest {
        CompletionRequest::new(vec![
            Message::system("be brief"),
            Message::user("say hi"),
            Message::assistant("hi"),
            Message::user("again"),
        ])
    }

    #[test]
    fn the_conversation_goes_in_on_stdin_and_the_answer_comes_out_verbatim() {
        let c = client("cat; printf 'done\\n'", Duration::from_secs(10), 0);
        let answer = c.complete(&request()).unwrap();
        assert_eq!(
            answer.text,
            "### ksearch system\nbe brief\n\n### ksearch user\nsay hi\n\n### ksearch assistant\nhi\n\n### ksearch user\nagain\ndone\n"
        );
        assert_eq!(answer.usage, Usage::default());
        assert_eq!(answer.finish_reason, None);
    }

    #[test]
    fn a_failing_command_fails_the_call_with_its_stderr_and_is_not_retried() {
        let dir = tempfile::tempdir().unwrap();
        let count = dir.path().join("n");
        let c = client(
            &format!(
                "echo x >> {}; echo 'no such model' >&2; exit 3",
                count.display()
            ),
            Duration::from_secs(10),
            3,
        );
        let e = c.complete(&request()).unwrap_err().to_string();
        assert!(
            e.contains("exited with status 3") && e.contains("no such model"),
            "{e}"
        );
        assert_eq!(fs_err::read_to_string(&count).unwrap().lines().count(), 1);
    }

    #[test]
    fn exit_status_75_is_retried() {
        let dir = tempfile::tempdir().unwrap();
        let count = dir.path().join("n");
        // Fails twice with 75, then answers.
        let c = client(
            &format!(
                "echo x >> {n}; [ $(wc -l < {n}) -ge 3 ] && echo ok || exit 75",
                n = count.display()
            ),
            Duration::from_secs(10),
            3,
        );
        let answer = c.complete(&request()).unwrap();
        assert_eq!(answer.text, "ok\n");
        assert_eq!(answer.http_attempts, 3);
        let c = client("exit 75", Duration::from_secs(10), 1);
        let e = c.complete(&request()).unwrap_err();
        assert!(
            matches!(e, LlmError::RetriesExhausted { attempts: 2, .. }),
            "{e}"
        );
    }

    #[test]
    fn a_command_that_never_reads_a_long_prompt_still_meets_its_timeout() {
        let c = client("sleep 30", Duration::from_millis(300), 0);
        let long = CompletionRequest::new(vec![Message::user("x".repeat(1 << 20))]);
        let started = Instant::now();
        let e = c.complete(&long).unwrap_err();
        assert!(e.is_timeout(), "{e}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_command_past_its_timeout_is_killed_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("late");
        let c = client(
            &format!("(sleep 2; touch {}) & sleep 30", marker.display()),
            Duration::from_millis(300),
            0,
        );
        let started = Instant::now();
        let e = c.complete(&request()).unwrap_err();
        assert!(e.is_timeout(), "{e}");
        assert!(started.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(2500));
        assert!(
            !marker.exists(),
            "a child of the command outlived the timeout"
        );
    }

    /// Past the cap the command is killed and its answer is an unusable one that says so
    /// (`exec:yes` had taken 3 GB in 2 s); the record keeps an excerpt.
    #[test]
    fn an_answer_over_the_cap_is_cut_and_marked_and_the_command_stopped() {
        let c = client(
            "printf 'start '; head -c 10000000 /dev/zero | tr '\\0' y",
            Duration::from_secs(60),
            0,
        );
        let started = Instant::now();
        let answer = c.complete(&request()).unwrap();
        assert_eq!(answer.finish_reason.as_deref(), Some(ANSWER_OVER_CAP));
        assert!(answer.is_truncated() && !answer.is_empty());
        assert!(
            answer.text.starts_with("start yyy"),
            "{}",
            &answer.text[..20]
        );
        assert!(answer.text.len() < 8192, "{}", answer.text.len());
        assert!(started.elapsed() < Duration::from_secs(20));
        // One that never stops writing is stopped at the cap, not at the timeout.
        let c = client("yes", Duration::from_secs(60), 0);
        let started = Instant::now();
        let answer = c.complete(&request()).unwrap();
        assert_eq!(answer.finish_reason.as_deref(), Some(ANSWER_OVER_CAP));
        assert!(started.elapsed() < Duration::from_secs(20));
        // At the cap exactly, the answer is whole.
        let c = client(
            &format!("head -c {MAX_ANSWER_BYTES} /dev/zero | tr '\\0' y"),
            Duration::from_secs(60),
            0,
        );
        let answer = c.complete(&request()).unwrap();
        assert_eq!(answer.text.len(), MAX_ANSWER_BYTES);
        assert_eq!(answer.finish_reason, None);
    }

    /// A process the command moved out of its group (`setsid`) that keeps stdout open is not
    /// waited for: the answer is what the command wrote before it exited.
    #[test]
    fn a_process_left_holding_the_pipes_is_not_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let c = client(
            &format!(
                "setsid sh -c 'echo $$ > {}; exec sleep 30' & echo ok",
                pid_file.display()
            ),
            Duration::from_secs(10),
            0,
        );
        let started = Instant::now();
        let answer = c.complete(&request());
        let elapsed = started.elapsed();
        // The daemon outlives the call (it left the group): end it.
        for _ in 0..100 {
            if let Ok(pid) = fs_err::read_to_string(&pid_file)
                .unwrap_or_default()
                .trim()
                .parse::<libc::pid_t>()
            {
                // SAFETY: a signal to the process this test started.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(answer.unwrap().text, "ok\n");
        assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    }

    /// Nor is one that keeps writing: reading stops soon after the command exits. (Its writer
    /// stops by itself after some 30 s, so that a regression fails instead of hanging.)
    #[test]
    fn a_process_outside_the_group_that_writes_on_is_not_read_for_long() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let c = client(
            &format!(
                "setsid sh -c 'echo $$ > {}; for i in $(seq 3000); do echo more; sleep 0.01; done' & echo ok",
                pid_file.display()
            ),
            Duration::from_secs(2),
            0,
        );
        let started = Instant::now();
        let answer = c.complete(&request());
        let elapsed = started.elapsed();
        if let Ok(pid) = fs_err::read_to_string(&pid_file)
            .unwrap_or_default()
            .trim()
            .parse::<libc::pid_t>()
        {
            // SAFETY: a signal to the process this test started.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        assert!(answer.unwrap().text.starts_with("ok\n"));
        assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    }

    /// A byte that is not UTF-8 is read as U+FFFD: the answer stays an answer (it had ended
    /// the session).
    #[test]
    fn an_answer_that_is_not_utf8_is_read_lossily() {
        let c = client("printf 'ok \\377\\n'", Duration::from_secs(10), 0);
        assert_eq!(c.complete(&request()).unwrap().text, "ok \u{FFFD}\n");
    }

    /// However much a failing command writes on stderr, the error quotes its end, and holds
    /// no more than that.
    #[test]
    fn a_failing_command_s_error_quotes_the_end_of_a_long_stderr() {
        let c = client(
            "head -c 3000000 /dev/zero | tr '\\0' x >&2; echo ' the end' >&2; exit 2",
            Duration::from_secs(30),
            0,
        );
        let e = c.complete(&request()).unwrap_err().to_string();
        assert!(e.contains("status 2") && e.ends_with("xx the end"), "{e}");
        assert!(e.len() < STDERR_LIMIT + 200, "{}", e.len());
    }
}
