//! Where a watch stands, as one value: each stage carries what is valid in it and nothing else.
//!
//! ```text
//! Starting ──all ready conditions──▶ Confirming{ready_at} ─window ends─▶ Decided(ready)
//!    │                      └─(--hold)─▶ Holding{ready_at} ──hold ends──▶ Decided(ready)
//!    └──first fatal line (also from Confirming / Holding)──▶ Settling{..} ─settle ends─▶ Decided(failed)
//! any stage ──exit, deadline, monitor fault──▶ Decided(..)
//! ```
//!
//! Without a window (no hold, no confirmation) `ready` is decided as soon as the conditions hold.

use std::time::Duration;

use super::output::Judgement;
use crate::verdict::LineRef;

/// The stage of a watch.
#[derive(Debug, Clone)]
pub(super) enum Stage {
    /// No readiness yet and no fatal line.
    Starting,
    /// Every readiness condition held at `ready_at`; the confirmation window runs (a fatal line
    /// or an exit inside it overrides the ready condition).
    Confirming { ready_at: Duration },
    /// Every readiness condition held at `ready_at`; the `--hold` runs (a crash inside it is
    /// reported).
    Holding { ready_at: Duration },
    /// A fatal line was seen: the rest of the failure is collected until the settle window ends.
    Settling(Settling),
    /// The verdict; nothing changes any more.
    Decided(Box<Judgement>),
}

/// What the settle window after the first fatal line holds.
#[derive(Debug, Clone)]
pub(super) struct Settling {
    pub(super) first_fatal_at: Duration,
    /// When the ready condition held, if the fatal line came inside the confirmation or hold.
    pub(super) ready_at: Option<Duration>,
    /// The lines before the first fatal line (it included), as they were when it came.
    pub(super) decisive_context: Vec<String>,
    /// Lines after the first fatal line, up to the context size.
    pub(super) after: Vec<LineRef>,
}

impl Stage {
    /// When every readiness condition first held, in any stage that knows it.
    pub(super) fn ready_at(&self) -> Option<Duration> {
        match self {
            Stage::Starting => None,
            Stage::Confirming { ready_at } | Stage::Holding { ready_at } => Some(*ready_at),
            Stage::Settling(s) => s.ready_at,
            Stage::Decided(j) => j.ready_at,
        }
    }

    /// The settle window's state, while a fatal line settles.
    pub(super) fn settling(&self) -> Option<&Settling> {
        match self {
            Stage::Settling(s) => Some(s),
            _ => None,
        }
    }

    /// The verdict, once decided.
    pub(super) fn verdict(&self) -> Option<&Judgement> {
        match self {
            Stage::Decided(j) => Some(j),
            _ => None,
        }
    }
}
