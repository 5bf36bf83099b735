//! Real-request probe. (Stub: implemented in the probes change.)

use std::time::Duration;

use super::ProbeOutcome;
use crate::profile::RequestKind;

/// Sends a tiny deterministic request to the server at `base_url` (`http://host:port`) and is `Up`
/// only when it returns at least one token.
pub fn probe(base_url: &str, kind: RequestKind, timeout: Duration) -> ProbeOutcome {
    let _ = (base_url, kind, timeout);
    ProbeOutcome::Fault {
        detail: "the request probe is not built yet".into(),
    }
}
