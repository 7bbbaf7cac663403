//! The server: one thread accepting, one thread per connection, each request answered from the
//! script (or refused under the provider's rules first).

use std::collections::VecDeque;
use std::fmt;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::json;

use super::http::{read_request, write_response};
use super::reply::{Reply, ReplyFn};
use super::request::RecordedRequest;
use super::strict;

struct State {
    /// Refuse what the provider refuses ([`strict`]) before the script answers.
    strict: bool,
    rejections: Mutex<Vec<strict::Rejection>>,
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
    /// A request the provider would refuse ([`strict::check`]) is answered with the provider's
    /// 400 instead, without using a reply of the script; see [`ScriptedServer::rejections`].
    pub fn start(script: Vec<Reply>) -> ScriptedServer {
        ScriptedServer::spawn(script, None, true)
    }

    /// [`ScriptedServer::start`] without the provider's rules: every request gets the script's
    /// reply (for tests of what a client does with an answer, whatever it asked).
    pub fn start_lenient(script: Vec<Reply>) -> ScriptedServer {
        ScriptedServer::spawn(script, None, false)
    }

    /// Answers every request with `f` (for end-to-end tests that answer from the prompt).
    ///
    /// # Panics
    /// As [`ScriptedServer::start`].
    pub fn serve(f: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static) -> ScriptedServer {
        ScriptedServer::spawn(Vec::new(), Some(Box::new(f)), true)
    }

    /// [`ScriptedServer::serve`] without the provider's rules.
    pub fn serve_lenient(
        f: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    ) -> ScriptedServer {
        ScriptedServer::spawn(Vec::new(), Some(Box::new(f)), false)
    }

    fn spawn(script: Vec<Reply>, fallback: Option<Box<ReplyFn>>, strict: bool) -> ScriptedServer {
        let listener = match TcpListener::bind("127.0.0.1:0") {
            Ok(listener) => listener,
            Err(e) => panic!("loopback server: cannot bind 127.0.0.1:0: {e}"),
        };
        let addr = match listener.local_addr() {
            Ok(addr) => addr,
            Err(e) => panic!("loopback server: no local address: {e}"),
        };
        let state = Arc::new(State {
            strict,
            rejections: Mutex::new(Vec::new()),
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

    /// The requests refused under the provider's rules, oldest first (each also in
    /// [`ScriptedServer::requests`]).
    pub fn rejections(&self) -> Vec<strict::Rejection> {
        lock(&self.state.rejections).clone()
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
    if state.strict
        && let Some(rejection) = strict::check(&request)
    {
        let reply = rejection.reply();
        lock(&state.rejections).push(rejection);
        if let Reply::Json {
            status,
            headers,
            body,
        } = reply
        {
            write_response(stream, status, &headers, &body.to_string());
        }
        return;
    }
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
