//! The verdict engine: a pure state machine.
//!
//! It is fed timestamped observations (log lines, which it classifies itself, log file state
//! changes, process start and exit, resource usage samples, probe answers, ticks) and answers with
//! events (phase changes, readiness, the verdict) and the next deadline at which it wants a tick.
//! It never reads the clock, the disk or the network: `at` is the time since launch (or attach) as
//! measured by the caller, so tests run it on simulated time.
//!
//! Rules (the verdicts of README.md): a fatal line ends the watch as `failed` after a short settle window, in which
//! the rest of the failure (traceback, the exit) is collected and the most specific signature wins;
//! an exit before ready is `exited`, `killed` or `never_started`, or `failed` if lines named a cause;
//! `stalled` after the stall window without progress evidence; `timed_out` at the overall deadline;
//! `monitor_error` when the log stays unreadable or a probe keeps failing through firedup's own
//! fault (a host that does not resolve, a URL that is not HTTP).
//!
//! Readiness is the conjunction of the ready lines (all seen) and the readiness probes (each one's
//! latest outcome is up): a health endpoint that answers 200 is not enough while the log has not
//! said ready, and vice versa. Probes only ever delay `ready`; a probe's own repeated faults end the
//! watch as `monitor_error`, and an answer from another process on the port is reported, never
//! taken as ready.
//!
//! The files, one idea each: `config` (what the judge is told), `observation` (what it is
//! fed), `output` (what it says), `stage` (where the watch stands), `line` (what a log line
//! changes), `cause` (which line evidence names the failure), `readiness`, `probes`, `progress`
//! (phases, progress evidence, usage), `deadlines` (the windows and their ends), `exit` (what an
//! exit means), `decide` (turning a decision into the verdict), and for a batch scheduler's job
//! `job_state` (what its words mean), `job_watch` (queued, running, requeued) and `job_end`.

use std::collections::VecDeque;
use std::time::Duration;

use crate::classify::LineClass;
use crate::verdict::{GpuReport, LineRef, PhaseAt};

mod cause;
mod config;
mod daemon;
mod deadlines;
mod decide;
mod exit;
#[cfg(test)]
mod fresh_log_tests;
mod inner_cause;
mod job_end;
mod job_state;
#[cfg(test)]
mod job_tests;
mod job_watch;
mod launcher_report;
mod line;
mod observation;
mod output;
mod owner_end;
mod probes;
mod progress;
mod quoted;
#[cfg(test)]
mod rank_tests;
mod ranks;
mod readiness;
mod reading;
mod root_cause;
mod srun_nodes;
mod stage;
#[cfg(test)]
mod time_tests;
mod traceback;
#[cfg(test)]
mod window_tests;
mod wrapped;

pub use crate::mode::Mode;
pub use config::{JudgeConfig, RecordedEnd};
pub use observation::{LogState, Observation};
pub use output::{Event, Judgement, Status};

use cause::Evidence;
use decide::Decision;
use job_watch::JobTrack;
use probes::ProbeTrack;
use ranks::Ranks;
use stage::Stage;
use traceback::Tracebacks;
use wrapped::Wraps;

/// The state machine.
#[derive(Debug)]
pub struct Judge {
    cfg: JudgeConfig,
    /// Where the watch stands (and what is valid there: the ready time, the settle window's
    /// context, the verdict).
    stage: Stage,
    /// Per ready line of the classifier: seen yet.
    ready_seen: Vec<bool>,
    /// The last line that satisfied a ready condition.
    ready_line: Option<LineRef>,
    timeline: Vec<PhaseAt>,
    phase: Option<String>,
    phase_since: Duration,
    progress: Option<f64>,
    last_progress_at: Duration,
    /// Hashes already (`line_shape::shape_hash`), so foldhash's cheap mix suffices here.
    seen_shapes: foldhash::HashSet<u64>,
    last_usage: Option<(u64, u64, Duration)>,
    /// Each distinct failure hit, with the first line that showed it.
    evidence: Vec<Evidence>,
    /// The last meaningful lines (context of a verdict before a fatal line).
    before: VecDeque<LineRef>,
    /// The shape hash of `before`'s last line (a redrawn progress bar replaces it).
    before_last_shape: Option<u64>,
    last_line: Option<LineRef>,
    /// What the last observed line meant (see [`Judge::last_line_class`]).
    last_class: Option<LineClass>,
    lines: u64,
    log: LogState,
    log_ever_seen: bool,
    unreadable_since: Option<(Duration, String)>,
    pid: Option<u32>,
    alive: bool,
    exited: bool,
    /// When the process was seen gone, before its status was learned ([`Observation::Gone`]).
    gone_at: Option<Duration>,
    oom: Option<String>,
    /// The run's owner ended (this pid, seen at this time) and firedup is stopping the run.
    owner_gone: Option<(u32, Duration)>,
    /// The batch scheduler's job, when the run is one (see `job_watch.rs`).
    job: JobTrack,
    /// The launcher exited 0 and the run went on in this daemon (said in every verdict's reason).
    followed: Option<String>,
    /// Where the followed daemon's output goes, when not to the log: no ready line can come.
    lines_unseeable: Option<String>,
    /// firedup itself is stopping the run, by whom (see [`Observation::FiredupStop`]).
    stopped_by: Option<String>,
    probes: Vec<ProbeTrack>,
    /// The start deadline, moved later by sd_notify `EXTEND_TIMEOUT_USEC`.
    timeout_at: Option<Duration>,
    /// When this watch began on the judge's clock (see [`Judge::watch_began`]).
    watch_from: Duration,
    notify_status: Option<String>,
    gpu: Option<GpuReport>,
    /// The Python tracebacks being read (per rank).
    tracebacks: Tracebacks,
    /// How the ranks of a multi-process launch ended.
    ranks: Ranks,
    /// The last line, held while it can be the first half of a hard-wrapped message.
    wraps: Wraps,
    /// The rank of the last log record that began with a header or a rank prefix: the rank of
    /// the lines that continue it without one (see `reading.rs`).
    record_rank: Option<u32>,
}

impl Judge {
    /// A judge for a watch configured by `cfg`, in its first stage.
    pub fn new(cfg: JudgeConfig) -> Self {
        let n = cfg.classifier.ready_count();
        Judge {
            stage: Stage::Starting,
            ready_seen: vec![false; n],
            ready_line: None,
            timeline: Vec::new(),
            phase: None,
            phase_since: Duration::ZERO,
            progress: None,
            last_progress_at: Duration::ZERO,
            seen_shapes: foldhash::HashSet::default(),
            last_usage: None,
            evidence: Vec::new(),
            before: VecDeque::new(),
            before_last_shape: None,
            last_line: None,
            last_class: None,
            lines: 0,
            log: LogState::Missing { dir_exists: true },
            log_ever_seen: false,
            unreadable_since: None,
            pid: None,
            alive: false,
            exited: false,
            gone_at: None,
            oom: None,
            owner_gone: None,
            job: JobTrack::default(),
            followed: None,
            lines_unseeable: None,
            stopped_by: None,
            probes: ProbeTrack::for_config(&cfg),
            timeout_at: cfg.timeout,
            watch_from: Duration::ZERO,
            notify_status: None,
            gpu: None,
            tracebacks: Tracebacks::default(),
            ranks: Ranks::default(),
            wraps: Wraps::default(),
            record_rank: None,
            cfg,
        }
    }

    /// The watch began at `at` on the judge's clock, which counts from the launch: later than
    /// zero when re-attaching to a run launched earlier. The watch's own waits (the start
    /// deadline, the stall window, the log grace, a phase's budget) count from here, so a late
    /// attach is not judged stalled or timed out for time it did not see; the times reported
    /// still count from the launch. Call it before the first observation.
    pub fn watch_began(&mut self, at: Duration) {
        self.watch_from = at;
        self.last_progress_at = at;
        self.phase_since = at;
        self.timeout_at = self.cfg.timeout.map(|t| at + t);
    }

    /// The watcher itself did not run for a while (its process was stopped, Ctrl-Z, or its
    /// machine paused) and runs again at `at`: what happened meanwhile is read next, and the
    /// windows that wait for a sign of life (the stall window, the grace of an unreadable log)
    /// count afresh from `at`, so time the watcher did not see is not taken for a silent server.
    /// The start deadline and a phase's budget stand: they are decided once the log has been
    /// read to its end.
    pub fn watch_resumed(&mut self, at: Duration) {
        self.progressed(at);
        if let Some((since, _)) = self.unreadable_since.as_mut() {
            *since = (*since).max(at);
        }
    }

    /// Progress evidence at `at`. Observations may arrive stamped earlier than the last one (a
    /// line stamped with when the log was known to hold it, read after a usage sample): the
    /// latest sign of life stands.
    pub(crate) fn progressed(&mut self, at: Duration) {
        self.last_progress_at = self.last_progress_at.max(at);
    }

    /// The verdict, once there is one.
    pub fn verdict(&self) -> Option<&Judgement> {
        self.stage.verdict()
    }

    /// What the last line observed meant, as the judge classified it (for an event stream that
    /// shows each line with its class); `None` before the first line.
    pub fn last_line_class(&self) -> Option<&LineClass> {
        self.last_class.as_ref()
    }

    /// Whether every readiness condition held (it stays so, also after a verdict).
    pub fn is_ready(&self) -> bool {
        self.stage.ready_at().is_some()
    }

    /// A snapshot for progress displays at `now`.
    pub fn status(&self, now: Duration) -> Status {
        Status {
            phase: self.phase.clone(),
            progress: self.progress,
            last_line: self.last_line.as_ref().map(|l| l.text.clone()),
            lines: self.lines,
            log_missing: matches!(self.log, LogState::Missing { .. }),
            process_alive: self.alive,
            ready: self.is_ready(),
            since_progress: now.saturating_sub(self.last_progress_at),
            waiting_for: self.waiting_for(),
            notify_status: self.notify_status.clone(),
            gpu_mib: self.gpu.as_ref().map(|g| g.last_mib),
            job: self.job_status(),
        }
    }

    /// Feeds one observation made at `at`; returns what changed.
    pub fn observe(&mut self, at: Duration, obs: Observation) -> Vec<Event> {
        let mut events = Vec::new();
        if self.verdict().is_some() {
            return events;
        }
        match obs {
            Observation::Line { number, text } => self.read_line(at, number, text, &mut events),
            Observation::Log(state) => self.on_log(at, state),
            Observation::Started { pid } => {
                self.pid = Some(pid);
                self.alive = true;
                self.progressed(at);
            }
            Observation::SpawnFailed { reason } => {
                self.alive = false;
                self.exited = true;
                self.decide(
                    at,
                    Decision::new(crate::verdict::Verdict::NeverStarted, reason),
                    &mut events,
                );
            }
            Observation::Gone => {
                // The latest: a followed daemon seen gone by mistake (its survivor was itself)
                // is seen gone again at its real end.
                if self.alive {
                    self.gone_at = Some(at);
                }
            }
            Observation::Exited(exit) => {
                self.alive = false;
                self.exited = true;
                self.on_exit(at, exit, &mut events);
            }
            Observation::LauncherLeft {
                pid,
                command,
                output,
            } => self.on_launcher_left(at, pid, command, output, &mut events),
            Observation::Usage {
                cpu_ticks,
                read_bytes,
            } => self.on_usage(at, cpu_ticks, read_bytes),
            Observation::OomEvidence(text) => self.oom = Some(text),
            Observation::OwnerGone { pid } => self.owner_gone = Some((pid, at)),
            Observation::Probe { kind, outcome } => self.on_probe(at, kind, outcome, &mut events),
            Observation::Notify(msg) => self.on_notify(at, msg, &mut events),
            Observation::GpuMemory(mib) => self.on_gpu_memory(at, mib),
            Observation::GpuError(e) => {
                self.gpu.get_or_insert_with(GpuReport::default).error = Some(e);
            }
            Observation::MonitorFault(reason) => self.decide(
                at,
                Decision::new(crate::verdict::Verdict::MonitorError, reason),
                &mut events,
            ),
            Observation::RankEnded { rank, pid: _, exit } => {
                self.ranks.on_rank_ended(at, rank, exit);
            }
            Observation::RankOutsideCollective { rank, evidence } => {
                self.ranks.outside_collective = Some((rank, evidence));
            }
            Observation::RankPlaces { ranks } => self.ranks.placed = Some((at, ranks)),
            Observation::Job(snapshot) => self.on_job(at, snapshot, &mut events),
            Observation::FiredupStop { by } => self.stopped_by = Some(by),
            Observation::Tick => {}
        }
        if self.verdict().is_none() {
            self.check_deadlines(at, &mut events);
        }
        events
    }

    fn on_log(&mut self, at: Duration, state: LogState) {
        match &state {
            LogState::Unreadable(reason) => {
                if self.unreadable_since.is_none() {
                    self.unreadable_since = Some((at, reason.clone()));
                }
            }
            LogState::Missing { .. } => self.unreadable_since = None,
            LogState::Readable | LogState::Truncated | LogState::Rotated => {
                self.unreadable_since = None;
                self.log_ever_seen = true;
            }
        }
        self.log = state;
    }
}

/// Seconds rounded to the millisecond, as reports show them.
fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests;
