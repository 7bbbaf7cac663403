//! The manual model (`manual`): each call becomes files in a directory of the run, and a person
//! or a coding agent answers them.
//!
//! For call N (numbered from 1 in the run) the client writes:
//!
//! - `call-000N.prompt.md`: the whole prompt (call, role, purpose, round, the expected answer,
//!   then every message under a `### ksearch ROLE` line, as `exec:` commands read it);
//! - `call-000N.json`: the same facts as data ([`ManualCall`]), for tools.
//!
//! and fails the call with [`LlmError::Pending`], which the engine turns into a pause. The
//! answer goes in `call-000N.answer.md`. When the same request is asked again (the run
//! resumed), the client finds its call by the request's key and returns the answer, marking
//! the call taken (`call-000N.taken`) so that a later identical request gets a call of its
//! own. An empty answer file counts as no answer yet. Tokens are estimated at four characters
//! a token.

use std::io;
use std::path::{Path, PathBuf};

use fs_err as fs;
use serde::{Deserialize, Serialize};

use crate::client::LlmClient;
use crate::error::LlmError;
use crate::exec::prompt_text;
use crate::spec::{ModelSpec, Provider};
use crate::types::{Completion, CompletionRequest, Usage};

/// The prompt file's frame.
const PROMPT_TEMPLATE: &str = include_str!("../data/manual_prompt.md");

/// What a call is for, as the one making it knows.
#[derive(Debug, Clone, Copy)]
pub struct CallAbout<'a> {
    /// `reasoning` or `codegen`.
    pub role: &'a str,
    /// `world_model`, `implement`, `refine/repair`, ...
    pub purpose: &'a str,
    /// The round the run is at.
    pub round: u64,
    /// The answer's expected form, in words.
    pub expected: &'a str,
    /// A key naming the request exactly (the same request, the same key).
    pub key: &'a str,
}

/// One manual call, as recorded in `call-000N.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManualCall {
    /// Its number in the run, from 1.
    pub call: u64,
    /// The request's key.
    pub key: String,
    pub role: String,
    pub purpose: String,
    pub round: u64,
    /// The answer's expected form, in words.
    pub expected: String,
    /// The file holding the whole prompt.
    pub prompt: PathBuf,
    /// The file the answer goes in.
    pub answer: PathBuf,
}

impl ManualCall {
    /// The answer, when its file holds one (an empty file is none yet).
    pub fn answer_text(&self) -> io::Result<Option<String>> {
        match fs::read_to_string(&self.answer) {
            Ok(text) if text.trim().is_empty() => Ok(None),
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Puts `text` in the answer file, whole or not at all (a reader never sees half of it).
    pub fn write_answer(&self, text: &str) -> io::Result<()> {
        write_atomic(&self.answer, text)
    }

    fn taken_marker(&self) -> PathBuf {
        self.answer
            .with_file_name(format!("{}.taken", stem(self.call)))
    }

    /// Whether a run has read its answer.
    pub fn is_taken(&self) -> bool {
        self.taken_marker().exists()
    }
}

fn stem(call: u64) -> String {
    format!("call-{call:04}")
}

/// Every call recorded in `dir`, oldest first.
fn calls(dir: &Path) -> io::Result<Vec<ManualCall>> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let is_call = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("call-") && n.ends_with(".json"));
        if !is_call {
            continue;
        }
        let text = fs::read_to_string(&path)?;
        let mut call: ManualCall = serde_json::from_str(&text).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })?;
        // Stored as bare file names, so a run directory can move (to another machine, say).
        for file in [&mut call.prompt, &mut call.answer] {
            if let Some(name) = file.file_name() {
                *file = dir.join(name);
            }
        }
        out.push(call);
    }
    out.sort_by_key(|c| c.call);
    Ok(out)
}

/// The call of `dir` that waits for an answer: the newest call, while it has none. (An older
/// call left unanswered is not waited for: the run asked something else since.)
pub fn pending_call(dir: &Path) -> io::Result<Option<ManualCall>> {
    let Some(call) = calls(dir)?.pop() else {
        return Ok(None);
    };
    if call.is_taken() || call.answer_text()?.is_some() {
        return Ok(None);
    }
    Ok(Some(call))
}

/// Writes `text` to `path` through a temporary file and a rename: a reader sees all or nothing.
fn write_atomic(path: &Path, text: &str) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, text)?;
    fs::rename(&tmp, path)
}

/// The manual model: see the module docs.
#[derive(Debug)]
pub struct ManualClient {
    spec: ModelSpec,
    dir: PathBuf,
}

impl ManualClient {
    /// A client writing its calls in `dir` (created when the first call is made).
    pub fn new(spec: ModelSpec, dir: impl Into<PathBuf>) -> ManualClient {
        ManualClient {
            spec,
            dir: dir.into(),
        }
    }

    fn io_error(&self, what: &str, e: &io::Error) -> LlmError {
        LlmError::Settings {
            provider: Provider::Manual,
            detail: format!("cannot {what} in {}: {e}", self.dir.display()),
        }
    }

    fn new_call(
        &self,
        request: &CompletionRequest,
        about: &CallAbout<'_>,
        number: u64,
    ) -> io::Result<ManualCall> {
        fs::create_dir_all(&self.dir)?;
        let stem = stem(number);
        let call = ManualCall {
            call: number,
            key: about.key.to_owned(),
            role: about.role.to_owned(),
            purpose: about.purpose.to_owned(),
            round: about.round,
            expected: about.expected.to_owned(),
            prompt: self.dir.join(format!("{stem}.prompt.md")),
            answer: self.dir.join(format!("{stem}.answer.md")),
        };
        let prompt = PROMPT_TEMPLATE
            .replace("{{call}}", &number.to_string())
            .replace("{{role}}", about.role)
            .replace("{{purpose}}", about.purpose)
            .replace("{{round}}", &about.round.to_string())
            .replace("{{model}}", &self.spec.to_string())
            .replace("{{answer}}", &call.answer.display().to_string())
            .replace("{{expected}}", about.expected)
            .replace("{{conversation}}", &prompt_text(request));
        write_atomic(&call.prompt, &prompt)?;
        let stored = ManualCall {
            prompt: format!("{stem}.prompt.md").into(),
            answer: format!("{stem}.answer.md").into(),
            ..call.clone()
        };
        let json = serde_json::to_string_pretty(&stored).map_err(io::Error::other)?;
        // The record last: a call is listed only once its prompt is whole.
        write_atomic(&self.dir.join(format!("{stem}.json")), &json)?;
        Ok(call)
    }
}

/// About four characters a token: an estimate, marked as one wherever it is shown.
fn estimate_tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

impl LlmClient for ManualClient {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let key = serde_json::to_string(request).unwrap_or_default();
        self.complete_about(
            request,
            &CallAbout {
                role: "model",
                purpose: "call",
                round: 0,
                expected: "an answer",
                key: &key,
            },
        )
    }

    fn complete_about(
        &self,
        request: &CompletionRequest,
        about: &CallAbout<'_>,
    ) -> Result<Completion, LlmError> {
        let known = calls(&self.dir).map_err(|e| self.io_error("read the calls", &e))?;
        let open = known
            .iter()
            .find(|c| c.key == about.key && !c.is_taken())
            .cloned();
        let call = match open {
            Some(call) => call,
            None => {
                let number = known.last().map_or(1, |c| c.call + 1);
                self.new_call(request, about, number)
                    .map_err(|e| self.io_error("write the prompt", &e))?
            }
        };
        let Some(text) = call
            .answer_text()
            .map_err(|e| self.io_error("read the answer", &e))?
        else {
            return Err(LlmError::Pending {
                call: call.call,
                prompt: call.prompt,
                answer: call.answer,
            });
        };
        fs::write(call.taken_marker(), b"")
            .map_err(|e| self.io_error("mark the call taken", &e))?;
        let prompt_chars: usize = request.messages.iter().map(|m| m.content.len()).sum();
        Ok(Completion {
            usage: Usage {
                input_tokens: estimate_tokens(prompt_chars),
                output_tokens: estimate_tokens(text.len()),
                cached_input_tokens: 0,
                reasoning_tokens: 0,
                cache_write_tokens: 0,
            },
            text,
            model: self.spec.to_string(),
            finish_reason: None,
            http_attempts: 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Message;

    fn about<'a>(key: &'a str) -> CallAbout<'a> {
        CallAbout {
            role: "codegen",
            purpose: "implement",
            round: 3,
            expected: "the complete source file in ONE fenced code block",
            key,
        }
    }

    fn request() -> CompletionRequest {
        CompletionRequest::new(vec![
            Message::system("You write C kernels."),
            Message::user("Unroll the loop."),
        ])
    }

    #[test]
    fn a_call_waits_for_its_answer_file_then_returns_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let client = ManualClient::new("manual".parse().unwrap(), dir.path());
        let e = client.complete_about(&request(), &about("k1")).unwrap_err();
        let LlmError::Pending {
            call,
            prompt,
            answer,
        } = e
        else {
            panic!("{e}")
        };
        assert_eq!(call, 1);
        let text = fs::read_to_string(&prompt).unwrap();
        for part in [
            "role: codegen",
            "purpose: implement",
            "round: 3",
            "ONE fenced code block",
            "### ksearch system\nYou write C kernels.",
            "### ksearch user\nUnroll the loop.",
            &answer.display().to_string(),
        ] {
            assert!(text.contains(part), "{part} missing from\n{text}");
        }
        assert_eq!(pending_call(dir.path()).unwrap().unwrap().call, 1);
        // Asked again before an answer (an empty file is none): the same call, no new file.
        fs::write(&answer, "\n").unwrap();
        let again = client.complete_about(&request(), &about("k1")).unwrap_err();
        assert!(
            matches!(again, LlmError::Pending { call: 1, .. }),
            "{again}"
        );

        fs::write(&answer, "```c\nint x;\n```\n").unwrap();
        let got = client.complete_about(&request(), &about("k1")).unwrap();
        assert_eq!(got.text, "```c\nint x;\n```\n");
        assert_eq!(got.usage.output_tokens, 4);
        assert_eq!(got.usage.input_tokens, 9);
        assert_eq!(pending_call(dir.path()).unwrap(), None);
        // The same request once more is a new call: an answer is used once.
        let e = client.complete_about(&request(), &about("k1")).unwrap_err();
        assert!(matches!(e, LlmError::Pending { call: 2, .. }), "{e}");
        // Another request while call 2 waits: a call of its own.
        let e = client.complete_about(&request(), &about("k2")).unwrap_err();
        assert!(matches!(e, LlmError::Pending { call: 3, .. }), "{e}");
        assert_eq!(pending_call(dir.path()).unwrap().unwrap().call, 3);
        // Call 3 answered: nothing waits, though call 2 never got an answer.
        let third = pending_call(dir.path()).unwrap().unwrap();
        third.write_answer("three").unwrap();
        assert_eq!(pending_call(dir.path()).unwrap(), None);
    }

    #[test]
    fn the_calls_move_with_their_directory() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("here");
        let client = ManualClient::new("manual".parse().unwrap(), &old);
        client.complete_about(&request(), &about("k1")).unwrap_err();
        let new = dir.path().join("there");
        fs::rename(&old, &new).unwrap();
        let call = pending_call(&new).unwrap().unwrap();
        assert_eq!(call.answer, new.join("call-0001.answer.md"));
        assert_eq!(call.prompt, new.join("call-0001.prompt.md"));
        call.write_answer("moved").unwrap();
        let client = ManualClient::new("manual".parse().unwrap(), &new);
        let got = client.complete_about(&request(), &about("k1")).unwrap();
        assert_eq!(got.text, "moved");
    }
}
