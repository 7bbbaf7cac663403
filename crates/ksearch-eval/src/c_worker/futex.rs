//! Sleeping on a shared 32-bit word and waking its sleepers (Linux futexes; a short sleep
//! elsewhere).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleep while `word` holds `current`, at most `timeout`. May return early.
pub(crate) fn wait(word: &AtomicU32, current: u32, timeout: Option<Duration>) {
    #[cfg(target_os = "linux")]
    {
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs() as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        // SAFETY: FUTEX_WAIT on a word in shared memory (no PRIVATE flag: the other side is
        // another process); the timespec outlives the call.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT,
                current,
                ts.as_ref().map_or(std::ptr::null(), std::ptr::from_ref),
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (word, current);
        std::thread::sleep(
            timeout
                .unwrap_or(Duration::from_micros(50))
                .min(Duration::from_micros(50)),
        );
    }
}

/// Wake everyone sleeping on `word`.
pub(crate) fn wake(word: &AtomicU32) {
    #[cfg(target_os = "linux")]
    // SAFETY: FUTEX_WAKE on a word in shared memory.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = word;
}
