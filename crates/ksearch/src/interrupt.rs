//! Ctrl-C: the first one asks the engine to stop after saving (an evaluation in flight is
//! abandoned and runs again on resume); a second one kills the process the default way.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

extern "C" fn on_sigint(_: libc::c_int) {
    if let Some(flag) = FLAG.get() {
        flag.store(true, Ordering::SeqCst);
    }
}

/// Install the handler (once) and return the flag it sets.
pub(crate) fn stop_flag() -> Arc<AtomicBool> {
    let flag = FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)));
    // SAFETY: the handler only stores to an atomic; SA_RESETHAND restores the default action
    // so that a second Ctrl-C terminates at once.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigint as *const () as usize;
        action.sa_flags = libc::SA_RESETHAND;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
    }
    Arc::clone(flag)
}
