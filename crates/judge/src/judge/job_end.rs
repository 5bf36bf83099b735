//! A batch job's end (its terminal snapshot, sent once its log was read to the end), through the
//! same rules as a process's exit (`exit.rs`, `root_cause.rs`): a cause printed in the log wins,
//! and in a multi-task job the first task to fail is named.
//!
//! In order:
//! 1. `ExitCode` 0:53 and nothing in the log: the batch step could not open its output file, so
//!    the script never ran: `never_started`, naming the `--output` directory;
//! 2. ended while still queued, for a pending reason that could never clear: `never_started`;
//! 3. `COMPLETED` and `FAILED`: the job's `ExitCode` as a process's exit (a job's 0 is
//!    `succeeded`, a server's is `exited` before ready; `FAILED` is the log's cause, else the
//!    exit code or signal, and srun's task reports name the task);
//! 4. `OUT_OF_MEMORY`: as a SIGKILL by the OOM killer (the tasks' reports first), so `killed`
//!    with `oom_killed` unless the log printed a cause;
//! 5. the scheduler ended it (`TIMEOUT`/`DEADLINE` → `time_limit`, `NODE_FAIL`/`BOOT_FAIL` →
//!    `node_fail`, `PREEMPTED` → `preempted`, `CANCELLED` → `cancelled`, or, when firedup itself
//!    cancelled it, `terminated` as for a local process firedup stopped with SIGTERM): `killed`
//!    with that signature, its decisive line the scheduler's own (`*** JOB 12 ON node07
//!    CANCELLED AT ... DUE TO TIME LIMIT ***`); unless a cause (no echo) was printed before that
//!    line: then `failed` with it. The tasks' reports and lines after the scheduler's are its
//!    consequences.

use std::time::Duration;

use super::Judge;
use super::cause::LineFailure;
use super::decide::Decision;
use super::job_state::{JobEnd, never_satisfied, output_not_opened, reason_word};
use super::output::Event;
use crate::classify::Strength;
use crate::job::JobSnapshot;
use crate::verdict::{ExitInfo, Signature, Verdict};

impl Judge {
    /// The job ended as `end` says (`s` its terminal snapshot).
    pub(super) fn on_job_end(
        &mut self,
        at: Duration,
        end: JobEnd,
        s: &JobSnapshot,
        events: &mut Vec<Event>,
    ) {
        let was_queued = self.job.queued_since.take().is_some();
        self.alive = false;
        self.exited = true;
        self.job.exit = s.exit;
        if s.exit.is_some_and(|e| output_not_opened(&e)) && self.lines == 0 {
            self.decide_output_not_opened(at, events);
            return;
        }
        // A job can run and end between two polls: the nodes it was given, or its output, show
        // that it ran even when no RUNNING reading came.
        let ran = self.job.ran || !s.nodes.is_empty() || self.lines > 0;
        if !ran {
            if let Some(words) = s.reason.as_deref().and_then(never_satisfied) {
                let reason = format!(
                    "never started: the scheduler ended the job without starting it ({}: {words})",
                    reason_word(s.reason.as_deref().unwrap_or(""))
                );
                self.decide(at, Decision::new(Verdict::NeverStarted, reason), events);
                return;
            }
        }
        let queued = if was_queued && !ran {
            " while it was still queued"
        } else {
            ""
        };
        match end {
            JobEnd::Completed => {
                self.on_exit(at, Some(s.exit.unwrap_or(ExitInfo::code(0))), events)
            }
            JobEnd::Failed => self.on_exit(at, s.exit, events),
            JobEnd::OutOfMemory => self.decide_job_oom(at, events),
            JobEnd::Ended(Signature::Cancelled) if s.cancel_requested => {
                let what = format!("firedup cancelled the job (scancel){queued}");
                self.decide_scheduler_end(at, Signature::Terminated, &what, false, events);
            }
            JobEnd::Ended(sig) => {
                let what = format!("{}{queued}", scheduler_words(sig));
                self.decide_scheduler_end(at, sig, &what, true, events);
            }
        }
    }

    /// `ExitCode` 0:53 with an empty log: the job's output could not be opened.
    fn decide_output_not_opened(&mut self, at: Duration, events: &mut Vec<Event>) {
        let path = &self.cfg.log_path;
        let dir = match path.rsplit_once('/') {
            Some(("", _)) => "/".to_string(),
            Some((d, _)) => d.to_string(),
            None => ".".to_string(),
        };
        let reason = format!(
            "never started: the job ended before writing its log (Slurm exit 0:53): its --output directory probably does not exist ({dir}, for the log {path})"
        );
        self.decide(at, Decision::new(Verdict::NeverStarted, reason), events);
    }

    /// `OUT_OF_MEMORY`: as a SIGKILL by the OOM killer; the tasks' reports first.
    fn decide_job_oom(&mut self, at: Duration, events: &mut Vec<Event>) {
        let line = self.scheduler_line(Signature::OomKilled);
        self.oom.get_or_insert_with(|| {
            line.map(|l| l.text)
                .unwrap_or_else(|| "the scheduler's state OUT_OF_MEMORY".into())
        });
        let launcher = "the job ended OUT_OF_MEMORY";
        if self.decide_by_ranks(at, Some(ExitInfo::signal(9, false)), launcher, events) {
            return;
        }
        let what = scheduler_words(Signature::OomKilled);
        self.decide_scheduler_end(at, Signature::OomKilled, what, false, events);
    }

    /// The scheduler ended the job (`sig` names how, `what` in words): `killed`, or `failed` by
    /// a cause printed before the scheduler's own line. `advice`: the reason ends with what the
    /// signature's hint advises.
    fn decide_scheduler_end(
        &mut self,
        at: Duration,
        sig: Signature,
        what: &str,
        advice: bool,
        events: &mut Vec<Event>,
    ) {
        let after_ready = self.after_ready(at);
        let scheduler_line = self.scheduler_line(sig);
        let before = |n: u64| scheduler_line.as_ref().is_none_or(|l| n < l.number);
        let cause = self.line_cause(false).filter(|c| {
            c.hit.strength != Strength::Echo
                && !c.hit.signature.is_some_and(|s| s.is_signal_class())
                && before(c.line.number)
        });
        if let Some(cause) = cause {
            let reason = self.failure_reason(&cause, &format!("then {what}{after_ready}"));
            let f = LineFailure {
                cause,
                also: Some(sig),
                reason,
                exit: self.job.exit,
            };
            self.decide_failed(at, f, events);
            return;
        }
        let mut secondary: Vec<Signature> = self
            .evidence
            .iter()
            .filter(|e| e.hit.strength != Strength::Echo)
            .filter_map(|e| e.hit.signature)
            .filter(|s| *s != sig)
            .collect();
        secondary.sort();
        secondary.dedup();
        // The hint's advice (after its own words for what happened, which `what` says).
        let advice = sig
            .hint()
            .split_once(": ")
            .filter(|_| advice)
            .map(|(_, a)| format!(": {a}"))
            .unwrap_or_default();
        let reason = format!("killed: {what}{after_ready}{advice}");
        let line = scheduler_line.or_else(|| self.last_line.clone());
        let d = Decision::new(Verdict::Killed, reason)
            .signatures(Some(sig), secondary)
            .line(line)
            .exit(self.job.exit);
        self.decide(at, d, events);
    }

    /// The first line the scheduler printed about the end `sig` names (firedup's own cancel:
    /// the plain `CANCELLED AT` line).
    fn scheduler_line(&self, sig: Signature) -> Option<crate::verdict::LineRef> {
        let family = match sig {
            Signature::Terminated => Signature::Cancelled,
            s => s,
        };
        self.evidence
            .iter()
            .filter(|e| e.hit.signature == Some(family))
            .min_by_key(|e| e.line.number)
            .map(|e| e.line.clone())
    }
}

/// How the scheduler ended a job, in words.
fn scheduler_words(sig: Signature) -> &'static str {
    match sig {
        Signature::TimeLimit => "the scheduler ended the job at its time limit",
        Signature::NodeFail => "the job's node failed",
        Signature::Preempted => "the scheduler preempted the job",
        Signature::Cancelled => "someone else cancelled the job through the scheduler",
        Signature::OomKilled => {
            "the job ran out of its memory limit and the scheduler's OOM handling ended it"
        }
        _ => "the scheduler ended the job",
    }
}
