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
        /// The listener that answered was seen, on this machine, to be held by the run's own
        /// process (its tree, or a process of the run): direct evidence that the run serves,
        /// which ends the confirmation window at once (`judge/readiness.rs`). `false` when the
        /// owner was not checked (a remote host, another network namespace, no process
        /// watched): the answer may be someone else's.
        #[serde(default)]
        ours: bool,
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
    /// An HTTP server answers but refuses the probe (a redirect, 404, 401, 405, ...): the probe
    /// asks the wrong thing, or someone else's server answers (one the owner check cannot tell
    /// from the watched one, e.g. a blocker started inside the watched tree). Counts as a fault
    /// once the server's log says it is ready; before that, the log still tells what the server is
    /// doing (see `judge/probes.rs`).
    Rejected {
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
            | ProbeOutcome::Rejected { detail }
            | ProbeOutcome::Fault { detail } => detail,
        }
    }
    /// Whether the condition holds.
    pub fn is_up(&self) -> bool {
        matches!(self, ProbeOutcome::Up { .. })
    }
}
