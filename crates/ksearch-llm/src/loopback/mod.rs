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
//! use ksearch_llm::{ClientSettings, CompletionRequest, Message, ModelSpec, Secret, Usage, client};
//!
//! let usage = Usage { input_tokens: 12, output_tokens: 5, ..Usage::default() };
//! let server = ScriptedServer::start(vec![Reply::ok(loopback::anthropic_body("hello", &usage))]);
//! let settings = ClientSettings {
//!     base_url: Some(server.url()),
//!     api_key: Some(Secret::new("test-key")),
//!     ..ClientSettings::default()
//! };
//! let llm = client(&"anthropic:claude-haiku-4-5".parse::<ModelSpec>()?, settings)?;
//! let answer = llm.complete(&CompletionRequest::new(vec![Message::user("hi")]))?;
//! assert_eq!(answer.text, "hello");
//! assert_eq!(server.requests()[0].path, "/v1/messages");
//! # Ok::<(), ksearch_llm::LlmError>(())
//! ```

mod bodies;
mod http;
mod reply;
mod request;
mod server;
pub mod strict;

pub use bodies::{
    LOOPBACK_MODEL, anthropic_body, error_body, gemini_body, openai_chat_body, responses_body,
    success_body,
};
pub use reply::{Reply, ReplyFn};
pub use request::RecordedRequest;
pub use server::ScriptedServer;
