//! A batch scheduler's job while it waits and runs (`Observation::Job`, one snapshot each time a
//! field changes; what the words mean is `job_state.rs`'s):
//!
//! - queued (PENDING, held, requeued, suspended): the phase `queued`. Time in it counts toward
//!   neither `--timeout` nor `--stall`, nor the log grace (a log that does not exist yet is
//!   normal); `--queue-timeout` bounds each wait (`timed_out`, naming the state and the reason);
//!   a pending reason that can never clear is `never_started` at once.
//! - running: the job's processes are alive; the start deadline, the stall window and the log
//!   grace start when it leaves the queue.
//! - requeued (back in the queue after running, or `Restarts=` grew): a fresh attempt; the
//!   failure evidence of the one before is dropped (the log goes on, appended), the watch goes on
//!   and says so. Requeued after its ready condition held (inside the confirmation window or
//!   `--hold`): the server went away, `killed`.
//! - ended: `job_end.rs`.
//!
//! Every verdict of a job's watch names the job, its last state, nodes and exit, and how many
//! times it was requeued; its `exit` is the job's `ExitCode` (a rank's own, where the verdict
//! names the rank and knows how it ended).

use std::time::Duration;

use super::Judge;
use super::decide::Decision;
use super::job_state::{
    JobStage, never_satisfied, queue_detail, queue_words, reason_word, slurm_exit_code, stage_of,
    times,
};
use super::output::{Event, Judgement};
use super::ranks::Ranks;
use super::traceback::Tracebacks;
use crate::duration::format_duration;
use crate::job::JobSnapshot;
use crate::verdict::{ExitInfo, Verdict};

/// What the judge keeps of a scheduler's job.
#[derive(Debug, Default)]
pub(super) struct JobTrack {
    /// The last snapshot.
    pub(super) last: Option<JobSnapshot>,
    /// Since when the job has waited in the queue; `None` while it is not queued.
    pub(super) queued_since: Option<Duration>,
    /// It was seen running (in any attempt).
    pub(super) ran: bool,
    /// How many times it was requeued (seen, or as its `Restarts=` said).
    pub(super) requeues: u32,
    /// The job's `ExitCode`, once it ended.
    pub(super) exit: Option<ExitInfo>,
    /// The last queue note's state and reason, so that a note is said once.
    noted: Option<(String, Option<String>)>,
}

impl Judge {
    /// A snapshot of the job, read at `at`.
    pub(super) fn on_job(&mut self, at: Duration, s: JobSnapshot, events: &mut Vec<Event>) {
        let stage = stage_of(&s.state);
        let previous = self.job.last.replace(s.clone());
        let restarts_grew = previous.as_ref().is_some_and(|p| s.restarts > p.restarts);
        // Suspended is a wait (its time counts toward no window), not a requeue.
        let back_in_queue = stage == JobStage::Queued
            && self.alive
            && self.job.queued_since.is_none()
            && !s.state.starts_with("SUSPENDED");
        let requeued = restarts_grew || back_in_queue;
        self.job.requeues = self.job.requeues.max(s.restarts);
        if requeued {
            self.job.requeues = self
                .job
                .requeues
                .max(previous.map_or(0, |p| p.restarts) + 1);
            if self.requeued_after_ready(at, events) {
                return;
            }
            self.fresh_attempt();
            events.push(Event::Job {
                note: format!("requeued {} by the scheduler", times(self.job.requeues)),
                at,
            });
        }
        match stage {
            JobStage::Queued => self.job_queued(at, &s, events),
            JobStage::Running => self.job_running(at, &s, requeued, events),
            JobStage::Ended(end) => self.on_job_end(at, end, &s, events),
            JobStage::Unknown => {}
        }
    }

    /// The job waits in the queue.
    fn job_queued(&mut self, at: Duration, s: &JobSnapshot, events: &mut Vec<Event>) {
        self.alive = false;
        if self.job.queued_since.is_none() {
            self.job.queued_since = Some(at);
            self.enter_phase(at, "queued".to_string(), events);
        }
        if let Some(words) = s.reason.as_deref().and_then(never_satisfied) {
            let reason = format!(
                "never started: the scheduler will never start it ({}: {words})",
                reason_word(s.reason.as_deref().unwrap_or(""))
            );
            self.decide(at, Decision::new(Verdict::NeverStarted, reason), events);
            return;
        }
        let key = (s.state.clone(), s.reason.clone());
        if self.job.noted.as_ref() != Some(&key) {
            self.job.noted = Some(key);
            events.push(Event::Job {
                note: queue_words(s),
                at,
            });
        }
    }

    /// The job runs (or completes): when it just left the queue, the start deadline, the stall
    /// window and the log grace start now.
    fn job_running(
        &mut self,
        at: Duration,
        s: &JobSnapshot,
        requeued: bool,
        events: &mut Vec<Event>,
    ) {
        let queued_since = self.job.queued_since.take();
        let starting = !self.alive || requeued;
        self.alive = true;
        self.job.ran = true;
        self.job.noted = None;
        if !starting {
            return;
        }
        if queued_since.is_some() || requeued {
            self.last_progress_at = at;
            self.timeout_at = self.cfg.timeout.map(|t| at + t);
            self.watch_from = at;
            if self.phase.as_deref() == Some("queued") {
                self.enter_phase(at, "running".to_string(), events);
            }
        }
        let waited = queued_since
            .map(|q| {
                format!(
                    " after {} in the queue",
                    format_duration(at.saturating_sub(q))
                )
            })
            .unwrap_or_default();
        events.push(Event::Job {
            note: format!("{}{waited}", running_words(s)),
            at,
        });
    }

    /// Requeued after the ready condition held (the confirmation window or `--hold` running):
    /// the server the condition was about went away. True when that decided.
    fn requeued_after_ready(&mut self, at: Duration, events: &mut Vec<Event>) -> bool {
        if self.stage.ready_at().is_none() || self.stage.settling().is_some() {
            return false;
        }
        let reason = format!(
            "killed: the scheduler requeued the job{}",
            self.after_ready(at)
        );
        let line = self.last_line.clone();
        self.decide(
            at,
            Decision::new(Verdict::Killed, reason).line(line),
            events,
        );
        true
    }

    /// A requeued job starts over: what the attempt before printed is not this one's failure
    /// (the log goes on, appended), and the ready lines must be seen again.
    fn fresh_attempt(&mut self) {
        self.evidence.clear();
        self.ranks = Ranks::default();
        self.tracebacks = Tracebacks::default();
        self.record_rank = None;
        self.oom = None;
        self.ready_seen.iter_mut().for_each(|s| *s = false);
    }

    /// Still queued when `--queue-timeout` ended: `timed_out`. True when that decided.
    pub(super) fn queue_timed_out(&mut self, at: Duration, events: &mut Vec<Event>) -> bool {
        let Some(end) = self.queue_deadline() else {
            return false;
        };
        if at < end {
            return false;
        }
        let Some(s) = self.job.last.as_ref() else {
            return false;
        };
        let detail = queue_detail(s, false);
        let reason = format!(
            "timed out in the queue: still {}{} after {} (--queue-timeout)",
            s.state,
            if detail.is_empty() {
                String::new()
            } else {
                format!(" ({detail})")
            },
            format_duration(self.cfg.queue_timeout.unwrap_or_default())
        );
        self.decide(at, Decision::new(Verdict::TimedOut, reason), events);
        true
    }

    /// When `--queue-timeout` ends the current wait in the queue, if it does.
    pub(super) fn queue_deadline(&self) -> Option<Duration> {
        Some(self.job.queued_since? + self.cfg.queue_timeout?)
    }

    /// Whether the job waits in its scheduler's queue now.
    pub(super) fn queued(&self) -> bool {
        self.job.queued_since.is_some()
    }

    /// The job's standing in words, for status displays.
    pub(super) fn job_status(&self) -> Option<String> {
        let s = self.job.last.as_ref()?;
        let mut words = match stage_of(&s.state) {
            JobStage::Queued => queue_words(s),
            JobStage::Running => running_words(s),
            _ => s.state.clone(),
        };
        if self.job.requeues > 0 {
            words.push_str(&format!(" (requeued {})", times(self.job.requeues)));
        }
        Some(words)
    }

    /// The verdict `j` of a job's watch names the job and reports its `ExitCode`, unless the
    /// verdict names a rank whose own exit is known.
    pub(super) fn note_job(&self, j: &mut Judgement) {
        let Some(s) = self.job.last.as_ref() else {
            return;
        };
        let rank_exit = j
            .rank
            .and_then(|r| self.ranks.ending_of(r))
            .and_then(|e| e.exit);
        if self.job.exit.is_some() && (rank_exit.is_none() || j.exit != rank_exit) {
            j.exit = self.job.exit;
        }
        let mut parts = vec![format!("{} job {} {}", scheduler_name(s), s.id, s.state)];
        if !s.nodes.is_empty() {
            parts[0].push_str(&format!(" on {}", s.nodes.join(",")));
        }
        if let Some(e) = &self.job.exit {
            parts.push(format!("ExitCode {}", slurm_exit_code(e)));
        }
        if self.job.requeues > 0 {
            parts.push(format!("requeued {}", times(self.job.requeues)));
        }
        j.reason = format!("{} ({})", j.reason, parts.join(", "));
    }
}

/// `Slurm` for `slurm`; another scheduler as it is named.
pub(super) fn scheduler_name(s: &JobSnapshot) -> String {
    match s.scheduler.as_str() {
        "slurm" | "" => "Slurm".to_string(),
        other => other.to_string(),
    }
}

/// `running on node07, node08` (`completing on ...` while it completes).
fn running_words(s: &JobSnapshot) -> String {
    let verb = if s.state.starts_with("COMPLETING") {
        "completing"
    } else {
        "running"
    };
    if s.nodes.is_empty() {
        verb.to_string()
    } else {
        format!("{verb} on {}", s.nodes.join(", "))
    }
}
