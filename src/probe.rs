//! Probes: firedup asking the server directly, outside its log.
//!
//! Each probe is one blocking check with a hard timeout that returns a [`ProbeOutcome`]; the engine
//! runs them on a thread of their own and turns the outcomes into observations for the judge. A
//! probe never confuses its own failure with "not ready yet": `NotYet` is the server not answering
//! (connection refused, 503 while loading), `Fault` is firedup's own access failing (a name that
//! does not resolve, permission denied, a URL that is not HTTP), and `Foreign` is an answer from a
//! process that is not the watched one (someone else is on your port).
//!
//! - [`tcp`]: connect to host:port; who owns the listener (`/proc/net/tcp*` → socket inode → pid).
//! - [`http`]: GET a health URL: status and latency, no proxy from the environment, no redirects.
//! - [`request`]: a tiny deterministic request that must return tokens (OpenAI-compatible, TGI).
//! - [`notify`]: an sd_notify socket (`READY=1`, `STATUS=`, `EXTEND_TIMEOUT_USEC=`).
//! - [`gpu`]: GPU memory held by the watched process tree, from `nvidia-smi`.

use std::time::Duration;

pub mod gpu;
pub mod http;
pub mod notify;
pub mod request;
pub mod tcp;

pub use crate::profile::ProbeKind;

/// What one probe found.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeOutcome {
    /// The condition holds (port listening and ours; health 2xx; request returned tokens).
    Up { detail: String, latency: Duration },
    /// The server is not there yet (refused, 503, no tokens yet, timed out while busy).
    NotYet { detail: String },
    /// Something answers, but it is not the watched process tree.
    Foreign { detail: String },
    /// firedup's own probe cannot work (bad name, unresolvable host, permission denied, not HTTP).
    Fault { detail: String },
}

impl ProbeOutcome {
    pub fn detail(&self) -> &str {
        match self {
            ProbeOutcome::Up { detail, .. }
            | ProbeOutcome::NotYet { detail }
            | ProbeOutcome::Foreign { detail }
            | ProbeOutcome::Fault { detail } => detail,
        }
    }
    pub fn is_up(&self) -> bool {
        matches!(self, ProbeOutcome::Up { .. })
    }
}

/// Default hard timeout for one probe.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Hard timeout for the real request (a first request may compile kernels).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
