//! Ctrl-C: the first one asks the engine to stop after saving (an evaluation in flight is
//! abandoned and runs again on resume); a second one kills the process the default way.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::AtomicBool;

use signal_hook::consts::SIGINT;
use signal_hook::flag;

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Install the handlers (once) and return the flag the first Ctrl-C sets.
pub(crate) fn stop_flag() -> Arc<AtomicBool> {
    let stop = FLAG.get_or_init(|| {
        let stop = Arc::new(AtomicBool::new(false));
        // Registered first, so it sees the flag before the second handler sets it: once set,
        // the next SIGINT takes the default action.
        let _ = flag::register_conditional_default(SIGINT, Arc::clone(&stop));
        let _ = flag::register(SIGINT, Arc::clone(&stop));
        stop
    });
    Arc::clone(stop)
}
