//! A minimal Chrome DevTools Protocol client for headless Chromium, over
//! `--remote-debugging-pipe` (JSON messages separated by NUL bytes on the browser's fds 3 and
//! 4), so no websocket library is needed.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The Chromium to drive: `$KSEARCH_CHROMIUM`, else the first of the usual names on `PATH`.
pub(crate) fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KSEARCH_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in [
            "chromium",
            "chromium-browser",
            "google-chrome",
            "google-chrome-stable",
        ] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

#[derive(Debug)]
pub(crate) struct Browser {
    child: Child,
    to_browser: std::process::ChildStdin,
    from_browser: Receiver<Value>,
    next_id: u64,
    /// Every event received so far, in order.
    pub(crate) events: Vec<Value>,
    session: Option<String>,
    _profile: tempfile::TempDir,
}

const TIMEOUT: Duration = Duration::from_secs(60);

impl Browser {
    /// Start headless Chromium with a fresh profile and no background networking, and open one
    /// blank page to drive.
    pub(crate) fn launch(exe: &std::path::Path) -> Browser {
        let profile = tempfile::tempdir().expect("a temp dir for the browser profile");
        // The browser talks CDP on fds 3 (in) and 4 (out): the shell moves the pipes given as
        // its stdin and stdout there, then runs Chromium with stdin and stdout on /dev/null.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("exec 3<&0 4>&1 0</dev/null 1>/dev/null; exec \"$@\"")
            .arg("sh")
            .arg(exe)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--disable-default-apps",
                "--mute-audio",
                "--remote-debugging-pipe",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("failed to start {}: {e}", exe.display()));
        let to_browser = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut buf = Vec::new();
                match reader.read_until(0, &mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if buf.last() == Some(&0) {
                            buf.pop();
                        }
                        if let Ok(v) = serde_json::from_slice::<Value>(&buf)
                            && tx.send(v).is_err()
                        {
                            return;
                        }
                    }
                }
            }
        });
        let mut b = Browser {
            child,
            to_browser,
            from_browser: rx,
            next_id: 0,
            events: Vec::new(),
            session: None,
            _profile: profile,
        };
        let target = b.browser_call("Target.createTarget", &json!({ "url": "about:blank" }));
        let target_id = target["targetId"].as_str().expect("a target id").to_owned();
        let attached = b.browser_call(
            "Target.attachToTarget",
            &json!({ "targetId": target_id, "flatten": true }),
        );
        b.session = Some(
            attached["sessionId"]
                .as_str()
                .expect("a session id")
                .to_owned(),
        );
        for domain in ["Page", "Network", "Runtime", "Log"] {
            b.call(&format!("{domain}.enable"), &json!({}));
        }
        b
    }

    fn send(&mut self, method: &str, params: &Value, session: bool) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if session && let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).expect("JSON");
        bytes.push(0);
        self.to_browser
            .write_all(&bytes)
            .and_then(|()| self.to_browser.flush())
            .unwrap_or_else(|e| panic!("the browser's pipe closed ({method}): {e}"));
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let msg = self.recv(deadline, method);
            if msg["id"].as_u64() == Some(id) {
                assert!(
                    msg.get("error").is_none(),
                    "{method} failed: {}",
                    msg["error"]
                );
                return msg["result"].clone();
            }
            if msg.get("method").is_some() {
                self.events.push(msg);
            }
        }
    }

    fn recv(&mut self, deadline: Instant, waiting_for: &str) -> Value {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.from_browser.recv_timeout(left) {
            Ok(v) => v,
            Err(RecvTimeoutError::Timeout) => panic!("no answer from the browser to {waiting_for}"),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("the browser exited while waiting for {waiting_for}")
            }
        }
    }

    /// A command to the browser itself.
    pub(crate) fn browser_call(&mut self, method: &str, params: &Value) -> Value {
        self.send(method, params, false)
    }

    /// A command to the page.
    pub(crate) fn call(&mut self, method: &str, params: &Value) -> Value {
        self.send(method, params, true)
    }

    /// Wait for an event that has not been seen before index `from` of [`Self::events`].
    pub(crate) fn wait_event(&mut self, method: &str, from: usize) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(e) = self.events[from.min(self.events.len())..]
                .iter()
                .find(|e| e["method"] == method)
            {
                return e.clone();
            }
            let msg = self.recv(deadline, method);
            if msg.get("method").is_some() {
                self.events.push(msg);
            }
        }
    }

    /// Open `url` and wait until it has loaded; returns the index of the first event of this
    /// navigation in [`Self::events`].
    pub(crate) fn navigate(&mut self, url: &str) -> usize {
        let from = self.events.len();
        let r = self.call("Page.navigate", &json!({ "url": url }));
        assert!(
            r.get("errorText").is_none(),
            "navigating to {url}: {}",
            r["errorText"]
        );
        self.wait_event("Page.loadEventFired", from);
        from
    }

    /// Evaluate a JavaScript expression in the page and return its value.
    pub(crate) fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            &json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        );
        assert!(
            r.get("exceptionDetails").is_none(),
            "`{expression}` threw: {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    /// Click the centre of the first element matching `selector` with the mouse, as a user
    /// would (the element is scrolled into view first).
    pub(crate) fn click(&mut self, selector: &str) {
        let sel = serde_json::to_string(selector).expect("JSON");
        let at = self.eval(&format!(
            "(() => {{ const el = document.querySelector({sel}); if (!el) return null; \
             el.scrollIntoView({{block: 'center', inline: 'center'}}); \
             const r = el.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()"
        ));
        let (x, y) = (
            at[0]
                .as_f64()
                .unwrap_or_else(|| panic!("no element {selector}")),
            at[1].as_f64().expect("a y coordinate"),
        );
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                &json!({ "type": kind, "x": x, "y": y, "button": "left", "clickCount": 1 }),
            );
        }
    }

    /// URLs of every request the page made since event index `from`.
    pub(crate) fn requests(&self, from: usize) -> Vec<String> {
        self.events[from..]
            .iter()
            .filter(|e| e["method"] == "Network.requestWillBeSent")
            .filter_map(|e| e["params"]["request"]["url"].as_str().map(str::to_owned))
            .collect()
    }

    /// Events since index `from` that report a problem: exceptions, failed loads, console
    /// errors and security (CSP) messages.
    pub(crate) fn problems(&self, from: usize) -> Vec<Value> {
        self.events[from..]
            .iter()
            .filter(|e| {
                let m = e["method"].as_str().unwrap_or("");
                m == "Runtime.exceptionThrown"
                    || m == "Network.loadingFailed"
                    || (m == "Log.entryAdded"
                        && (e["params"]["entry"]["level"] == "error"
                            || e["params"]["entry"]["source"] == "security"))
                    || (m == "Runtime.consoleAPICalled" && e["params"]["type"] == "error")
            })
            .cloned()
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.next_id += 1;
        let msg = json!({ "id": self.next_id, "method": "Browser.close", "params": {} });
        if let Ok(mut bytes) = serde_json::to_vec(&msg) {
            bytes.push(0);
            let _ = self.to_browser.write_all(&bytes);
            let _ = self.to_browser.flush();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
