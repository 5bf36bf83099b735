//! Ctrl-C (or SIGTERM) during a matrix: start nothing new, stop the running cells (here, or on
//! the host) so that their watches end at once, and keep what is done.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Result;

use super::runner::Shared;
use firedup::host::Host;

/// Ctrl-C (or SIGTERM): stop starting cells, tear down the running ones, keep what is done.
pub struct SignalWatch {
    handle: signal_hook::iterator::Handle,
    thread: std::thread::JoinHandle<()>,
}

pub fn watch_signals(
    shared: Arc<Shared>,
    grace: Duration,
    host: Arc<dyn Host>,
) -> Result<SignalWatch> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .map_err(|e| anyhow::anyhow!("cannot handle Ctrl-C: {e}"))?;
    let handle = signals.handle();
    let thread = std::thread::spawn(move || {
        for _ in signals.forever() {
            shared.cancel.store(true, Ordering::SeqCst);
            eprintln!(
                "firedup: interrupted: tearing down the running cells; finished cells are kept"
            );
            for target in shared.running_now() {
                host.cancel(&target, grace);
            }
        }
    });
    Ok(SignalWatch { handle, thread })
}

impl SignalWatch {
    pub fn close(self) {
        self.handle.close();
        let _ = self.thread.join();
    }
}
