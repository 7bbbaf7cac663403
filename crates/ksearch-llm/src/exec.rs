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

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::client::LlmClient;
use crate::error::{Failure, LlmError};
use crate::http::{RetryPolicy, retry_delay, truncate};
use crate::secret::Scrubber;
use crate::spec::{ModelSpec, Provider};
use crate::types::{Completion, CompletionRequest, MessageRole, Usage};

/// The exit status that asks for another attempt (`EX_TEMPFAIL` of sysexits.h).
pub const RETRY_EXIT_CODE: i32 = 75;

/// Most of the command's stderr quoted in an error.
const STDERR_LIMIT: usize = 2000;

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
                Ok(text) => {
                    return Ok(Completion {
                        text,
                        usage: Usage::default(),
                        model: self.spec.model.clone(),
                        finish_reason: None,
                        http_attempts: attempt,
                    });
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
    /// One run. Outer error: give up. Inner error: worth another attempt.
    fn run_once(&self, input: &str) -> Result<Result<String, Failure>, LlmError> {
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
        // Readers on their own threads, so that neither pipe fills up while the other waits.
        let mut stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let out = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stdout.read_to_end(&mut buf);
            buf
        });
        let err = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stderr.read_to_end(&mut buf);
            buf
        });
        // Written on a thread too: a command that never reads its input must still meet its
        // timeout (one that exits without reading closes the pipe: not an error).
        if let Some(mut stdin) = child.stdin.take() {
            let input = input.to_owned();
            std::thread::spawn(move || {
                let _ = stdin.write_all(input.as_bytes());
            });
        }
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if started.elapsed() >= self.policy.timeout => {
                    kill_group(child.id());
                    let _ = child.wait();
                    return Ok(Err(Failure::Timeout {
                        after: self.policy.timeout,
                    }));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(fail(format!("cannot wait for it: {e}"))),
            }
        };
        // Whatever the command left running in its group goes with it.
        kill_group(child.id());
        let stdout = out.join().unwrap_or_default();
        let stderr = self
            .scrubber
            .scrub(&String::from_utf8_lossy(&err.join().unwrap_or_default()));
        let stderr_end = truncate(stderr.trim(), STDERR_LIMIT);
        match status.code() {
            Some(0) => String::from_utf8(stdout)
                .map(|answer| Ok(self.scrubber.scrub(&answer)))
                .map_err(|_| fail("its answer on stdout is not UTF-8".into())),
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
}
