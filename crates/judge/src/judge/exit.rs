//! What the process's exit means, in order: a shell that could not run the command (126, 127)
//! before ready is `never_started`, unless a named fatal cause was printed first (the loader's
//! "error while loading shared libraries" exits 127); in a multi-process launch whose ranks' endings are known, the
//! root cause among the ranks (`root_cause.rs`); a signal is `killed` (with the signal's signature: OOM,
//! segfault, abort, terminated) unless lines named another cause (`failed`, then ended by the
//! signal); otherwise lines that named a cause make it `failed`, a job's exit 0 is `succeeded`,
//! and anything else is `exited`.

use std::time::Duration;

use super::Judge;
use super::cause::{Evidence, LineFailure};
use super::decide::Decision;
use super::output::Event;
use super::root_cause::signal_signature;
use crate::classify::Strength;
use crate::duration::format_duration;
use crate::mode::Mode;
use crate::verdict::{ExitInfo, Signature, Verdict, signal_name};

impl Judge {
    /// The process ended with `exit` (`None`: status unknown).
    pub(super) fn on_exit(
        &mut self,
        at: Duration,
        exit: Option<ExitInfo>,
        events: &mut Vec<Event>,
    ) {
        // The owner's end is the more specific reason for firedup's own stop.
        if let Some((owner, _)) = self.owner_gone {
            self.decide_owner_gone(at, owner, exit, events);
            return;
        }
        let after_ready = self.after_ready(at);
        if let Some(e) = exit {
            // A shell's 126/127: the command never ran, unless it printed a named fatal cause
            // first (the dynamic loader's "error while loading shared libraries" exits 127: the
            // program was found, and the line says what it lacked).
            let printed_cause = self
                .line_cause(true)
                .is_some_and(|c| c.hit.signature.is_some_and(|s| !s.is_signal_class()));
            if self.stage.ready_at().is_none()
                && matches!(e.code, Some(126) | Some(127))
                && !printed_cause
            {
                self.decide_not_run(at, e, events);
                return;
            }
        }
        let launcher = format!(
            "the launcher exited with {}{after_ready}",
            exit.map(|e| e.describe())
                .unwrap_or_else(|| "an unknown status".into())
        );
        // The ranks' ends after firedup's own stop are the stop's doing, not a root cause.
        if self.stopped_by.is_none() && self.decide_by_ranks(at, exit, &launcher, events) {
            return;
        }
        if let Some(e) = exit {
            if let Some(sig) = e.effective_signal() {
                self.decide_signal(at, e, sig, &after_ready, events);
                return;
            }
        }
        self.decide_status(at, exit, &after_ready, events);
    }

    /// " 2.0s after becoming ready" when the exit came after the ready condition held. Inside the
    /// confirmation window the server was never reported ready: only its ready condition had held.
    /// A run that has ended counts between the times recorded while it ran (its log, read at
    /// once, cannot tell them).
    pub(super) fn after_ready(&self, at: Duration) -> String {
        let at = self.ended_at(at);
        let became = if self.cfg.hold.is_some() {
            "becoming ready"
        } else {
            "its ready condition held"
        };
        if let Some(r) = self.cfg.recorded_end {
            return match (r.ready_at, r.ended_at) {
                (Some(ready), Some(end)) => format!(
                    " {} after becoming ready",
                    format_duration(end.saturating_sub(ready))
                ),
                (Some(_), None) => " after becoming ready".into(),
                // Ready in the replay alone: when, it cannot tell.
                (None, _) if self.stage.ready_at().is_some() => format!(" after {became}"),
                (None, _) => String::new(),
            };
        }
        self.stage
            .ready_at()
            .map(|r| format!(" {} after {became}", format_duration(at.saturating_sub(r))))
            .unwrap_or_default()
    }

    /// When the process ended, for an exit observed `at`: when it was seen gone, if that came
    /// first.
    fn ended_at(&self, at: Duration) -> Duration {
        self.gone_at.map_or(at, |g| g.min(at))
    }

    /// The shell exited 126 or 127 before ready: the command never ran.
    fn decide_not_run(&mut self, at: Duration, e: ExitInfo, events: &mut Vec<Event>) {
        let what = if e.code == Some(127) {
            "command not found"
        } else {
            "command not executable"
        };
        let last = self
            .last_line
            .as_ref()
            .map(|l| format!(": {}", l.text))
            .unwrap_or_default();
        let reason = format!(
            "never started: the shell exited {} ({what}){last}",
            e.code.unwrap_or(0)
        );
        let line = self.last_line.clone();
        let d = Decision::new(Verdict::NeverStarted, reason)
            .line(line)
            .exit(Some(e));
        self.decide(at, d, events);
    }

    /// Ended by signal `sig`: `killed`, or `failed` when lines named a cause the signal does not.
    fn decide_signal(
        &mut self,
        at: Duration,
        e: ExitInfo,
        sig: i32,
        after_ready: &str,
        events: &mut Vec<Event>,
    ) {
        let signal_sig = signal_signature(sig, self.oom.is_some());
        let status = e.describe();
        if let Some(cause) = self
            .line_cause(false)
            .filter(|ev| !ev.hit.signature.is_some_and(|s| s.is_signal_class()))
            .or_else(|| self.echo_beside_signal())
        {
            let reason =
                self.failure_reason(&cause, &format!("then ended by {status}{after_ready}"));
            let f = LineFailure {
                cause,
                also: signal_sig,
                reason,
                exit: Some(e),
            };
            self.decide_failed(at, f, events);
            return;
        }
        let mut secondary: Vec<Signature> = self
            .evidence
            .iter()
            .filter_map(|e| e.hit.signature)
            .filter(|s| Some(*s) != signal_sig)
            .collect();
        secondary.sort();
        secondary.dedup();
        let oom = self
            .oom
            .as_ref()
            .map(|o| format!(" (OOM killer: {o})"))
            .unwrap_or_default();
        // A signal of firedup's own stop is not "someone else's" (the OOM killer's stays its).
        let hint = match (&self.stopped_by, signal_sig) {
            (Some(by), s) if s != Some(Signature::OomKilled) => format!(": {by} stopped it"),
            (_, s) => s.map(|s| format!(": {}", s.hint())).unwrap_or_default(),
        };
        let reason = format!(
            "killed by {} ({status}){after_ready}{oom}{hint}",
            signal_name(sig),
        );
        let line = self
            .evidence
            .first()
            .map(|e| e.line.clone())
            .or_else(|| self.last_line.clone());
        let d = Decision::new(Verdict::Killed, reason)
            .signatures(signal_sig, secondary)
            .line(line)
            .exit(Some(e));
        self.decide(at, d, events);
    }

    /// An echo that names a cause where the only other lines are the signal's own (a watchdog's
    /// collective timeout, then its `terminate called ...` abort): the first line of the most
    /// specific one.
    fn echo_beside_signal(&self) -> Option<Evidence> {
        let echoes = || {
            self.evidence.iter().filter(|e| {
                e.hit.strength == Strength::Echo
                    && e.hit.signature.is_some_and(|s| !s.is_signal_class())
            })
        };
        let best = echoes().min_by_key(|e| e.hit.precedence())?;
        echoes()
            .find(|e| e.hit.signature == best.hit.signature)
            .cloned()
    }

    /// Ended with a status (or an unknown one): `failed` by a line cause, a job's `succeeded`,
    /// else `exited`.
    fn decide_status(
        &mut self,
        at: Duration,
        exit: Option<ExitInfo>,
        after_ready: &str,
        events: &mut Vec<Event>,
    ) {
        let status = exit
            .map(|e| e.describe())
            .unwrap_or_else(|| "an unknown status".into());
        let ok = exit.is_some_and(|e| e.code == Some(0));
        if let Some(cause) = self.line_cause(ok) {
            let reason =
                self.failure_reason(&cause, &format!("then exited with {status}{after_ready}"));
            let f = LineFailure {
                cause,
                also: None,
                reason,
                exit,
            };
            self.decide_failed(at, f, events);
            return;
        }
        let line = self.last_line.clone();
        if ok && self.cfg.mode == Mode::UntilExit {
            let reason = format!(
                "the job exited 0 after {}",
                format_duration(self.ended_at(at))
            );
            let d = Decision::new(Verdict::Succeeded, reason)
                .line(line)
                .exit(exit);
            self.decide(at, d, events);
            return;
        }
        let reason = if let Some(by) = &self.stopped_by {
            format!("the process exited with {status}{after_ready} when {by} stopped it")
        } else if ok {
            format!("the server exited 0{after_ready} before it was ready")
        } else if exit.is_none() {
            // Not firedup's child, reaped by its parent before the kernel's record could be read
            // (and no pidfd that keeps it): an exit code or a signal, nobody here can tell.
            format!(
                "the process ended{after_ready}, and how (an exit code or a signal) could not be learned: it is not firedup's child and its parent reaped it first; no known failure was printed"
            )
        } else {
            format!(
                "the process exited with {status}{after_ready}, and no known failure was printed"
            )
        };
        let d = Decision::new(Verdict::Exited, reason).line(line).exit(exit);
        self.decide(at, d, events);
    }
}
