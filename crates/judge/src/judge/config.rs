//! What the judge is told about a watch before it starts: the mode, the compiled classifier (its
//! ready lines are the log's readiness conditions), the probes that must also pass, and every
//! window and deadline as a `Duration`. Typed values only: whatever can be wrong with a flag was
//! caught when the shell built this (the library's `plan`).

use std::time::Duration;

use crate::classify::Classifier;
use crate::mode::Mode;
use crate::profile::ProbeKind;

/// What the judge needs to know about the watch.
#[derive(Debug, Clone)]
pub struct JudgeConfig {
    /// Server mode (`ready` is a verdict) or job mode (only the exit ends the watch well).
    pub mode: Mode,
    /// What each log line means: the catalog and the profile's signatures, `--fail-line`, the
    /// ready lines (all must be seen), noise and phases. The judge classifies every line with it.
    pub classifier: Classifier,
    /// Without progress evidence for this long, the watch is `stalled` (`None`: never).
    pub stall: Option<Duration>,
    /// Not ready after this long (from the start of the watch): `timed_out` (`None`: never).
    pub timeout: Option<Duration>,
    /// A batch job still waiting in its scheduler's queue after this long is `timed_out`
    /// (`None`: never). Time spent queued counts toward neither `stall` nor `timeout`.
    pub queue_timeout: Option<Duration>,
    /// How long a missing log may stay missing while no process is known.
    pub log_grace: Duration,
    /// How long the log was already waited for before this watch began (an attach waits for
    /// the log before judging): said in the `never_started` reason with `log_grace`.
    pub log_waited: Duration,
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
    /// The log's path, for reasons (`cannot read the log PATH`).
    pub log_path: String,
    /// How many lines of context a verdict carries around its decisive line.
    pub context_lines: usize,
    /// Probes that must pass before ready, each with what it probes (for reports).
    pub ready_probes: Vec<(ProbeKind, String)>,
    /// This many faults in a row of one probe end the watch as `monitor_error`.
    pub probe_fault_limit: u32,
    /// Per-phase budgets: being in the phase longer than this is `timed_out`.
    pub phase_budgets: Vec<(String, Duration)>,
    /// Where the probes run from, for reports (`local`, `remote HOST`).
    pub probe_origin: String,
    /// A re-attach to a run that has ended: its log is read at once, so the judge's own clock
    /// cannot tell when it became ready or how long after that it ended. These are the times
    /// recorded while it ran (`None`: a live watch).
    pub recorded_end: Option<RecordedEnd>,
}

/// The times of a run that has ended, as recorded while it ran (from its launch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordedEnd {
    /// When its launching firedup saw it become ready (`None`: it was not, or no one recorded it).
    pub ready_at: Option<Duration>,
    /// When the supervisor recorded its exit.
    pub ended_at: Option<Duration>,
}

impl JudgeConfig {
    /// A configuration with the default windows: no stall window, no deadline, no probes.
    pub fn new(mode: Mode, log_path: &str, classifier: Classifier) -> Self {
        JudgeConfig {
            mode,
            classifier,
            stall: None,
            timeout: None,
            queue_timeout: None,
            log_grace: Duration::from_secs(30),
            log_waited: Duration::ZERO,
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
            recorded_end: None,
        }
    }

    /// How long the ready condition must stand before the verdict: the `hold`, else the
    /// confirmation window (`None`: the verdict comes at once).
    pub(super) fn ready_window(&self) -> Option<Duration> {
        self.hold.or(Some(self.confirm).filter(|c| !c.is_zero()))
    }
}
