//! TCP port probe. (Stub: implemented in the probes change.)

use std::time::Duration;

use super::ProbeOutcome;

/// Connects to `host:port` within `timeout`. When `tree` is given and the host is local, a listener
/// that belongs to no process of `tree` is `Foreign`.
pub fn probe(host: &str, port: u16, tree: Option<&[u32]>, timeout: Duration) -> ProbeOutcome {
    let _ = (host, port, tree, timeout);
    ProbeOutcome::Fault {
        detail: "the TCP probe is not built yet".into(),
    }
}
