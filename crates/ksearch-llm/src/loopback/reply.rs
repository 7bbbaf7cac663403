//! What the server answers: a [`Reply`] of the script, or one computed from the request.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use super::bodies::{error_body, success_body};
use super::request::RecordedRequest;
use crate::spec::Provider;
use crate::types::Usage;

/// A function of the request that decides the reply.
pub type ReplyFn = dyn Fn(&RecordedRequest) -> Reply + Send + Sync;

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
