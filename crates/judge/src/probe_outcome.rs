//! What one probe found, as the judge reads it. The probes themselves (sockets, HTTP, nvidia-smi)
//! belong to the shell; they turn what they see into a [`ProbeOutcome`].

use std::time::Duration;

/// What one probe found.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeOutcome {
    /// The condition holds (port listening and ours; health 2xx; request returned tokens).
    Up {
        /// What it saw, in words.
        detail: String,
        /// How long the probe took.
        latency: Duration,
    },
    /// The server is not there yet (refused, 503, no tokens yet, timed out while busy).
    NotYet {
        /// What it saw, in words.
        detail: String,
    },
    /// Something answers, but it is not the watched process tree.
    Foreign {
        /// What it saw, in words.
        detail: String,
    },
    /// firedup's own probe cannot work (bad name, unresolvable host, permission denied, not HTTP).
    Fault {
        /// What went wrong, in words.
        detail: String,
    },
}

impl ProbeOutcome {
    /// What the probe saw, in words.
    pub fn detail(&self) -> &str {
        match self {
            ProbeOutcome::Up { detail, .. }
            | ProbeOutcome::NotYet { detail }
            | ProbeOutcome::Foreign { detail }
            | ProbeOutcome::Fault { detail } => detail,
        }
    }
    /// Whether the condition holds.
    pub fn is_up(&self) -> bool {
        matches!(self, ProbeOutcome::Up { .. })
    }
}
