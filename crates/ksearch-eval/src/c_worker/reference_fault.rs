//! The reference runs in the judge itself, on inputs followed by guard pages. A reference that
//! reads past the end of an input (a task whose shapes do not cover what its reference reads
//! for a workload's axes) faults there; this module turns that fault into a protocol error that
//! names the input and the workload, written to the message channel before the judge exits,
//! instead of a judge killed by SIGSEGV with the candidate blamed for it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

use ksearch_core::protocol::{Envelope, WorkerMessage};

use super::pool::Pool;

/// The judge's message channel (set once it is known).
static MESSAGE_FD: AtomicI32 = AtomicI32::new(-1);
/// The guard pages of the reference's current call, with the line to write for each.
static WATCHED: AtomicPtr<Watched> = AtomicPtr::new(std::ptr::null_mut());
/// The handlers in place before ours (Rust's stack-overflow report): faults elsewhere go there.
static PREVIOUS: OnceLock<[libc::sigaction; 2]> = OnceLock::new();

const SIGNALS: [libc::c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];
/// The judge's exit status after reporting a fault of the reference.
const EXIT_AFTER_FAULT: i32 = 70;

struct Watched {
    /// (first address, end address, protocol line).
    guards: Vec<(usize, usize, Vec<u8>)>,
}

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let watched = WATCHED.load(Ordering::Acquire);
    // SAFETY: the kernel hands a valid siginfo.
    let addr = unsafe { (*info).si_addr() } as usize;
    if !watched.is_null() {
        // SAFETY: `WATCHED` points to a live table while it is set (see `watching`).
        for (lo, hi, line) in unsafe { &(*watched).guards } {
            if (*lo..*hi).contains(&addr) {
                // SAFETY: write(2) and _exit(2) are async-signal-safe; the line is live.
                unsafe {
                    libc::write(
                        MESSAGE_FD.load(Ordering::Relaxed),
                        line.as_ptr().cast(),
                        line.len(),
                    );
                    libc::_exit(EXIT_AFTER_FAULT);
                }
            }
        }
    }
    // Not a guard page of the reference's inputs: give the fault to whoever had it before;
    // returning runs the faulting instruction again.
    if let Some(previous) = PREVIOUS.get() {
        let i = usize::from(sig == libc::SIGBUS);
        // SAFETY: sigaction is async-signal-safe; the saved action is valid.
        unsafe { libc::sigaction(sig, &raw const previous[i], std::ptr::null_mut()) };
    }
}

/// Install the handler (once); `message_fd` is where protocol messages go.
pub(crate) fn install(message_fd: i32) {
    MESSAGE_FD.store(message_fd, Ordering::Relaxed);
    PREVIOUS.get_or_init(|| {
        SIGNALS.map(|sig| {
            // SAFETY: zeroed sigactions are valid; installing a handler that only reads
            // atomics and calls async-signal-safe functions.
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_fault as *const () as usize;
                act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, &raw const act, &raw mut old);
                old
            }
        })
    });
}

/// Run `f` (a call of the reference on set `set` of `pool`, workload `workload`) with a fault
/// in an input's guard page reported as the reference's.
pub(crate) fn watching<R>(
    pool: &Pool,
    set: usize,
    names: &[String],
    workload: &str,
    f: impl FnOnce() -> R,
) -> R {
    let base = pool.input_base() as usize;
    let guards = (0..pool.layout.input_sizes.len())
        .map(|t| {
            let (off, len) = pool.layout.input_guard(set, t);
            let message = format!(
                "the reference read past the end of input `{}` on workload `{workload}` (a guard page follows every input): its shape does not hold what the reference reads for these axes; check the task's shapes and the workload's axes (an axis that follows from others can be declared once, in `derived`)",
                names.get(t).map_or("?", String::as_str)
            );
            let mut line = serde_json::to_vec(&Envelope::new(WorkerMessage::Error {
                id: None,
                message,
                task_fault: true,
            }))
            .expect("messages serialize");
            line.push(b'\n');
            (base + off, base + off + len, line)
        })
        .collect();
    let table = Box::into_raw(Box::new(Watched { guards }));
    WATCHED.store(table, Ordering::Release);
    let r = f();
    WATCHED.store(std::ptr::null_mut(), Ordering::Release);
    // SAFETY: made by Box::into_raw above and no longer reachable through `WATCHED`.
    drop(unsafe { Box::from_raw(table) });
    r
}
