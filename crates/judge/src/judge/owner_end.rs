//! A run stopped by firedup because its owner (`run --owner PID`) ended: the supervisor records
//! that before its SIGTERM, and the shell tells the judge ([`Observation::OwnerGone`]) before the
//! exit. The exit that follows is firedup's own doing, never "someone else sent it SIGTERM":
//! `killed` with no signature (firedup's stop is not a failure of the server), and a reason that
//! names the owner and how the process ended.
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
        let status = exit
            .map(|e| e.describe())
            .unwrap_or_else(|| "an unknown status".into());
        let reason = format!(
            "stopped: its owner, pid {owner}, ended, so firedup stopped the run; it ended with {status}{}",
            self.after_ready(at)
        );
        let d = Decision::new(Verdict::Killed, reason)
            .line(self.last_line.clone())
            .exit(exit);
        self.decide(at, d, events);
    }
}
