//! [`SlurmSource`]: a Slurm job as observations for the judge loop. The job's log (its
//! `StdOut=`) is followed by a `LocalObserver` that has no process to watch (as `watch --log`
//! without `--pid`), the probes included; the job's state is polled with `scontrol show job -o`
//! about every second (Slurm gives no events) and sent as [`Observation::Job`] each time one of
//! its fields changes.
//!
//! The end: once the job reaches a terminal state that is settled (see
//! [`JobInfo::settled`]), the log is given a moment for the node's last writes, read to its end,
//! and only then the terminal snapshot is sent, so a cause printed just before the end (the OOM
//! line of slurmstepd, a traceback) is never missed. The run directory, when there is one, gets
//! the exit record (`exit.json`), so `ps` and `stop` know the run ended.
//!
//! Where the job runs on this machine, its processes (found by the run's `FIREDUP_RUN_ID`, else
//! by `scontrol listpids`) are sampled for CPU time and reads: a busy but quiet job is not
//! stalled. A job Slurm forgot while watched, or a controller unreachable for
//! [`CONTROLLER_GRACE`], is a `monitor_error` (an [`Observation::MonitorFault`]).

use std::time::{Duration, Instant};

use super::job_info::JobInfo;
use super::{CANCEL_MARKER, Slurm};
use crate::judge::Observation;
use crate::observe::{LocalObserver, ObserveSettings};
use crate::plan::Plan;
use crate::process;
use crate::rundir::{ExitRecord, RunDir};
use crate::source::{Seen, Source, sample_interval};
use crate::target::Target;
use firedup_judge::job::JobSnapshot;

/// How often the job's state is read.
const POLL: Duration = Duration::from_secs(1);
/// How long the scheduler's commands may fail in a row before the watch is a `monitor_error`.
pub const CONTROLLER_GRACE: Duration = Duration::from_secs(60);
/// After the job ended, how long its log is still followed before it is read to its end: the
/// node's last writes (slurmstepd's OOM line) may land just after the state changed.
const LOG_SETTLE: Duration = Duration::from_millis(500);

/// A Slurm job, observed.
pub struct SlurmSource {
    slurm: Slurm,
    job_id: String,
    observer: LocalObserver,
    start: Instant,
    run: Option<RunDir>,
    run_id: String,
    spawn_error: Option<String>,
    next_poll: Instant,
    /// The last snapshot sent.
    last: Option<JobSnapshot>,
    /// The node list last expanded, and its host names.
    nodes: Option<(String, Vec<String>)>,
    /// A terminal state was read on the previous poll.
    terminal_before: bool,
    /// The job ended (settled) at this instant; its snapshot waits for the log.
    ended: Option<(Instant, JobInfo)>,
    done: bool,
    /// The scheduler's commands fail since then, with this error.
    failing: Option<(Instant, String)>,
    /// The job runs on this machine.
    here: bool,
    next_sample: Instant,
    sample_every: Duration,
    notes: Vec<String>,
}

impl std::fmt::Debug for SlurmSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlurmSource")
            .field("job_id", &self.job_id)
            .finish_non_exhaustive()
    }
}

impl SlurmSource {
    /// Observes job `job_id`, whose log is `target.log`, as `plan` says. `target.run`: the run
    /// firedup submitted (its cancel marker, its exit record); `target.spawn_error`: `sbatch`
    /// refused the job.
    pub fn new(plan: &Plan, target: &Target, job_id: &str) -> SlurmSource {
        let settings = ObserveSettings {
            line_cap: plan.line_cap,
            from_end: plan.from_end,
            resume: None,
            probes: plan.probes.clone(),
            sample_every: sample_interval(plan),
            follow_run: false,
        };
        SlurmSource::with_settings(&settings, target, job_id)
    }

    /// As [`SlurmSource::new`], with the observer's settings given (the SSH agent's, which
    /// resume the log where a lost link left it).
    pub(crate) fn with_settings(
        settings: &ObserveSettings,
        target: &Target,
        job_id: &str,
    ) -> SlurmSource {
        // The log is followed without a process: the job's end comes from its state.
        let followed = Target {
            pid: None,
            start_ticks: None,
            spawn_error: None,
            exit_pipe: None,
            ..target.clone()
        };
        let settings = ObserveSettings {
            follow_run: false,
            ..settings.clone()
        };
        let start = Instant::now();
        SlurmSource {
            slurm: Slurm,
            job_id: job_id.to_string(),
            observer: LocalObserver::new(&followed, &settings, start),
            start,
            run: target.run.clone(),
            run_id: target.run_id.clone(),
            spawn_error: target.spawn_error.clone(),
            next_poll: start,
            last: None,
            nodes: None,
            terminal_before: false,
            ended: None,
            done: false,
            failing: None,
            here: false,
            next_sample: start,
            sample_every: settings.sample_every,
            notes: Vec::new(),
        }
    }

    /// Whether the watch is over: the job's end (or the reason it cannot be told) was sent.
    pub(crate) fn ended(&self) -> bool {
        self.done
    }

    /// Where a new observer would resume the log: see [`LocalObserver::resume_point`].
    pub(crate) fn resume_point(&self) -> (u64, u64) {
        self.observer.resume_point()
    }

    fn at(&self) -> Duration {
        self.start.elapsed()
    }

    /// Reads the job's state and says what changed.
    fn poll(&mut self, out: &mut Vec<(Duration, Observation)>) {
        self.next_poll = Instant::now() + POLL;
        let info = match self.slurm.show_job(&self.job_id) {
            Ok(Some(info)) => {
                self.failing = None;
                info
            }
            Ok(None) => {
                self.finish_log(out);
                out.push((
                    self.at(),
                    Observation::MonitorFault(format!(
                        "Slurm no longer knows job {} (it ended longer ago than the cluster's MinJobAge, or was purged): how it ended cannot be told",
                        self.job_id
                    )),
                ));
                self.done = true;
                return;
            }
            Err(e) => {
                let since = self
                    .failing
                    .get_or_insert_with(|| (Instant::now(), e.clone()))
                    .0;
                if since.elapsed() >= CONTROLLER_GRACE {
                    out.push((
                        self.at(),
                        Observation::MonitorFault(format!(
                            "cannot reach the Slurm controller: {e} (for {}s; job {} may still run: firedup watch --slurm-job {})",
                            CONTROLLER_GRACE.as_secs(),
                            self.job_id,
                            self.job_id
                        )),
                    ));
                    self.done = true;
                } else if since.elapsed() < POLL {
                    self.notes.push(format!("scontrol failed: {e}; retrying"));
                }
                return;
            }
        };
        let settled = info.settled(self.terminal_before);
        self.terminal_before = info.is_terminal();
        if info.is_terminal() && !settled {
            return;
        }
        self.here = info.batch_host.as_deref().is_some_and(super::is_this_host);
        let snapshot = self.snapshot(&info);
        if let Some(last) = &self.last {
            if snapshot.restarts > last.restarts {
                self.notes.push(format!(
                    "job {} was requeued (Restarts={}): its log continues",
                    self.job_id, snapshot.restarts
                ));
            }
        }
        if settled {
            self.ended = Some((Instant::now(), info));
            return;
        }
        if self.last.as_ref() != Some(&snapshot) {
            self.last = Some(snapshot.clone());
            out.push((self.at(), Observation::Job(snapshot)));
        }
    }

    fn snapshot(&mut self, info: &JobInfo) -> JobSnapshot {
        let nodes = match (&info.node_list, &self.nodes) {
            (None, _) => Vec::new(),
            (Some(list), Some((known, names))) if list == known => names.clone(),
            (Some(list), _) => {
                let names = self.slurm.hostnames(list);
                self.nodes = Some((list.clone(), names.clone()));
                names
            }
        };
        let position = info
            .is_pending()
            .then(|| self.slurm.queue_position(&info.id, None))
            .flatten();
        let cancel_requested = self
            .run
            .as_ref()
            .is_some_and(|r| r.path.join(CANCEL_MARKER).exists());
        info.snapshot(nodes, position, cancel_requested)
    }

    /// The job ended: the rest of its log, then its terminal snapshot and the run's exit record.
    fn finish(&mut self, info: JobInfo, out: &mut Vec<(Duration, Observation)>) {
        self.finish_log(out);
        let snapshot = self.snapshot(&info);
        if let Some(run) = &self.run {
            if run.exit().is_none() {
                let _ = run.write_exit(&ExitRecord {
                    exit: snapshot.exit,
                    spawn_error: None,
                    ended_at: crate::rundir::now_unix(),
                });
            }
        }
        self.last = Some(snapshot.clone());
        out.push((self.at(), Observation::Job(snapshot)));
        self.done = true;
    }

    fn finish_log(&mut self, out: &mut Vec<(Duration, Observation)>) {
        self.observer.drain(out);
    }

    /// CPU time and reads of the job's processes on this machine.
    fn sample(&mut self, out: &mut Vec<(Duration, Observation)>) {
        self.next_sample = Instant::now() + self.sample_every;
        let running = self.last.as_ref().is_some_and(|s| s.state == "RUNNING");
        if !self.here || !running {
            return;
        }
        let pids = match process::of_run(&self.run_id).pids {
            p if !p.is_empty() => p,
            _ => self.slurm.listpids(&self.job_id).unwrap_or_default(),
        };
        if pids.is_empty() {
            return;
        }
        let (cpu, read) = process::usage_of(&pids);
        out.push((
            self.at(),
            Observation::Usage {
                cpu_ticks: cpu,
                read_bytes: read,
            },
        ));
    }
}

impl Source for SlurmSource {
    fn collect(&mut self, out: &mut Vec<Seen>) {
        let mut buf = Vec::new();
        if let Some(reason) = self.spawn_error.take() {
            buf.push((self.at(), Observation::SpawnFailed { reason }));
            self.done = true;
        }
        if let Some(note) = self.observer.take_note() {
            self.notes.push(note);
        }
        let mut followed = Vec::new();
        self.observer.collect(&mut followed);
        // Output from a job last read as pending shows that it runs: its state is read again
        // first, so the judge learns it runs before it reads what it printed (a server that
        // starts and prints its ready line within one poll is not ready "while queued").
        let printed = followed
            .iter()
            .any(|(_, o)| matches!(o, Observation::Line { .. }));
        let pending = self.last.as_ref().is_some_and(|s| s.state == "PENDING");
        if printed && pending && !self.done && self.ended.is_none() {
            let mut state = Vec::new();
            self.poll(&mut state);
            // A watch that ends on this poll (Slurm forgot the job) drains the log after the
            // lines followed: those come first then.
            if self.done {
                followed.append(&mut state);
            } else {
                buf.append(&mut state);
            }
        }
        buf.append(&mut followed);
        if !self.done {
            match self.ended.take() {
                Some((at, info)) if at.elapsed() >= LOG_SETTLE => self.finish(info, &mut buf),
                Some(ended) => self.ended = Some(ended),
                None if Instant::now() >= self.next_poll => self.poll(&mut buf),
                None => {}
            }
            if !self.done && Instant::now() >= self.next_sample {
                self.sample(&mut buf);
            }
        }
        let now = self.at();
        out.extend(self.notes.drain(..).map(|n| Seen::Note(now, n)));
        out.extend(buf.into_iter().map(|(at, o)| Seen::Obs(at, o)));
    }

    fn wait(&mut self, until: Instant) {
        self.observer.wait(until.min(self.next_wake()))
    }

    fn now(&self) -> Duration {
        self.at()
    }

    fn caught_up(&self) -> bool {
        self.observer.caught_up()
    }
    fn read_through(&self) -> Option<Duration> {
        self.observer.read_through()
    }

    fn next_wake(&self) -> Instant {
        let mut at = self.observer.next_wake();
        if !self.done {
            at = at.min(self.next_poll).min(self.next_sample);
            if let Some((ended, _)) = &self.ended {
                at = at.min(*ended + LOG_SETTLE);
            }
        }
        at
    }
}
