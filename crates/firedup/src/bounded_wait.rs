//! Test-only: run a call that must return, and fail the test if it does not within a generous
//! bound. The bound catches a hang (a timeout that never fires), it is not a speed check: the
//! tests assert what the call returned, and speed is measured in `benches/`.

use std::sync::mpsc;
use std::time::Duration;

/// How long a call that should return in well under a second may take on a loaded machine
/// before the test calls it hung.
pub(crate) const HANG: Duration = Duration::from_secs(120);

/// Runs `f` on a thread of its own and returns its result; panics naming `what` when it has
/// not returned within `bound` (the thread is left behind, the test fails).
pub(crate) fn bounded<T: Send + 'static>(
    what: &str,
    bound: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(bound) {
        Ok(v) => v,
        Err(_) => panic!("{what} did not return within {bound:?}: it hung"),
    }
}
