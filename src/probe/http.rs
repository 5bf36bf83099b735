//! HTTP health probe. (Stub: implemented in the probes change.)

use std::time::Duration;

use super::ProbeOutcome;

/// GETs `url` within `timeout`: 2xx is `Up`; 503 and refused are `NotYet`; unresolvable host,
/// protocol errors and other 4xx are `Fault`.
pub fn probe(url: &str, timeout: Duration) -> ProbeOutcome {
    let _ = (url, timeout);
    ProbeOutcome::Fault {
        detail: "the HTTP probe is not built yet".into(),
    }
}
