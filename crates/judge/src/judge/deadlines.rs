//! The windows and deadlines, and what happens when one ends. In order of precedence: the settle
//! window after a fatal line (`failed`), the log unreadable too long (`monitor_error`), the
//! confirmation window or hold after ready (`ready`); and while not ready: nothing started within
//! the log grace (`never_started`), no progress within the stall window (`stalled`), a phase over
//! its budget and the start deadline (`timed_out`); while a batch job waits in its queue, only
//! `--queue-timeout` (`timed_out`). [`Judge::next_deadline`] says when the next
//! one ends, so the shell ticks the judge then. Once the process is seen gone
//! ([`super::Observation::Gone`]) none of them runs: its exit decides.

use std::time::Duration;

use super::Judge;
use super::decide::Decision;
use super::observation::LogState;
use super::output::Event;
use super::stage::Stage;
use crate::duration::format_duration;
use crate::verdict::Verdict;

impl Judge {
    /// The earliest time at which the judge wants a `Tick`, if any.
    pub fn next_deadline(&self) -> Option<Duration> {
        // The process was seen gone: its exit, on its way, decides; no window or deadline can
        // (a hold that ran out meanwhile would call a server that is gone `ready`).
        if self.gone_at.is_some() {
            return None;
        }
        let mut d: Vec<Duration> = Vec::new();
        match &self.stage {
            Stage::Decided(_) => return None,
            // While a fatal line settles, the settle deadline decides, not the ready window.
            Stage::Settling(s) => d.push(s.first_fatal_at + self.cfg.fail_settle),
            Stage::Confirming { ready_at } | Stage::Holding { ready_at } => {
                if let Some(w) = self.cfg.ready_window() {
                    d.push(*ready_at + w);
                }
            }
            Stage::Starting => {}
        }
        // While a batch job waits in its queue, only --queue-timeout runs (see `job_watch.rs`).
        let queued = self.queued();
        if queued {
            d.extend(self.queue_deadline());
        }
        if self.stage.ready_at().is_none() && !queued {
            if let Some(t) = self.timeout_at {
                d.push(t);
            }
            if let Some(b) = self.phase_budget() {
                d.push(self.phase_since + b);
            }
            if !self.log_ever_seen && !self.alive && !self.exited {
                d.push(self.watch_from + self.cfg.log_grace);
            }
        }
        if let Some(s) = self.stall_window().filter(|_| !queued) {
            d.push(self.last_progress_at + s);
        }
        if let Some((since, _)) = &self.unreadable_since {
            d.push(*since + self.cfg.unreadable_grace);
        }
        d.into_iter().min()
    }

    /// Decides whatever window or deadline has ended at `at`, the first in precedence order.
    pub(super) fn check_deadlines(&mut self, at: Duration, events: &mut Vec<Event>) {
        if self.gone_at.is_some() {
            return;
        }
        if self.settle_window_ended(at, events)
            || self.log_unreadable_too_long(at, events)
            || self.ready_window_ended(at, events)
        {
            return;
        }
        // Once ready, the deadlines of starting are over.
        if self.stage.ready_at().is_some() {
            return;
        }
        if self.queued() {
            self.queue_timed_out(at, events);
            return;
        }
        let _ = self.nothing_started(at, events)
            || self.stalled(at, events)
            || self.phase_over_budget(at, events)
            || self.start_timed_out(at, events);
    }

    /// The settle window after the first fatal line ended: `failed`.
    fn settle_window_ended(&mut self, at: Duration, events: &mut Vec<Event>) -> bool {
        let Some(s) = self.stage.settling() else {
            return false;
        };
        if at < s.first_fatal_at + self.cfg.fail_settle {
            return false;
        }
        // A launcher already reported how its ranks ended: the root cause among them.
        if self.decide_by_ranks(at, None, "the launcher is still running", events) {
            return true;
        }
        self.decide_failure(at, None, events);
        true
    }

    /// The log stayed unreadable past its grace: `monitor_error`.
    fn log_unreadable_too_long(&mut self, at: Duration, events: &mut Vec<Event>) -> bool {
        let Some((since, reason)) = self.unreadable_since.clone() else {
            return false;
        };
        if at < since + self.cfg.unreadable_grace {
            return false;
        }
        let reason = format!("cannot read the log {}: {reason}", self.cfg.log_path);
        self.decide(at, Decision::new(Verdict::MonitorError, reason), events);
        true
    }

    /// The confirmation window or the hold ended with the ready condition standing: `ready`.
    /// (A fatal line inside either is being settled: its failure is the verdict, never `ready`.)
    fn ready_window_ended(&mut self, at: Duration, events: &mut Vec<Event>) -> bool {
        match self.stage {
            Stage::Confirming { ready_at } if at >= ready_at + self.cfg.confirm => {
                // The verdict reports the time the condition first held.
                self.decide_ready(ready_at, events);
                true
            }
            Stage::Holding { ready_at } => {
                let Some(h) = self.cfg.hold else {
                    return false;
                };
                if at < ready_at + h {
                    return false;
                }
                let reason = format!(
                    "ready after {} and still healthy after the {} hold",
                    format_duration(ready_at),
                    format_duration(h)
                );
                let line = self.last_line.clone();
                self.decide(at, Decision::new(Verdict::Ready, reason).line(line), events);
                true
            }
            _ => false,
        }
    }

    /// No process appeared and the log was never created within the log grace: `never_started`.
    fn nothing_started(&mut self, at: Duration, events: &mut Vec<Event>) -> bool {
        if self.log_ever_seen
            || self.alive
            || self.exited
            || at < self.watch_from + self.cfg.log_grace
        {
            return false;
        }
        let dir_note = match self.log {
            LogState::Missing { dir_exists: false } => " (its directory does not exist either)",
            _ => "",
        };
        let reason = if self.cfg.expect_process {
            format!(
                "nothing started: the process never appeared and the log {} was never created{dir_note} within {}",
                self.cfg.log_path,
                format_duration(self.cfg.log_waited + self.cfg.log_grace)
            )
        } else {
            format!(
                "the log {} was never created{dir_note} within {} and no process was given to watch",
                self.cfg.log_path,
                format_duration(self.cfg.log_waited + self.cfg.log_grace)
            )
        };
        self.decide(at, Decision::new(Verdict::NeverStarted, reason), events);
        true
    }

    /// No progress evidence for the stall window: `stalled`.
    fn stalled(&mut self, at: Duration, events: &mut Vec<Event>) -> bool {
        let Some(s) = self.stall_window() else {
            return false;
        };
        if at < self.last_progress_at + s {
            return false;
        }
        let what = match (self.log_ever_seen, self.gpu.is_some()) {
            (true, false) => "no new log line, progress or CPU use",
            (true, true) => "no new log line, progress, CPU use or GPU memory growth",
            (false, false) => "no log and no CPU use",
            (false, true) => "no log, no CPU use and no GPU memory growth",
        };
        let outside = self.ranks.outside_collective.clone();
        let reason = format!(
            "stalled: {what} for {}{}{}{}",
            format_duration(s),
            self.phase
                .as_ref()
                .map(|p| format!(" in phase {p}"))
                .unwrap_or_default(),
            outside
                .as_ref()
                .map(|(rank, ev)| format!(
                    "; rank {rank} is not inside a collective while its peers wait in one ({ev})"
                ))
                .unwrap_or_default(),
            self.waiting_note()
        );
        // The rank that stopped making progress while its peers waited for it is the root cause.
        let line = self.last_line.clone();
        let d = Decision::new(Verdict::Stalled, reason)
            .line(line)
            .rank(outside.map(|(rank, _)| rank));
        self.decide(at, d, events);
        true
    }

    /// The current phase ran past its budget: `timed_out`.
    fn phase_over_budget(&mut self, at: Duration, events: &mut Vec<Event>) -> bool {
        let (Some(b), Some(phase)) = (self.phase_budget(), self.phase.clone()) else {
            return false;
        };
        if at < self.phase_since + b {
            return false;
        }
        let reason = format!(
            "timed out in phase {phase}: it ran past its budget of {} (began at {}){}",
            format_duration(b),
            format_duration(self.phase_since),
            self.waiting_note()
        );
        self.decide_at_last_line(at, Verdict::TimedOut, reason, events)
    }

    /// Still not ready at the start deadline: `timed_out`.
    fn start_timed_out(&mut self, at: Duration, events: &mut Vec<Event>) -> bool {
        let Some(t) = self.timeout_at else {
            return false;
        };
        if at < t {
            return false;
        }
        let reason = format!(
            "timed out after {} while still starting{}{}",
            format_duration(t),
            self.phase
                .as_ref()
                .map(|p| format!(" (phase {p})"))
                .unwrap_or_default(),
            self.waiting_note()
        );
        self.decide_at_last_line(at, Verdict::TimedOut, reason, events)
    }

    /// A deadline verdict: the decisive line is the last line the log showed (what it was doing).
    fn decide_at_last_line(
        &mut self,
        at: Duration,
        verdict: Verdict,
        reason: String,
        events: &mut Vec<Event>,
    ) -> bool {
        let line = self.last_line.clone();
        self.decide(at, Decision::new(verdict, reason).line(line), events);
        true
    }
}
