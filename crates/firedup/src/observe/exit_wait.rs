//! How long a run's observed end waits for its supervisor's exit record before the exit is
//! observed with what is known.
//!
//! A launched run's supervisor always records how its command ended (`exit.json`, and the same
//! record on its pipe), unless it dies first. It reaps the command and writes the record with an
//! fsync, then sends it: on a loaded machine (a cold CI run beside parallel builds) that is
//! seconds after the command's pidfd said it was gone, while the supervisor waits for a core or
//! for the disk. Giving up after a fixed two seconds made a launched run's exit "an unknown
//! status" there, a verdict that says "unknown" about firedup's own child. So the record is
//! waited for as long as its supervisor lives (bounded by [`SUPERVISED_EXIT_RECORD_WAIT`], should
//! it hang), and only [`EXIT_RECORD_WAIT`] where no live supervisor will write it (a supervisor
//! killed, a process not launched by firedup).

use std::time::{Duration, Instant};

use super::LocalObserver;
use crate::judge::Observation;
use crate::process::membership::RunIdentity;

/// How long an exit waits for its record (and for the watchers of ranks that ended to report
/// them) where no live supervisor will write it.
pub(super) const EXIT_RECORD_WAIT: Duration = Duration::from_secs(2);
/// How long an exit waits for its record while the run's supervisor lives (a bound, should it
/// hang: an fsync on a dead network file system).
pub(super) const SUPERVISED_EXIT_RECORD_WAIT: Duration = Duration::from_secs(60);

/// What an ended process's exit is waiting on, at a look.
#[derive(Debug, Clone, Copy)]
pub(super) struct ExitWait {
    /// Since the process was seen gone.
    pub waited: Duration,
    /// The supervisor's record is in, or none is to come (a process firedup did not launch).
    pub known: bool,
    /// A rank's end its watcher has not reported yet.
    pub unreported: bool,
}

impl ExitWait {
    /// Whether the exit is observed now; `supervisor_alive` is asked only when it decides.
    pub(super) fn observe_now(&self, supervisor_alive: impl FnOnce() -> bool) -> bool {
        if self.known && !self.unreported {
            return true;
        }
        if self.waited < EXIT_RECORD_WAIT {
            return false;
        }
        // The record is in (a rank's report is what is late), or it will never come, or its
        // supervisor has had long enough.
        self.known || self.waited >= SUPERVISED_EXIT_RECORD_WAIT || !supervisor_alive()
    }
}

impl LocalObserver {
    /// The process was seen gone: its exit now waits for its status, and the judge hears when
    /// it ended ([`Observation::Gone`]), so that a status learned late does not move that time.
    pub(super) fn seen_gone(&mut self) {
        if self.process_gone_at.is_none() {
            self.process_gone_at = Some(Instant::now());
            self.pending.push(Observation::Gone);
        }
    }

    /// The process was seen gone and its exit is not observed yet. No deadline is decided
    /// meanwhile: a hold that ended while the supervisor's record was on its way (an fsync on a
    /// loaded disk) said `ready ... still healthy` of a server already gone.
    pub(super) fn exit_pending(&self) -> bool {
        self.process_gone_at.is_some() && !self.exit_reported
    }

    /// The supervisor's record of how the command ended, sent on its pipe or on disk.
    pub(super) fn exit_record_now(&self) -> Option<crate::rundir::ExitRecord> {
        self.exit_record
            .clone()
            .or_else(|| self.target.run.as_ref().and_then(|r| r.exit()))
    }

    /// Whether the run's supervisor (of a launched run: the one that records its command's end)
    /// is still the same live process.
    pub(super) fn supervisor_alive(&self) -> bool {
        self.target.run.is_some() && RunIdentity::of(&self.target.run_id).supervisor_alive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_waited_for_while_its_supervisor_lives() {
        let s = Duration::from_secs;
        // (waited, known, unreported, supervisor alive, observed now)
        let cases = [
            (s(0), true, false, true, true),
            (s(0), true, true, true, false),
            (s(2), true, true, true, true),
            (s(0), false, false, true, false),
            (s(1), false, false, false, false),
            // A loaded machine: the command gone 2 s ago, its living supervisor not yet heard.
            (s(2), false, false, true, false),
            (s(30), false, false, true, false),
            (s(60), false, false, true, true),
            // No supervisor will write it (killed with the run): what is known, after 2 s.
            (s(2), false, false, false, true),
            (s(2), false, true, false, true),
        ];
        for (waited, known, unreported, alive, want) in cases {
            let w = ExitWait {
                waited,
                known,
                unreported,
            };
            assert_eq!(
                w.observe_now(|| alive),
                want,
                "{w:?}, supervisor alive: {alive}"
            );
        }
    }
}
