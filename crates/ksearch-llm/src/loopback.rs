//! Test double: a scripted HTTP/1.1 server on 127.0.0.1 that speaks each provider's wire format.
//!
//! Std only: a `TcpListener` on an ephemeral port, one thread accepting, one thread per
//! connection. Each request is recorded (method, path, headers, JSON body) and answered by the
//! next [`Reply`] of the script, or by a function of the request. Every answer closes its
//! connection. When the script runs out the server answers 418 with a message saying so (not
//! retryable, so a test with too short a script fails fast and clearly).
//!
//! ```
//! use ksearch_llm::loopback::{self, Reply, ScriptedServer};
//! use ksearch_llm::{ClientConfig, CompletionRequest, Message, ModelSpec, Secret, Usage, client};
//!
//! let usage = Usage { input_tokens: 12, output_tokens: 5, ..Usage::default() };
//! let server = ScriptedServer::start(vec![Reply::ok(loopback::anthropic_body("hello", &usage))]);
//! let config = ClientConfig {
//!     base_url: Some(server.url()),
//!     api_key: Some(Secret::new("test-key")),
//!     ..ClientConfig::default()
//! };
//! let llm = client(&"anthropic:claude-haiku-4-5".parse::<ModelSpec>()?, config)?;
//! let answer = llm.complete(&CompletionRequest::new(vec![Message::user("hi")]))?;
//! assert_eq!(answer.text, "hello");
//! assert_eq!(server.requests()[0].path, "/v1/messages");
//! # Ok::<(), ksearch_llm::LlmError>(())
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::spec::Provider;
use crate::types::Usage;

/// The model name the canonical bodies report.
pub const LOOPBACK_MODEL: &str = "loopback-model";

/// Longest header block accepted.
const MAX_HEAD: usize = 1 << 20;

/// A function of the request that decides the reply.
pub type ReplyFn = dyn Fn(&RecordedRequest) -> Reply + Send + Sync;

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// `POST`, ...
    pub method: String,
    /// Path and query, e.g. `/v1/messages`.
    pub path: String,
    /// Headers in arrival order, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body as JSON; `Null` when empty, a JSON string when it is not JSON.
    pub body: Value,
}

impl RecordedRequest {
    /// The value of header `name` (any case), the first when repeated.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The text of the last user message, whatever the wire format (Chat `messages`, Responses
    /// `input`, Gemini `contents`, Anthropic `messages`): what an end-to-end test answers to.
    pub fn last_user_text(&self) -> Option<String> {
        let text_of = |content: &Value| -> Option<String> {
            match content {
                Value::String(s) => Some(s.clone()),
                Value::Array(parts) => Some(
                    parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect(),
                ),
                _ => None,
            }
        };
        if let Some(contents) = self.body.get("contents").and_then(Value::as_array) {
            return contents
                .iter()
                .rev()
                .find(|c| c.get("role").and_then(Value::as_str) == Some("user"))
                .and_then(|c| c.get("parts"))
                .and_then(text_of);
        }
        let items = match self.body.get("input") {
            Some(Value::String(s)) => return Some(s.clone()),
            Some(Value::Array(items)) => items,
            _ => self.body.get("messages").and_then(Value::as_array)?,
        };
        items
            .iter()
            .rev()
            .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            .and_then(|m| m.get("content"))
            .and_then(text_of)
    }
}

/// What the server does with one request.
pub enum Reply {
    /// A JSON body with a status and extra headers.
    Json {
        /// HTTP status.
        status: u16,
        /// Extra headers (`Retry-After`, ...).
        headers: Vec<(String, String)>,
        /// The body.
        body: Value,
    },
    /// Any body text (malformed JSON, HTML from a proxy, ...), sent as `application/json`.
    Raw {
        /// HTTP status.
        status: u16,
        /// Extra headers.
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
    /// Read the request, then say nothing for this long (longer than the client's timeout),
    /// then close the connection.
    Hang(Duration),
    /// Read the request, then close the connection without answering.
    Close,
    /// Decide from the request.
    Dynamic(Box<ReplyFn>),
}

impl Reply {
    /// 200 with `body`.
    pub fn ok(body: Value) -> Reply {
        Reply::json(200, body)
    }

    /// `status` with a JSON `body`.
    pub fn json(status: u16, body: Value) -> Reply {
        Reply::Json {
            status,
            headers: Vec::new(),
            body,
        }
    }

    /// `status` with `body` as is.
    pub fn raw(status: u16, body: impl Into<String>) -> Reply {
        Reply::Raw {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// No answer for `duration`.
    pub fn hang(duration: Duration) -> Reply {
        Reply::Hang(duration)
    }

    /// The reply `f` computes from the request.
    pub fn from_fn(f: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static) -> Reply {
        Reply::Dynamic(Box::new(f))
    }

    /// 200 with `provider`'s canonical success body for `text` and `usage`.
    pub fn success(provider: Provider, text: &str, usage: &Usage) -> Reply {
        Reply::ok(success_body(provider, text, usage))
    }

    /// `status` with `provider`'s error body carrying `message`.
    pub fn provider_error(provider: Provider, status: u16, message: &str) -> Reply {
        Reply::json(status, error_body(provider, status, message))
    }

    /// Adds a header (for `Json` and `Raw`; ignored otherwise).
    #[must_use]
    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        if let Reply::Json { headers, .. } | Reply::Raw { headers, .. } = &mut self {
            headers.push((name.to_string(), value.to_string()));
        }
        self
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Json {
                status,
                headers,
                body,
            } => f
                .debug_struct("Json")
                .field("status", status)
                .field("headers", headers)
                .field("body", body)
                .finish(),
            Reply::Raw {
                status,
                headers,
                body,
            } => f
                .debug_struct("Raw")
                .field("status", status)
                .field("headers", headers)
                .field("body", body)
                .finish(),
            Reply::Hang(d) => f.debug_tuple("Hang").field(d).finish(),
            Reply::Close => f.write_str("Close"),
            Reply::Dynamic(_) => f.write_str("Dynamic(..)"),
        }
    }
}

struct State {
    script: Mutex<VecDeque<Reply>>,
    scripted: usize,
    fallback: Option<Box<ReplyFn>>,
    requests: Mutex<Vec<RecordedRequest>>,
    shutdown: AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A loopback HTTP server answering from a script. Stops when dropped.
pub struct ScriptedServer {
    addr: SocketAddr,
    state: Arc<State>,
    accept: Option<JoinHandle<()>>,
}

impl fmt::Debug for ScriptedServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedServer")
            .field("addr", &self.addr)
            .field("requests", &lock(&self.state.requests).len())
            .finish_non_exhaustive()
    }
}

impl ScriptedServer {
    /// Serves `script`, one reply per request, in order.
    ///
    /// # Panics
    /// When no port on 127.0.0.1 can be bound (a test environment problem).
    pub fn start(script: Vec<Reply>) -> ScriptedServer {
        ScriptedServer::spawn(script, None)
    }

    /// Answers every request with `f` (for end-to-end tests that answer from the prompt).
    ///
    /// # Panics
    /// As [`ScriptedServer::start`].
    pub fn serve(f: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static) -> ScriptedServer {
        ScriptedServer::spawn(Vec::new(), Some(Box::new(f)))
    }

    fn spawn(script: Vec<Reply>, fallback: Option<Box<ReplyFn>>) -> ScriptedServer {
        let listener = match TcpListener::bind("127.0.0.1:0") {
            Ok(listener) => listener,
            Err(e) => panic!("loopback server: cannot bind 127.0.0.1:0: {e}"),
        };
        let addr = match listener.local_addr() {
            Ok(addr) => addr,
            Err(e) => panic!("loopback server: no local address: {e}"),
        };
        let state = Arc::new(State {
            scripted: script.len(),
            script: Mutex::new(script.into()),
            fallback,
            requests: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
        });
        let accept_state = Arc::clone(&state);
        let accept = std::thread::Builder::new()
            .name(format!("loopback-{}", addr.port()))
            .spawn(move || accept_loop(&listener, &accept_state))
            .ok();
        ScriptedServer {
            addr,
            state,
            accept,
        }
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state.requests).clone()
    }

    /// How many requests were received.
    pub fn request_count(&self) -> usize {
        lock(&self.state.requests).len()
    }

    /// Replies of the script not used yet.
    pub fn remaining(&self) -> usize {
        lock(&self.state.script).len()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.state.shutdown.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, state: &Arc<State>) {
    for stream in listener.incoming() {
        if state.shutdown.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let state = Arc::clone(state);
        let _ = std::thread::Builder::new()
            .name("loopback-conn".to_string())
            .spawn(move || handle_connection(stream, &state));
    }
}

fn handle_connection(stream: TcpStream, state: &State) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Some(request) = read_request(&stream) else {
        return;
    };
    lock(&state.requests).push(request.clone());
    let next = lock(&state.script).pop_front();
    let mut reply = match (next, &state.fallback) {
        (Some(reply), _) => reply,
        (None, Some(f)) => f(&request),
        (None, None) => Reply::json(
            418,
            json!({"error": {"message": format!(
                "ksearch-llm loopback server: script exhausted ({} replies scripted, this is request {})",
                state.scripted,
                lock(&state.requests).len()
            )}}),
        ),
    };
    while let Reply::Dynamic(f) = reply {
        reply = f(&request);
    }
    match reply {
        Reply::Json {
            status,
            headers,
            body,
        } => write_response(stream, status, &headers, &body.to_string()),
        Reply::Raw {
            status,
            headers,
            body,
        } => write_response(stream, status, &headers, &body),
        Reply::Hang(duration) => {
            let until = Instant::now() + duration;
            while Instant::now() < until && !state.shutdown.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = stream.shutdown(Shutdown::Both);
        }
        Reply::Close | Reply::Dynamic(_) => {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

fn read_request(stream: &TcpStream) -> Option<RecordedRequest> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    let mut head_size = line.len();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        head_size += header.len();
        if head_size > MAX_HEAD {
            return None;
        }
        let header = header.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let body = if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        read_chunked(&mut reader)?
    } else {
        let length: usize = find("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
        body
    };
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()))
    };
    Some(RecordedRequest {
        method,
        path,
        headers,
        body,
    })
}

fn read_chunked(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size_line = String::new();
        reader.read_line(&mut size_line).ok()?;
        let size_text = size_line.trim().split(';').next()?;
        let size = usize::from_str_radix(size_text, 16).ok()?;
        if size == 0 {
            // Trailers, up to the blank line.
            loop {
                let mut trailer = String::new();
                if reader.read_line(&mut trailer).ok()? == 0 || trailer.trim().is_empty() {
                    return Some(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..]).ok()?;
        let mut crlf = [0; 2];
        reader.read_exact(&mut crlf).ok()?;
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        418 => "I'm a teapot",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

fn write_response(mut stream: TcpStream, status: u16, headers: &[(String, String)], body: &str) {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        reason(status),
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Write);
    // Let the client read everything before the socket closes.
    let mut sink = [0u8; 512];
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
}

/// The canonical success body of `provider` for `text` and `usage`.
pub fn success_body(provider: Provider, text: &str, usage: &Usage) -> Value {
    match provider {
        Provider::OpenAiChat => openai_chat_body(text, usage),
        Provider::OpenAiResponses => responses_body(text, usage),
        Provider::Gemini => gemini_body(text, usage),
        Provider::Anthropic => anthropic_body(text, usage),
        // A command answers with plain text, not over HTTP.
        Provider::Exec | Provider::Manual => Value::String(text.to_string()),
    }
}

/// A Chat Completions answer (`chat.completion`), every usage detail filled in.
pub fn openai_chat_body(text: &str, usage: &Usage) -> Value {
    json!({
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": 1_764_460_800,
        "model": LOOPBACK_MODEL,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": null, "annotations": []},
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens(),
            "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": usage.reasoning_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0
            }
        },
        "service_tier": "default",
        "system_fingerprint": null
    })
}

/// A Responses answer (`response`, status `completed`): a reasoning item when reasoning tokens
/// were spent, then the message item with one `output_text` part.
pub fn responses_body(text: &str, usage: &Usage) -> Value {
    let mut output = Vec::new();
    if usage.reasoning_tokens > 0 {
        output.push(json!({"id": "rs_loopback", "type": "reasoning", "summary": []}));
    }
    output.push(json!({
        "id": "msg_loopback",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    }));
    json!({
        "id": "resp_loopback",
        "object": "response",
        "created_at": 1_764_460_800,
        "status": "completed",
        "error": null,
        "incomplete_details": null,
        "instructions": null,
        "model": LOOPBACK_MODEL,
        "output": output,
        "parallel_tool_calls": true,
        "store": false,
        "usage": {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
            "total_tokens": usage.total_tokens()
        }
    })
}

/// A Gemini `GenerateContentResponse`. `usage.output_tokens` includes the thoughts, so
/// `candidatesTokenCount` is `output - reasoning`; zero counts are omitted, as Gemini does.
pub fn gemini_body(text: &str, usage: &Usage) -> Value {
    let mut metadata = serde_json::Map::new();
    metadata.insert("promptTokenCount".into(), json!(usage.input_tokens));
    metadata.insert(
        "candidatesTokenCount".into(),
        json!(usage.output_tokens.saturating_sub(usage.reasoning_tokens)),
    );
    metadata.insert("totalTokenCount".into(), json!(usage.total_tokens()));
    if usage.cached_input_tokens > 0 {
        metadata.insert(
            "cachedContentTokenCount".into(),
            json!(usage.cached_input_tokens),
        );
    }
    if usage.reasoning_tokens > 0 {
        metadata.insert("thoughtsTokenCount".into(), json!(usage.reasoning_tokens));
    }
    metadata.insert(
        "promptTokensDetails".into(),
        json!([{"modality": "TEXT", "tokenCount": usage.input_tokens}]),
    );
    json!({
        "candidates": [{
            "content": {"parts": [{"text": text}], "role": "model"},
            "finishReason": "STOP",
            "index": 0
        }],
        "usageMetadata": metadata,
        "modelVersion": LOOPBACK_MODEL,
        "responseId": "loopback"
    })
}

/// An Anthropic `message`. Anthropic's `input_tokens` excludes cache reads, so it is
/// `input - cached`, with `cache_read_input_tokens` = cached. Anthropic reports no reasoning
/// count: `usage.reasoning_tokens` is not represented.
pub fn anthropic_body(text: &str, usage: &Usage) -> Value {
    json!({
        "id": "msg_loopback",
        "type": "message",
        "role": "assistant",
        "model": LOOPBACK_MODEL,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {
            "input_tokens": usage.input_tokens.saturating_sub(usage.cached_input_tokens),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": usage.cached_input_tokens,
            "output_tokens": usage.output_tokens,
            "service_tier": "standard"
        }
    })
}

/// `provider`'s error body for `status` and `message` (OpenAI `{error: {message, type, code}}`,
/// Anthropic `{type: "error", error: {type, message}}`, Gemini `{error: {code, message,
/// status}}`).
pub fn error_body(provider: Provider, status: u16, message: &str) -> Value {
    match provider {
        Provider::OpenAiChat | Provider::OpenAiResponses => {
            let (kind, code) = match status {
                401 => ("invalid_request_error", json!("invalid_api_key")),
                404 => ("invalid_request_error", json!("model_not_found")),
                429 => ("requests", json!("rate_limit_exceeded")),
                500..=599 => ("server_error", Value::Null),
                _ => ("invalid_request_error", Value::Null),
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
        Provider::Anthropic => {
            let kind = match status {
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                500..=599 => "api_error",
                _ => "invalid_request_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_loopback"})
        }
        Provider::Gemini => {
            let grpc = match status {
                400 => "INVALID_ARGUMENT",
                401 => "UNAUTHENTICATED",
                403 => "PERMISSION_DENIED",
                404 => "NOT_FOUND",
                429 => "RESOURCE_EXHAUSTED",
                503 => "UNAVAILABLE",
                504 => "DEADLINE_EXCEEDED",
                _ => "INTERNAL",
            };
            json!({"error": {"code": status, "message": message, "status": grpc}})
        }
        Provider::Exec | Provider::Manual => json!({"error": message}),
    }
}
