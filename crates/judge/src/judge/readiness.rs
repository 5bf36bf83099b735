//! Readiness: the conjunction of the ready lines (all seen) and the readiness probes (each one's
//! latest outcome is up), in server mode, with no fatal line. When it holds, the server is ready
//! at once, or after the confirmation window or the `--hold` (see `deadlines`).
//!
//! The confirmation window waits for what a ready line alone cannot tell (uvicorn prints
//! `Application startup complete.` before it binds; a taken port is the next line). It ends at
//! once on direct evidence: a port, HTTP or request probe answered by a listener that the shell
//! saw to be the run's own process (`ProbeOutcome::Up::ours`), at the time the ready condition
//! holds or during the window. A process that serves its port has bound it. Only the window
//! ends so: a `--hold` runs its full length (a crash after the bind is what it is for).

use std::time::Duration;

use super::Judge;
use super::decide::Decision;
use super::output::Event;
use super::stage::Stage;
use crate::duration::format_duration;
use crate::mode::Mode;
use crate::profile::ProbeKind;
use crate::verdict::Verdict;

impl Judge {
    /// The readiness conditions that do not hold yet, in words.
    pub fn waiting_for(&self) -> Vec<String> {
        let mut w: Vec<String> = self
            .cfg
            .classifier
            .ready_lines()
            .iter()
            .zip(&self.ready_seen)
            .filter(|(_, seen)| !**seen && self.lines_unseeable.is_none())
            .map(|(r, _)| r.condition())
            .collect();
        for p in self.probes.iter().filter(|p| !p.up) {
            w.push(format!("{} {} ({})", p.kind.as_str(), p.target, p.last));
        }
        w
    }

    /// "; still waiting for: ..." when readiness conditions are unmet.
    pub(super) fn waiting_note(&self) -> String {
        let w = self.waiting_for();
        if w.is_empty() {
            String::new()
        } else {
            format!("; still waiting for: {}", w.join("; "))
        }
    }

    /// Declares ready once every ready line was seen and every readiness probe is up.
    pub(super) fn check_ready(&mut self, at: Duration, events: &mut Vec<Event>) {
        let has_conditions = !self.ready_seen.is_empty() || !self.probes.is_empty();
        if self.cfg.mode != Mode::UntilReady
            || !matches!(self.stage, Stage::Starting)
            || !has_conditions
            || !(self.lines_unseeable.is_some() || self.ready_seen.iter().all(|s| *s))
            || !self.probes.iter().all(|p| p.up)
        {
            return;
        }
        self.stage = if self.cfg.hold.is_some() {
            Stage::Holding { ready_at: at }
        } else {
            Stage::Confirming { ready_at: at }
        };
        self.enter_phase(at, "ready".to_string(), events);
        events.push(Event::Ready { at });
        if self.cfg.ready_window().is_none() {
            self.decide_ready(at, events);
        } else {
            self.end_window_on_evidence(events);
        }
    }

    /// Inside the confirmation window, the run's own process answering a probe is `ready` at
    /// once, at the time the condition first held (see the module doc).
    pub(super) fn end_window_on_evidence(&mut self, events: &mut Vec<Event>) {
        let Stage::Confirming { ready_at } = self.stage else {
            return;
        };
        if self.serves_its_port() {
            self.decide_ready(ready_at, events);
        }
    }

    /// Whether a port, HTTP or request probe is up, answered by the run's own listener.
    fn serves_its_port(&self) -> bool {
        self.probes.iter().any(|p| {
            p.up && p.ours
                && matches!(
                    p.kind,
                    ProbeKind::Port | ProbeKind::Http | ProbeKind::Request
                )
        })
    }

    /// The `ready` verdict at `at`, the time the ready condition first held.
    pub(super) fn decide_ready(&mut self, at: Duration, events: &mut Vec<Event>) {
        let reason = self.ready_reason(Some(at));
        // The decisive line is the last ready line seen (not the access-log line of a probe).
        let line = self.ready_line.clone().or_else(|| self.last_line.clone());
        self.decide(at, Decision::new(Verdict::Ready, reason).line(line), events);
    }

    /// "ready after 2.0s: matched ..." for a server ready at `at` ("ready: matched ..." when
    /// the time is not known).
    pub(super) fn ready_reason(&self, at: Option<Duration>) -> String {
        // Lines that can never be seen (a daemon writing elsewhere) were no condition.
        let mut conds: Vec<String> = self
            .cfg
            .classifier
            .ready_lines()
            .iter()
            .zip(&self.ready_seen)
            .filter(|(_, seen)| **seen || self.lines_unseeable.is_none())
            .map(|(r, _)| r.condition())
            .collect();
        for p in &self.probes {
            conds.push(format!("{} {}", p.kind.as_str(), p.target));
        }
        let after = at
            .map(|a| format!(" after {}", format_duration(a)))
            .unwrap_or_default();
        format!("ready{after}: {}", describe_conditions(&conds))
    }
}

/// The conditions that held, for the `ready` reason.
fn describe_conditions(conds: &[String]) -> String {
    match conds.len() {
        0 => "no condition".into(),
        1 => format!("matched {}", conds[0]),
        n => format!("all {n} conditions held ({})", conds.join(", ")),
    }
}
