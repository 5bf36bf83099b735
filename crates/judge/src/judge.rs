//! The verdict engine: a pure state machine.
//!
//! It is fed timestamped observations (classified log lines, log file state changes, process start
//! and exit, resource usage samples, ticks) and answers with events (phase changes, readiness, the
//! verdict) and the next deadline at which it wants a tick. It never reads the clock, the disk or the
//! network: `at` is the time since launch (or attach) as measured by the caller, so tests run it on
//! simulated time.
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

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use crate::classify::{Classifier, Hit, LineClass, Strength};
use crate::duration::format_duration;
use crate::line_shape::shape_hash;
use crate::notify_message::NotifyMessage;
use crate::probe_outcome::ProbeOutcome;
use crate::profile::ProbeKind;
use crate::verdict::{
    ExitInfo, GpuReport, LineRef, PhaseAt, ProbeReport, Signature, Verdict, signal_name,
};

pub use crate::mode::Mode;

/// What the judge needs to know about the watch.
#[derive(Debug, Clone)]
pub struct JudgeConfig {
    pub mode: Mode,
    /// What each log line means: the catalog and the profile's signatures, `--fail-line`, the
    /// ready lines (all must be seen), noise and phases. The judge classifies every line with it.
    pub classifier: Classifier,
    pub stall: Option<Duration>,
    pub timeout: Option<Duration>,
    /// How long a missing log may stay missing while no process is known.
    pub log_grace: Duration,
    /// How long the log may stay unreadable before `monitor_error`.
    pub unreadable_grace: Duration,
    /// After the first fatal line, how long to collect the rest of the failure.
    pub fail_settle: Duration,
    /// After ready, keep watching this long and report a crash inside the window.
    pub hold: Option<Duration>,
    /// Without a `hold`: how long the ready condition must stand before the verdict is `ready`.
    /// A fatal line or an exit inside it overrides the ready condition (uvicorn prints
    /// `Application startup complete.` before it binds its port, and the bind error comes on the
    /// next line); the verdict then reports the time the condition first held. Zero: at once.
    pub confirm: Duration,
    /// A process is expected (launch, `--pid`, run id); without one only the log tells.
    pub expect_process: bool,
    pub log_path: String,
    pub context_lines: usize,
    /// Probes that must pass before ready, each with what it probes (for reports).
    pub ready_probes: Vec<(ProbeKind, String)>,
    /// This many faults in a row of one probe end the watch as `monitor_error`.
    pub probe_fault_limit: u32,
    /// Per-phase budgets: being in the phase longer than this is `timed_out`.
    pub phase_budgets: Vec<(String, Duration)>,
    /// Where the probes run from, for reports (`local`, `remote HOST`).
    pub probe_origin: String,
}

impl JudgeConfig {
    pub fn new(mode: Mode, log_path: &str, classifier: Classifier) -> Self {
        JudgeConfig {
            mode,
            classifier,
            stall: None,
            timeout: None,
            log_grace: Duration::from_secs(30),
            unreadable_grace: Duration::from_secs(2),
            fail_settle: Duration::from_millis(1500),
            hold: None,
            confirm: Duration::ZERO,
            expect_process: true,
            log_path: log_path.to_string(),
            context_lines: 6,
            ready_probes: Vec::new(),
            probe_fault_limit: 3,
            phase_budgets: Vec::new(),
            probe_origin: "local".into(),
        }
    }
}

/// State of the log file as the follower sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum LogState {
    Missing { dir_exists: bool },
    Readable,
    Truncated,
    Rotated,
    Unreadable(String),
}

/// One thing the shell saw. Serializable: the remote agent streams these.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Observation {
    /// A log line (cleaned text); the judge classifies it.
    Line {
        number: u64,
        text: String,
    },
    Log(LogState),
    /// The process is running with this pid.
    Started {
        pid: u32,
    },
    /// The command could not be started at all.
    SpawnFailed {
        reason: String,
    },
    /// The process ended; `None` when its status cannot be learned (not our child).
    Exited(Option<ExitInfo>),
    /// Server mode: the launched process exited 0 while processes of the run (found by its
    /// `FIREDUP_RUN_ID`) live on: it daemonized. The run goes on, followed through `pid`; the
    /// exit of the last of them is the run's exit.
    LauncherLeft {
        pid: u32,
        command: String,
    },
    /// The process tree's cumulative CPU time (clock ticks) and bytes read.
    Usage {
        cpu_ticks: u64,
        read_bytes: u64,
    },
    /// Kernel or cgroup evidence that the OOM killer ended the process.
    OomEvidence(String),
    /// firedup's own probe failed and cannot recover.
    MonitorFault(String),
    /// A readiness probe's result.
    Probe {
        kind: ProbeKind,
        outcome: ProbeOutcome,
    },
    /// A message from the command on its sd_notify socket.
    Notify(NotifyMessage),
    /// GPU memory (MiB) held by the watched process tree.
    GpuMemory(u64),
    /// nvidia-smi exists but failed: reported, never a verdict (GPU memory is evidence only).
    GpuError(String),
    /// Nothing new; the deadline asked for has come.
    Tick,
}

/// What the judge decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub verdict: Verdict,
    pub signature: Option<Signature>,
    pub secondary: Vec<Signature>,
    pub reason: String,
    pub line: Option<LineRef>,
    pub context: Vec<String>,
    pub phase: Option<String>,
    pub exit: Option<ExitInfo>,
    pub at: Duration,
    pub timeline: Vec<PhaseAt>,
    /// Whether the process was alive when the verdict was reached.
    pub process_alive: bool,
    pub probes: Vec<ProbeReport>,
    pub gpu: Option<GpuReport>,
    /// When every readiness condition first held (also for a crash inside `--hold`).
    pub ready_at: Option<Duration>,
}

/// Output of one step.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Phase {
        phase: String,
        at: Duration,
    },
    /// All readiness conditions hold (in `--hold`, the verdict comes later).
    Ready {
        at: Duration,
    },
    Verdict(Box<Judgement>),
}

#[derive(Debug, Clone)]
struct Evidence {
    hit: Hit,
    line: LineRef,
    at: Duration,
}

/// A snapshot for progress displays.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub phase: Option<String>,
    pub progress: Option<f64>,
    pub last_line: Option<String>,
    pub lines: u64,
    pub log_missing: bool,
    pub process_alive: bool,
    pub ready: bool,
    pub since_progress: Duration,
    /// Readiness conditions not met yet, in words (`http: HTTP 503 from ...`).
    pub waiting_for: Vec<String>,
    /// The last STATUS= the command sent over sd_notify.
    pub notify_status: Option<String>,
    pub gpu_mib: Option<u64>,
}

/// One readiness probe as the judge tracks it.
#[derive(Debug, Clone)]
struct ProbeTrack {
    kind: ProbeKind,
    target: String,
    up: bool,
    first_up: Option<Duration>,
    last: String,
    latency: Option<Duration>,
    faults_in_a_row: u32,
}

/// The state machine.
#[derive(Debug)]
pub struct Judge {
    cfg: JudgeConfig,
    verdict: Option<Judgement>,
    ready_seen: Vec<bool>,
    ready_at: Option<Duration>,
    timeline: Vec<PhaseAt>,
    phase: Option<String>,
    progress: Option<f64>,
    last_progress_at: Duration,
    seen_shapes: HashSet<u64>,
    last_usage: Option<(u64, u64, Duration)>,
    evidence: Vec<Evidence>,
    first_fatal_at: Option<Duration>,
    before: VecDeque<LineRef>,
    after: Vec<LineRef>,
    decisive_context: Vec<String>,
    last_line: Option<LineRef>,
    lines: u64,
    log: LogState,
    log_ever_seen: bool,
    unreadable_since: Option<(Duration, String)>,
    pid: Option<u32>,
    alive: bool,
    exited: bool,
    oom: Option<String>,
    probes: Vec<ProbeTrack>,
    /// The start deadline, moved later by sd_notify `EXTEND_TIMEOUT_USEC`.
    timeout_at: Option<Duration>,
    phase_since: Duration,
    /// When this watch began on the judge's clock (see [`Judge::watch_began`]).
    watch_from: Duration,
    notify_status: Option<String>,
    gpu: Option<GpuReport>,
    /// The last line that satisfied a ready condition.
    ready_line: Option<LineRef>,
    /// The launcher exited 0 and the run went on in this daemon (said in every verdict's reason).
    followed: Option<String>,
    /// What the last observed line meant (see [`Judge::last_line_class`]).
    last_class: Option<LineClass>,
}

const MAX_SHAPES: usize = 65_536;
/// CPU use that counts as progress: 2% of one core over the sampling window.
const CPU_PROGRESS_FRACTION: f64 = 0.02;
/// Bytes read that count as progress in one sampling window (weights being loaded).
const READ_PROGRESS_BYTES: u64 = 1 << 20;

impl Judge {
    pub fn new(cfg: JudgeConfig) -> Self {
        let n = cfg.classifier.ready_count();
        Judge {
            verdict: None,
            ready_seen: vec![false; n],
            ready_at: None,
            timeline: Vec::new(),
            phase: None,
            progress: None,
            last_progress_at: Duration::ZERO,
            seen_shapes: HashSet::new(),
            last_usage: None,
            evidence: Vec::new(),
            first_fatal_at: None,
            before: VecDeque::new(),
            after: Vec::new(),
            decisive_context: Vec::new(),
            last_line: None,
            lines: 0,
            log: LogState::Missing { dir_exists: true },
            log_ever_seen: false,
            unreadable_since: None,
            pid: None,
            alive: false,
            exited: false,
            followed: None,
            oom: None,
            probes: cfg
                .ready_probes
                .iter()
                .map(|(kind, target)| ProbeTrack {
                    kind: *kind,
                    target: target.clone(),
                    up: false,
                    first_up: None,
                    last: "not probed yet".into(),
                    latency: None,
                    faults_in_a_row: 0,
                })
                .collect(),
            timeout_at: cfg.timeout,
            phase_since: Duration::ZERO,
            watch_from: Duration::ZERO,
            notify_status: None,
            gpu: None,
            ready_line: None,
            last_class: None,
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

    pub fn verdict(&self) -> Option<&Judgement> {
        self.verdict.as_ref()
    }

    /// What the last line observed meant, as the judge classified it (for an event stream that
    /// shows each line with its class); `None` before the first line.
    pub fn last_line_class(&self) -> Option<&LineClass> {
        self.last_class.as_ref()
    }

    pub fn is_ready(&self) -> bool {
        self.ready_at.is_some()
    }

    pub fn status(&self, now: Duration) -> Status {
        Status {
            phase: self.phase.clone(),
            progress: self.progress,
            last_line: self.last_line.as_ref().map(|l| l.text.clone()),
            lines: self.lines,
            log_missing: matches!(self.log, LogState::Missing { .. }),
            process_alive: self.alive,
            ready: self.ready_at.is_some(),
            since_progress: now.saturating_sub(self.last_progress_at),
            waiting_for: self.waiting_for(),
            notify_status: self.notify_status.clone(),
            gpu_mib: self.gpu.as_ref().map(|g| g.last_mib),
        }
    }

    /// The readiness conditions that do not hold yet, in words.
    pub fn waiting_for(&self) -> Vec<String> {
        let mut w: Vec<String> = self
            .cfg
            .classifier
            .ready_lines()
            .iter()
            .zip(&self.ready_seen)
            .filter(|(_, seen)| !**seen)
            .map(|(r, _)| r.condition())
            .collect();
        for p in self.probes.iter().filter(|p| !p.up) {
            w.push(format!("{} {} ({})", p.kind.as_str(), p.target, p.last));
        }
        w
    }

    /// What each probe saw, for the report.
    pub fn probe_reports(&self) -> Vec<ProbeReport> {
        self.probes
            .iter()
            .map(|p| ProbeReport {
                kind: p.kind.as_str().to_string(),
                target: p.target.clone(),
                from: self.cfg.probe_origin.clone(),
                ready_s: p.first_up.map(|d| round_ms(d.as_secs_f64())),
                last: p.last.clone(),
                latency_ms: p
                    .latency
                    .map(|l| (l.as_secs_f64() * 10_000.0).round() / 10.0),
            })
            .collect()
    }

    /// The earliest time at which the judge wants a `Tick`, if any.
    pub fn next_deadline(&self) -> Option<Duration> {
        if self.verdict.is_some() {
            return None;
        }
        let mut d: Vec<Duration> = Vec::new();
        if let Some(t) = self.first_fatal_at {
            d.push(t + self.cfg.fail_settle);
        }
        // While a fatal line settles, the settle deadline decides, not the ready window.
        if let (Some(r), Some(w), None) = (self.ready_at, self.ready_window(), self.first_fatal_at)
        {
            d.push(r + w);
        }
        if self.ready_at.is_none() {
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
        if let Some(s) = self.stall_window() {
            d.push(self.last_progress_at + s);
        }
        if let Some((since, _)) = &self.unreadable_since {
            d.push(*since + self.cfg.unreadable_grace);
        }
        d.into_iter().min()
    }

    /// "; still waiting for: ..." when readiness conditions are unmet.
    fn waiting_note(&self) -> String {
        let w = self.waiting_for();
        if w.is_empty() {
            String::new()
        } else {
            format!("; still waiting for: {}", w.join("; "))
        }
    }

    fn stall_window(&self) -> Option<Duration> {
        // After ready, a quiet server is healthy: stall only applies while starting (or in job mode).
        if self.ready_at.is_some() {
            return None;
        }
        self.cfg.stall
    }

    /// How long the ready condition must stand before the verdict: the `hold`, else the
    /// confirmation window (`None`: the verdict comes at once).
    fn ready_window(&self) -> Option<Duration> {
        self.cfg
            .hold
            .or(Some(self.cfg.confirm).filter(|c| !c.is_zero()))
    }

    /// Feeds one observation made at `at`; returns what changed.
    pub fn observe(&mut self, at: Duration, obs: Observation) -> Vec<Event> {
        let mut events = Vec::new();
        if self.verdict.is_some() {
            return events;
        }
        match obs {
            Observation::Line { number, text } => {
                let class = self.cfg.classifier.classify(&text);
                self.on_line(at, number, text, &class, &mut events);
                self.last_class = Some(class);
            }
            Observation::Log(state) => self.on_log(at, state),
            Observation::Started { pid } => {
                self.pid = Some(pid);
                self.alive = true;
                self.last_progress_at = at;
            }
            Observation::SpawnFailed { reason } => {
                self.alive = false;
                self.exited = true;
                self.decide(
                    at,
                    Verdict::NeverStarted,
                    None,
                    Vec::new(),
                    reason,
                    None,
                    None,
                    &mut events,
                );
            }
            Observation::Exited(exit) => {
                self.alive = false;
                self.exited = true;
                self.on_exit(at, exit, &mut events);
            }
            Observation::LauncherLeft { pid, command } => {
                self.pid = Some(pid);
                self.alive = true;
                self.last_progress_at = at;
                self.followed = Some(format!(
                    "the launcher exited 0; followed the daemon pid {pid} ({command})"
                ));
            }
            Observation::Usage {
                cpu_ticks,
                read_bytes,
            } => self.on_usage(at, cpu_ticks, read_bytes),
            Observation::OomEvidence(text) => self.oom = Some(text),
            Observation::Probe { kind, outcome } => self.on_probe(at, kind, outcome, &mut events),
            Observation::Notify(msg) => self.on_notify(at, msg, &mut events),
            Observation::GpuMemory(mib) => {
                let g = self.gpu.get_or_insert_with(GpuReport::default);
                // Growing GPU memory is a server loading weights or capturing graphs: progress.
                if mib > g.last_mib {
                    self.last_progress_at = at;
                }
                g.last_mib = mib;
                g.peak_mib = g.peak_mib.max(mib);
            }
            Observation::GpuError(e) => {
                self.gpu.get_or_insert_with(GpuReport::default).error = Some(e);
            }
            Observation::MonitorFault(reason) => self.decide(
                at,
                Verdict::MonitorError,
                None,
                Vec::new(),
                reason,
                None,
                None,
                &mut events,
            ),
            Observation::Tick => {}
        }
        if self.verdict.is_none() {
            self.check_deadlines(at, &mut events);
        }
        events
    }

    fn on_line(
        &mut self,
        at: Duration,
        number: u64,
        text: String,
        class: &LineClass,
        events: &mut Vec<Event>,
    ) {
        self.lines += 1;
        self.log_ever_seen = true;
        let line = LineRef { number, text };
        // Progress evidence: a line of a shape not seen before, or a moving progress counter.
        let shape = shape_hash(&line.text);
        let new_shape = self.seen_shapes.insert(shape);
        if self.seen_shapes.len() > MAX_SHAPES {
            self.seen_shapes.clear();
        }
        let moved = class.progress.is_some() && class.progress != self.progress;
        if new_shape || moved {
            self.last_progress_at = at;
        }
        if class.progress.is_some() {
            self.progress = class.progress;
        }
        if let Some(p) = class.phase {
            if let Some(name) = self.cfg.classifier.phase_names().get(p).cloned() {
                if self.phase.as_deref() != Some(name.as_str()) {
                    self.enter_phase(at, name, events);
                }
            }
        }
        if !class.noise {
            if self.first_fatal_at.is_some() {
                if self.after.len() < self.cfg.context_lines {
                    self.after.push(line.clone());
                }
            } else {
                // A progress bar redrawn many times is one line of context: keep its latest state.
                if self
                    .before
                    .back()
                    .is_some_and(|l| shape_hash(&l.text) == shape)
                {
                    self.before.pop_back();
                }
                self.before.push_back(line.clone());
                if self.before.len() > self.cfg.context_lines + 1 {
                    self.before.pop_front();
                }
            }
            self.last_line = Some(line.clone());
        }
        for hit in &class.hits {
            if !self.evidence.iter().any(|e| e.hit == *hit) {
                self.evidence.push(Evidence {
                    hit: *hit,
                    line: line.clone(),
                    at,
                });
            }
        }
        if class.is_fatal() && self.first_fatal_at.is_none() {
            self.first_fatal_at = Some(at);
            self.decisive_context = self.before.iter().map(|l| l.text.clone()).collect();
        }
        for r in &class.ready {
            if let Some(seen) = self.ready_seen.get_mut(*r) {
                *seen = true;
                self.ready_line = Some(line.clone());
            }
        }
        self.check_ready(at, events);
    }

    /// Declares ready once every ready line was seen and every readiness probe is up.
    fn check_ready(&mut self, at: Duration, events: &mut Vec<Event>) {
        let has_conditions = !self.ready_seen.is_empty() || !self.probes.is_empty();
        if self.cfg.mode != Mode::UntilReady
            || self.ready_at.is_some()
            || self.first_fatal_at.is_some()
            || !has_conditions
            || !self.ready_seen.iter().all(|s| *s)
            || !self.probes.iter().all(|p| p.up)
        {
            return;
        }
        self.ready_at = Some(at);
        self.enter_phase(at, "ready".to_string(), events);
        events.push(Event::Ready { at });
        if self.ready_window().is_none() {
            self.decide_ready(at, events);
        }
    }

    /// The `ready` verdict at `at`, the time the ready condition first held.
    fn decide_ready(&mut self, at: Duration, events: &mut Vec<Event>) {
        let mut conds: Vec<String> = self
            .cfg
            .classifier
            .ready_lines()
            .iter()
            .map(|r| r.condition())
            .collect();
        for p in &self.probes {
            conds.push(format!("{} {}", p.kind.as_str(), p.target));
        }
        let reason = format!(
            "ready after {}: {}",
            format_duration(at),
            describe_conditions(&conds)
        );
        // The decisive line is the last ready line seen (not the access-log line of a probe).
        let line = self.ready_line.clone().or_else(|| self.last_line.clone());
        self.decide(
            at,
            Verdict::Ready,
            None,
            Vec::new(),
            reason,
            line,
            None,
            events,
        );
    }

    fn on_probe(
        &mut self,
        at: Duration,
        kind: ProbeKind,
        outcome: ProbeOutcome,
        events: &mut Vec<Event>,
    ) {
        let Some(i) = self.probes.iter().position(|p| p.kind == kind) else {
            return;
        };
        let limit = self.cfg.probe_fault_limit;
        let p = &mut self.probes[i];
        p.last = outcome.detail().to_string();
        match outcome {
            ProbeOutcome::Up { latency, .. } => {
                p.up = true;
                p.latency = Some(latency);
                p.first_up.get_or_insert(at);
                p.faults_in_a_row = 0;
            }
            ProbeOutcome::NotYet { .. } | ProbeOutcome::Foreign { .. } => {
                // Once ready, a probe's later answers do not take readiness back: the verdict
                // (or the hold) is about the process, and the probe thread stops at the verdict.
                if self.ready_at.is_none() {
                    p.up = false;
                }
                p.faults_in_a_row = 0;
            }
            ProbeOutcome::Fault { detail } => {
                p.faults_in_a_row += 1;
                if self.ready_at.is_none() {
                    p.up = false;
                }
                if p.faults_in_a_row >= limit {
                    let reason = format!(
                        "firedup's {} probe of {} failed {} times in a row: {detail}",
                        kind.as_str(),
                        p.target,
                        p.faults_in_a_row
                    );
                    self.decide(
                        at,
                        Verdict::MonitorError,
                        None,
                        Vec::new(),
                        reason,
                        None,
                        None,
                        events,
                    );
                    return;
                }
            }
        }
        self.check_ready(at, events);
    }

    fn on_notify(&mut self, at: Duration, msg: NotifyMessage, events: &mut Vec<Event>) {
        if let Some(s) = msg.status {
            // A new status is a sign of progress, like a new log line.
            if self.notify_status.as_deref() != Some(s.as_str()) {
                self.last_progress_at = at;
            }
            self.notify_status = Some(s);
        }
        if let Some(ext) = msg.extend_timeout {
            // systemd: "extend the start timeout to now + this"; also a sign of life.
            let until = at + ext;
            if let Some(t) = self.timeout_at.as_mut() {
                *t = (*t).max(until);
            }
            self.last_progress_at = at;
        }
        if msg.ready {
            if let Some(p) = self.probes.iter_mut().find(|p| p.kind == ProbeKind::Notify) {
                p.up = true;
                p.first_up.get_or_insert(at);
                p.last = "READY=1".into();
            }
            self.check_ready(at, events);
        }
    }

    fn phase_budget(&self) -> Option<Duration> {
        let phase = self.phase.as_deref()?;
        self.cfg
            .phase_budgets
            .iter()
            .find(|(name, _)| name == phase)
            .map(|(_, b)| *b)
    }

    fn enter_phase(&mut self, at: Duration, name: String, events: &mut Vec<Event>) {
        self.phase = Some(name.clone());
        self.phase_since = at;
        // A fraction belongs to the phase that printed it.
        self.progress = None;
        self.last_progress_at = at;
        // The timeline says when each phase first began. A phase entered again (a draft model
        // loading after the target, or a log whose startup repeats) moves the current phase but
        // adds nothing: the timeline, and memory, stay bounded by the number of phases.
        if self.timeline.iter().any(|p| p.phase == name) {
            return;
        }
        self.timeline.push(PhaseAt {
            phase: name.clone(),
            at_s: round_ms(at.as_secs_f64()),
        });
        events.push(Event::Phase { phase: name, at });
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

    fn on_usage(&mut self, at: Duration, cpu: u64, read: u64) {
        if let Some((cpu0, read0, t0)) = self.last_usage {
            let window = at.saturating_sub(t0).as_secs_f64();
            // Clock ticks are 1/100 s on Linux.
            let cpu_s = cpu.saturating_sub(cpu0) as f64 / 100.0;
            if (window > 0.0 && cpu_s >= window * CPU_PROGRESS_FRACTION)
                || read.saturating_sub(read0) >= READ_PROGRESS_BYTES
            {
                self.last_progress_at = at;
            }
        }
        self.last_usage = Some((cpu, read, at));
    }

    fn check_deadlines(&mut self, at: Duration, events: &mut Vec<Event>) {
        if let Some(t) = self.first_fatal_at {
            if at >= t + self.cfg.fail_settle {
                self.decide_failure(at, None, events);
                return;
            }
        }
        if let Some((since, reason)) = self.unreadable_since.clone() {
            if at >= since + self.cfg.unreadable_grace {
                let reason = format!("cannot read the log {}: {reason}", self.cfg.log_path);
                self.decide(
                    at,
                    Verdict::MonitorError,
                    None,
                    Vec::new(),
                    reason,
                    None,
                    None,
                    events,
                );
                return;
            }
        }
        // A fatal line inside the hold or the confirmation window is being settled: its failure
        // is the verdict, at the end of the settle window (checked above), never `ready`.
        if let (Some(r), None, true) = (self.ready_at, self.cfg.hold, self.first_fatal_at.is_none())
        {
            if at >= r + self.cfg.confirm {
                self.decide_ready(r, events);
                return;
            }
        }
        if let (Some(r), Some(h), true) =
            (self.ready_at, self.cfg.hold, self.first_fatal_at.is_none())
        {
            if at >= r + h {
                let reason = format!(
                    "ready after {} and still healthy after the {} hold",
                    format_duration(r),
                    format_duration(h)
                );
                let line = self.last_line.clone();
                self.decide(
                    at,
                    Verdict::Ready,
                    None,
                    Vec::new(),
                    reason,
                    line,
                    None,
                    events,
                );
                return;
            }
        }
        if self.ready_at.is_some() {
            return;
        }
        if !self.log_ever_seen
            && !self.alive
            && !self.exited
            && at >= self.watch_from + self.cfg.log_grace
        {
            let dir_note = match self.log {
                LogState::Missing { dir_exists: false } => " (its directory does not exist either)",
                _ => "",
            };
            let reason = if self.cfg.expect_process {
                format!(
                    "nothing started: the process never appeared and the log {} was never created{dir_note} within {}",
                    self.cfg.log_path,
                    format_duration(self.cfg.log_grace)
                )
            } else {
                format!(
                    "the log {} was never created{dir_note} within {} and no process was given to watch",
                    self.cfg.log_path,
                    format_duration(self.cfg.log_grace)
                )
            };
            self.decide(
                at,
                Verdict::NeverStarted,
                None,
                Vec::new(),
                reason,
                None,
                None,
                events,
            );
            return;
        }
        if let Some(s) = self.stall_window() {
            if at >= self.last_progress_at + s {
                let what = match (self.log_ever_seen, self.gpu.is_some()) {
                    (true, false) => "no new log line, progress or CPU use",
                    (true, true) => "no new log line, progress, CPU use or GPU memory growth",
                    (false, false) => "no log and no CPU use",
                    (false, true) => "no log, no CPU use and no GPU memory growth",
                };
                let reason = format!(
                    "stalled: {what} for {}{}{}",
                    format_duration(s),
                    self.phase
                        .as_ref()
                        .map(|p| format!(" in phase {p}"))
                        .unwrap_or_default(),
                    self.waiting_note()
                );
                let line = self.last_line.clone();
                self.decide(
                    at,
                    Verdict::Stalled,
                    None,
                    Vec::new(),
                    reason,
                    line,
                    None,
                    events,
                );
                return;
            }
        }
        if let (Some(b), Some(phase)) = (self.phase_budget(), self.phase.clone()) {
            if at >= self.phase_since + b {
                let reason = format!(
                    "timed out in phase {phase}: it ran past its budget of {} (began at {}){}",
                    format_duration(b),
                    format_duration(self.phase_since),
                    self.waiting_note()
                );
                let line = self.last_line.clone();
                self.decide(
                    at,
                    Verdict::TimedOut,
                    None,
                    Vec::new(),
                    reason,
                    line,
                    None,
                    events,
                );
                return;
            }
        }
        if let Some(t) = self.timeout_at {
            if at >= t {
                let reason = format!(
                    "timed out after {} while still starting{}{}",
                    format_duration(t),
                    self.phase
                        .as_ref()
                        .map(|p| format!(" (phase {p})"))
                        .unwrap_or_default(),
                    self.waiting_note()
                );
                let line = self.last_line.clone();
                self.decide(
                    at,
                    Verdict::TimedOut,
                    None,
                    Vec::new(),
                    reason,
                    line,
                    None,
                    events,
                );
            }
        }
    }

    fn on_exit(&mut self, at: Duration, exit: Option<ExitInfo>, events: &mut Vec<Event>) {
        // Inside the confirmation window the server was never reported ready: only its ready
        // condition had held.
        let became = if self.cfg.hold.is_some() {
            "becoming ready"
        } else {
            "its ready condition held"
        };
        let after_ready = self
            .ready_at
            .map(|r| format!(" {} after {became}", format_duration(at.saturating_sub(r))))
            .unwrap_or_default();
        let status = exit
            .map(|e| e.describe())
            .unwrap_or_else(|| "an unknown status".into());
        if let Some(e) = exit {
            if self.ready_at.is_none() && matches!(e.code, Some(126) | Some(127)) {
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
                self.decide(
                    at,
                    Verdict::NeverStarted,
                    None,
                    Vec::new(),
                    reason,
                    line,
                    exit,
                    events,
                );
                return;
            }
            if let Some(sig) = e.effective_signal() {
                let signal_sig = match sig {
                    9 if self.oom.is_some() => Some(Signature::OomKilled),
                    9 => Some(Signature::Sigkill),
                    11 => Some(Signature::Segfault),
                    6 => Some(Signature::Abort),
                    1 | 2 | 15 => Some(Signature::Terminated),
                    _ => None,
                };
                let cause = self.line_cause(false);
                match cause {
                    Some(ev) if !ev.hit.signature.is_some_and(|s| s.is_signal_class()) => {
                        let reason = self
                            .failure_reason(&ev, &format!("then ended by {status}{after_ready}"));
                        self.decide_with(
                            at,
                            Verdict::Failed,
                            &ev,
                            signal_sig,
                            reason,
                            exit,
                            events,
                        );
                    }
                    _ => {
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
                        let reason = format!(
                            "killed by {} ({}){after_ready}{oom}{}",
                            signal_name(sig),
                            e.describe(),
                            signal_sig
                                .map(|s| format!(": {}", s.hint()))
                                .unwrap_or_default()
                        );
                        let line = self
                            .evidence
                            .first()
                            .map(|e| e.line.clone())
                            .or_else(|| self.last_line.clone());
                        self.decide(
                            at,
                            Verdict::Killed,
                            signal_sig,
                            secondary,
                            reason,
                            line,
                            exit,
                            events,
                        );
                    }
                }
                return;
            }
        }
        let ok = exit.is_some_and(|e| e.code == Some(0));
        let cause = self.line_cause(ok);
        if let Some(ev) = cause {
            let reason =
                self.failure_reason(&ev, &format!("then exited with {status}{after_ready}"));
            self.decide_with(at, Verdict::Failed, &ev, None, reason, exit, events);
            return;
        }
        if ok && self.cfg.mode == Mode::UntilExit {
            let reason = format!("the job exited 0 after {}", format_duration(at));
            let line = self.last_line.clone();
            self.decide(
                at,
                Verdict::Succeeded,
                None,
                Vec::new(),
                reason,
                line,
                exit,
                events,
            );
            return;
        }
        let reason = if ok {
            format!("the server exited 0{after_ready} before it was ready")
        } else {
            format!(
                "the process exited with {status}{after_ready}, and no known failure was printed"
            )
        };
        let line = self.last_line.clone();
        self.decide(
            at,
            Verdict::Exited,
            None,
            Vec::new(),
            reason,
            line,
            exit,
            events,
        );
    }

    /// The line evidence that names the cause: the most specific hit. With `fatal_only`, evidence
    /// lines (a bare traceback) do not count.
    ///
    /// Evidence only counts up to the first fatal line: what comes on or before it can be the
    /// cause ("could not access the configuration file: Permission denied"), what comes after is a
    /// consequence (a launcher's own traceback after its worker was killed).
    fn line_cause(&self, fatal_only: bool) -> Option<Evidence> {
        let first_fatal = self
            .evidence
            .iter()
            .filter(|e| e.hit.strength == Strength::Fatal)
            .map(|e| e.line.number)
            .min();
        let mut best: Option<&Evidence> = None;
        for e in &self.evidence {
            let counts = e.hit.strength == Strength::Fatal
                || (!fatal_only && first_fatal.is_none_or(|n| e.line.number <= n));
            if !counts {
                continue;
            }
            let better = match best {
                None => true,
                Some(b) => rank(&e.hit) < rank(&b.hit),
            };
            if better {
                best = Some(e);
            }
        }
        // The decisive line is the first line that showed the winning cause (a server often logs
        // the cause, "could not bind ...: Address already in use", before its fatal summary line).
        let best = best?;
        self.evidence
            .iter()
            .find(|e| e.hit.signature == best.hit.signature)
            .map(|first| Evidence {
                hit: best.hit,
                line: first.line.clone(),
                at: first.at,
            })
    }

    fn failure_reason(&self, ev: &Evidence, then: &str) -> String {
        let what = match ev.hit.signature {
            Some(s) => format!("{s}: {}", s.hint()),
            None => "a line matching --fail-line".to_string(),
        };
        format!("failed with {what} (line {}); {then}", ev.line.number)
    }

    fn decide_failure(&mut self, at: Duration, exit: Option<ExitInfo>, events: &mut Vec<Event>) {
        if let Some(ev) = self.line_cause(true).or_else(|| self.line_cause(false)) {
            let reason = self.failure_reason(&ev, "the process is still running");
            self.decide_with(at, Verdict::Failed, &ev, None, reason, exit, events);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn decide_with(
        &mut self,
        at: Duration,
        verdict: Verdict,
        ev: &Evidence,
        extra: Option<Signature>,
        reason: String,
        exit: Option<ExitInfo>,
        events: &mut Vec<Event>,
    ) {
        let mut secondary: Vec<Signature> = self
            .evidence
            .iter()
            .filter_map(|e| e.hit.signature)
            .chain(extra)
            .filter(|s| Some(*s) != ev.hit.signature)
            .collect();
        secondary.sort();
        secondary.dedup();
        // Context around the decisive line: what came before it and after it.
        let mut context: Vec<String> = Vec::new();
        if self.first_fatal_at.is_some() {
            context.extend(self.decisive_context.iter().cloned());
            context.extend(self.after.iter().map(|l| l.text.clone()));
        } else {
            context.extend(self.before.iter().map(|l| l.text.clone()));
        }
        self.verdict = Some(Judgement {
            verdict,
            signature: ev.hit.signature,
            secondary,
            reason,
            line: Some(ev.line.clone()),
            context,
            phase: self.phase.clone(),
            exit,
            at,
            timeline: self.timeline.clone(),
            process_alive: self.alive,
            probes: self.probe_reports(),
            gpu: self.gpu.clone(),
            ready_at: self.ready_at,
        });
        events.push(Event::Verdict(Box::new(
            self.verdict.clone().expect("just set"),
        )));
    }

    #[allow(clippy::too_many_arguments)]
    fn decide(
        &mut self,
        at: Duration,
        verdict: Verdict,
        signature: Option<Signature>,
        secondary: Vec<Signature>,
        reason: String,
        line: Option<LineRef>,
        exit: Option<ExitInfo>,
        events: &mut Vec<Event>,
    ) {
        let context = self.before.iter().map(|l| l.text.clone()).collect();
        let reason = match &self.followed {
            Some(f) => format!("{reason} ({f})"),
            None => reason,
        };
        self.verdict = Some(Judgement {
            verdict,
            signature,
            secondary,
            reason,
            line,
            context,
            phase: self.phase.clone(),
            exit,
            at,
            timeline: self.timeline.clone(),
            process_alive: self.alive,
            probes: self.probe_reports(),
            gpu: self.gpu.clone(),
            ready_at: self.ready_at,
        });
        events.push(Event::Verdict(Box::new(
            self.verdict.clone().expect("just set"),
        )));
    }
}

fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

fn rank(hit: &Hit) -> (bool, Option<Signature>, bool) {
    (
        hit.signature.is_none(),
        hit.signature,
        hit.strength == Strength::Evidence,
    )
}

fn describe_conditions(conds: &[String]) -> String {
    match conds.len() {
        0 => "no condition".into(),
        1 => format!("matched {}", conds[0]),
        n => format!("all {n} conditions held ({})", conds.join(", ")),
    }
}

#[cfg(test)]
mod tests;
