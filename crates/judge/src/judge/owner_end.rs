//! A run stopped by firedup because its owner (`run --owner PID`) ended: the supervisor records
//! that before its SIGTERM, and the shell tells the judge ([`Observation::OwnerGone`]) before the
//! exit. The exit that follows, and a cause printed after the news (the server's shutdown), are
//! firedup's own doing, never "someone else sent it SIGTERM" nor a failure: `killed` with no
//! signature (firedup's stop is not a failure of the server), and a reason that names the owner
//! and how the process ended. A cause printed before the owner ended is still the verdict.
//!
//! [`Observation::OwnerGone`]: super::Observation::OwnerGone

use std::time::Duration;

use super::Judge;
use super::decide::Decision;
use super::output::Event;
use crate::verdict::{ExitInfo, Verdict};

impl Judge {
    /// The process ended (`exit`) after firedup stopped the run because its owner `owner` ended.
    pub(super) fn decide_owner_gone(
        &mut self,
        at: Duration,
        owner: u32,
        exit: Option<ExitInfo>,
        events: &mut Vec<Event>,
    ) {
        let how = match exit {
            Some(e) => format!("; it ended with {}", e.describe()),
            // Decided before the end (a line printed while stopping settled first).
            None if self.alive => String::new(),
            None => "; it ended with an unknown status".into(),
        };
        let reason = format!(
            "stopped: its owner, pid {owner}, ended, so firedup stopped the run{how}{}",
            self.after_ready(at)
        );
        let d = Decision::new(Verdict::Killed, reason)
            .line(self.last_line.clone())
            .exit(exit);
        self.decide(at, d, events);
    }
}
