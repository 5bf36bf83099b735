//! The run's owner ended (`run --owner`): the supervisor writes `owner_gone.json` before its
//! SIGTERM, and the run directory's inotify wakes the observer. The judge is told once, as soon
//! as the record is there, so that what the server prints while firedup stops it, and its exit,
//! are judged as firedup's stop (see the judge's `owner_end.rs`).

use crate::judge::Observation;
use crate::rundir::RunDir;

/// Whether to look for the record, and whether the judge was told.
#[derive(Debug)]
pub(super) struct OwnerNews {
    watching: bool,
    told: bool,
}

impl OwnerNews {
    /// Looks only for a run that has an owner (its `meta.json` says so).
    pub(super) fn new(run: Option<&RunDir>) -> OwnerNews {
        OwnerNews {
            watching: run
                .and_then(|r| r.meta().ok())
                .is_some_and(|m| m.owner.is_some()),
            told: false,
        }
    }

    /// The news, the first time the record is found, with when the supervisor noticed the
    /// owner gone (Unix time): the judge is told at that time, not when the record was read, as
    /// the lines the stop brings are stamped with when the log held them (`log_reader`), so
    /// both are in the order they happened.
    pub(super) fn take(&mut self, run: Option<&RunDir>) -> Option<(f64, Observation)> {
        if !self.watching || self.told {
            return None;
        }
        let gone = run?.owner_gone()?;
        self.told = true;
        Some((gone.noticed_at, Observation::OwnerGone { pid: gone.owner }))
    }
}
