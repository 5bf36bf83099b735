//! A run that firedup itself stopped ([`Observation::FiredupStop`] came before its exit): in
//! server mode, once it had become ready, it was `ready`, and the stop is how it ended (a
//! re-attach to a ready server that `firedup stop` ended reports that, not a kill by someone
//! else). Before ready, the exit is judged as any other (`killed`/`terminated` for its SIGTERM,
//! as for a batch job firedup cancelled), its reason naming who stopped it (`exit.rs`).
//!
//! [`Observation::FiredupStop`]: super::Observation::FiredupStop

use std::time::Duration;

use super::Judge;
use super::decide::Decision;
use super::output::Event;
use crate::mode::Mode;
use crate::verdict::{ExitInfo, Verdict};

impl Judge {
    /// Decides `ready` when the run ended by firedup's own stop after it had become ready (the
    /// time recorded while it ran, or seen in this watch); returns whether it decided.
    pub(super) fn decide_stopped_after_ready(
        &mut self,
        at: Duration,
        exit: Option<ExitInfo>,
        events: &mut Vec<Event>,
    ) -> bool {
        let Some(by) = self.stopped_by.clone() else {
            return false;
        };
        let ready_at = self
            .cfg
            .recorded_end
            .and_then(|r| r.ready_at)
            .or(self.stage.ready_at());
        let Some(ready_at) = ready_at.filter(|_| self.cfg.mode == Mode::UntilReady) else {
            return false;
        };
        // A run that has ended, read at once: when it became ready only a record can say.
        let known = match self.cfg.recorded_end {
            Some(r) => r.ready_at,
            None => Some(ready_at),
        };
        let status = exit
            .map(|e| e.describe())
            .unwrap_or_else(|| "an unknown status".into());
        let reason = format!(
            "{}; then {by} stopped it{} ({status})",
            self.ready_reason(known),
            self.after_ready(at)
        );
        let line = self.ready_line.clone().or_else(|| self.last_line.clone());
        let d = Decision::new(Verdict::Ready, reason).line(line).exit(exit);
        self.decide(at, d, events);
        true
    }
}
