//! What candidate code prints. A worker's stdout and stderr both go into one pipe that the
//! supervisor drains on a thread, keeping the first and last few kilobytes and a byte count.
//! The protocol uses other file descriptors, so nothing printed can corrupt it, and what was
//! printed survives a crash of the worker.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use ksearch_core::protocol::CapturedOutput;

/// Bytes kept from the start and from the end of the output.
const KEEP: usize = 4096;

/// Written by a worker to its stdout once it has flushed everything an evaluation printed:
/// `MARKER_PREFIX <id> MARKER_END`. The supervisor strips it and knows the output is complete.
pub(crate) const MARKER_PREFIX: &[u8] = b"\x1eksearch-output-end:";
pub(crate) const MARKER_END: u8 = 0x1e;
const MAX_MARKER: usize = 48;

#[derive(Debug, Default)]
struct State {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    bytes: u64,
    /// Highest evaluation id whose end marker was seen.
    ended: Option<u64>,
    closed: bool,
}

impl State {
    fn commit(&mut self, data: &[u8]) {
        self.bytes += data.len() as u64;
        let room = KEEP.saturating_sub(self.head.len());
        let (to_head, rest) = data.split_at(room.min(data.len()));
        self.head.extend_from_slice(to_head);
        let rest = &rest[rest.len().saturating_sub(KEEP)..];
        self.tail.extend(rest);
        while self.tail.len() > KEEP {
            self.tail.pop_front();
        }
    }
}

/// Shared view of a worker's captured output.
#[derive(Debug, Default)]
pub(crate) struct OutputCapture {
    state: Mutex<State>,
    changed: Condvar,
}

impl OutputCapture {
    /// Start draining `pipe` on a thread.
    pub(crate) fn spawn(pipe: impl Read + Send + 'static) -> (Arc<Self>, JoinHandle<()>) {
        let capture = Arc::new(Self::default());
        let c = Arc::clone(&capture);
        let handle = std::thread::Builder::new()
            .name("ksearch-output".into())
            .spawn(move || c.drain(pipe))
            .expect("spawning a thread");
        (capture, handle)
    }

    fn drain(&self, mut pipe: impl Read) {
        let mut buf = vec![0u8; 64 * 1024];
        let mut carry: Vec<u8> = Vec::new();
        loop {
            let n = match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            carry.extend_from_slice(&buf[..n]);
            let keep_from = self.scan(&carry);
            carry.drain(..keep_from);
        }
        let mut st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        st.commit(&carry);
        st.closed = true;
        self.changed.notify_all();
    }

    /// Commit `data` up to a possibly incomplete marker at its end, handling whole markers;
    /// returns where the uncommitted rest starts.
    fn scan(&self, data: &[u8]) -> usize {
        let mut st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut start = 0;
        let mut i = 0;
        while i < data.len() {
            if data[i] != MARKER_PREFIX[0] {
                i += 1;
                continue;
            }
            match parse_marker(&data[i..]) {
                Marker::Complete { id, len } => {
                    st.commit(&data[start..i]);
                    st.ended = Some(st.ended.map_or(id, |e| e.max(id)));
                    self.changed.notify_all();
                    i += len;
                    start = i;
                }
                Marker::Partial => {
                    st.commit(&data[start..i]);
                    return i;
                }
                Marker::No => i += 1,
            }
        }
        st.commit(&data[start..]);
        data.len()
    }

    /// Wait until the worker said evaluation `id` printed everything, or `timeout` passed.
    pub(crate) fn wait_end(&self, id: u64, timeout: Duration) {
        let st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = self
            .changed
            .wait_timeout_while(st, timeout, |s| !s.closed && s.ended.is_none_or(|e| e < id));
    }

    /// Wait until the pipe is closed (the worker and all its children are gone) or `timeout`.
    pub(crate) fn wait_closed(&self, timeout: Duration) {
        let st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = self.changed.wait_timeout_while(st, timeout, |s| !s.closed);
    }

    /// What was printed since the last call.
    pub(crate) fn take(&self) -> CapturedOutput {
        let mut st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let out = CapturedOutput {
            bytes: st.bytes,
            head: String::from_utf8_lossy(&st.head).into_owned(),
            tail: String::from_utf8_lossy(st.tail.make_contiguous()).into_owned(),
        };
        st.head.clear();
        st.tail.clear();
        st.bytes = 0;
        out
    }
}

enum Marker {
    Complete { id: u64, len: usize },
    Partial,
    No,
}

fn parse_marker(data: &[u8]) -> Marker {
    let n = data.len().min(MARKER_PREFIX.len());
    if data[..n] != MARKER_PREFIX[..n] {
        return Marker::No;
    }
    if data.len() < MARKER_PREFIX.len() {
        return Marker::Partial;
    }
    let rest = &data[MARKER_PREFIX.len()..];
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    match rest.get(digits) {
        Some(&MARKER_END) if digits > 0 => {
            let id = std::str::from_utf8(&rest[..digits])
                .ok()
                .and_then(|s| s.parse().ok());
            match id {
                Some(id) => Marker::Complete {
                    id,
                    len: MARKER_PREFIX.len() + digits + 1,
                },
                None => Marker::No,
            }
        }
        None if MARKER_PREFIX.len() + digits < MAX_MARKER => Marker::Partial,
        _ => Marker::No,
    }
}

/// The marker a worker writes after evaluation `id`.
pub(crate) fn end_marker(id: u64) -> Vec<u8> {
    let mut m = MARKER_PREFIX.to_vec();
    m.extend_from_slice(id.to_string().as_bytes());
    m.push(MARKER_END);
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out its data in fixed-size pieces, to split markers across reads.
    struct Chunked(Vec<u8>, usize);
    impl Read for Chunked {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(self.0.len()).min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0.drain(..n);
            Ok(n)
        }
    }

    #[test]
    fn markers_are_stripped_even_when_split_across_reads() {
        for chunk in [1, 3, 7, 1000] {
            let mut data = b"hello ".to_vec();
            data.extend(end_marker(12));
            data.extend_from_slice(b"world\x1e");
            let (cap, h) = OutputCapture::spawn(Chunked(data, chunk));
            h.join().unwrap();
            let st = cap.state.lock().unwrap();
            assert_eq!(st.ended, Some(12), "chunk {chunk}");
            drop(st);
            let out = cap.take();
            assert_eq!(out.head, "hello world\x1e", "chunk {chunk}");
            assert_eq!(out.bytes, 12);
        }
    }

    #[test]
    fn a_flood_keeps_head_tail_and_count() {
        let mut data = vec![b'a'; KEEP];
        data.extend(vec![b'b'; 1_000_000]);
        data.extend(vec![b'c'; 10]);
        let (cap, h) = OutputCapture::spawn(Chunked(data, 65536));
        h.join().unwrap();
        let out = cap.take();
        assert_eq!(out.bytes, (KEEP + 1_000_000 + 10) as u64);
        assert!(out.head.bytes().all(|b| b == b'a'));
        assert!(out.tail.ends_with("bcccccccccc"));
        assert_eq!(out.tail.len(), KEEP);
        assert_eq!(cap.take().bytes, 0);
    }
}
