//! The names scripts depend on (README.md, "Verdicts and exit codes"): verdicts, failure signatures, exit codes, and
//! the JSON verdict object. Nothing here may be renamed; new variants may be added.

use serde::{Deserialize, Serialize};

mod cause_hint;
mod job_summary;
mod node;
mod signature;
pub use job_summary::JobSummary;
pub use node::{CauseMark, GroupSettled, NodeReport, NodeTeardown};
pub use signature::Signature;

/// How a watch ended. Exactly one per watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every readiness condition held (server mode).
    Ready,
    /// The job exited 0 (job mode).
    Succeeded,
    /// A failure was printed (a signature or a `--fail-line`), decisive line included.
    Failed,
    /// The process exited before ready, and no known failure was printed.
    Exited,
    /// A signal ended the process (OOM killer, SIGKILL, a segfault, ...).
    Killed,
    /// The command could not run, or nothing appeared at all.
    NeverStarted,
    /// No progress evidence for the stall window.
    Stalled,
    /// Not ready by the deadline (or a phase ran past its budget).
    TimedOut,
    /// firedup itself could not watch (log unreadable, a probe's own faults).
    MonitorError,
}

/// Exit code of firedup itself when it was called wrongly (no verdict).
pub const USAGE_EXIT_CODE: i32 = 2;

impl Verdict {
    /// The process exit code of `firedup run` / `firedup watch` for this verdict.
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Ready | Verdict::Succeeded => 0,
            Verdict::Failed => 1,
            Verdict::Exited => 3,
            Verdict::Killed => 4,
            Verdict::NeverStarted => 5,
            Verdict::Stalled => 6,
            Verdict::TimedOut => 124,
            Verdict::MonitorError => 7,
        }
    }

    /// Every verdict, in the order of the README.
    pub const ALL: [Verdict; 9] = [
        Verdict::Ready,
        Verdict::Succeeded,
        Verdict::Failed,
        Verdict::Exited,
        Verdict::Killed,
        Verdict::NeverStarted,
        Verdict::Stalled,
        Verdict::TimedOut,
        Verdict::MonitorError,
    ];

    /// The verdict called `name` (`timed_out`).
    pub fn from_name(name: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.as_str() == name)
    }

    /// The verdict's name, as in the JSON verdict object.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ready => "ready",
            Verdict::Succeeded => "succeeded",
            Verdict::Failed => "failed",
            Verdict::Exited => "exited",
            Verdict::Killed => "killed",
            Verdict::NeverStarted => "never_started",
            Verdict::Stalled => "stalled",
            Verdict::TimedOut => "timed_out",
            Verdict::MonitorError => "monitor_error",
        }
    }

    /// Verdicts after which the watched server is expected to keep running.
    pub fn leaves_server_running(self) -> bool {
        self == Verdict::Ready
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the watched process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitInfo {
    /// The exit code, when it exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Whether it dumped core.
    pub core_dumped: bool,
}

impl ExitInfo {
    /// An exit with `code`.
    pub fn code(code: i32) -> Self {
        ExitInfo {
            code: Some(code),
            signal: None,
            core_dumped: false,
        }
    }
    /// An end by `signal`.
    pub fn signal(signal: i32, core_dumped: bool) -> Self {
        ExitInfo {
            code: None,
            signal: Some(signal),
            core_dumped,
        }
    }

    /// The signal that ended the process, counting a shell's `128+N` for a child killed by N.
    pub fn effective_signal(&self) -> Option<i32> {
        if let Some(s) = self.signal {
            return Some(s);
        }
        match self.code {
            Some(c) if (129..=159).contains(&c) => Some(c - 128),
            _ => None,
        }
    }

    /// In words: `exit code 1`, `signal 9 (SIGKILL)`.
    pub fn describe(&self) -> String {
        match (self.signal, self.code) {
            (Some(s), _) => format!(
                "signal {} ({}){}",
                s,
                signal_name(s),
                if self.core_dumped {
                    ", core dumped"
                } else {
                    ""
                }
            ),
            (None, Some(c)) => match self.effective_signal() {
                Some(s) => format!("exit code {c} (128+{s}: {})", signal_name(s)),
                None => format!("exit code {c}"),
            },
            (None, None) => "unknown exit status".to_string(),
        }
    }
}

/// The conventional name of a signal number (Linux).
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        31 => "SIGSYS",
        _ => "signal",
    }
}

/// The decisive log line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineRef {
    /// Its line number in the log.
    pub number: u64,
    /// Its text.
    pub text: String,
}

/// One phase of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseAt {
    /// The phase's name.
    pub phase: String,
    /// Seconds from launch (or attach) to its first line.
    pub at_s: f64,
}

/// What one readiness probe saw (additive JSON field `probes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    /// `port`, `http`, `request` or `notify`.
    pub kind: String,
    /// What was probed (`127.0.0.1:6379`, a URL, `NOTIFY_SOCKET`).
    pub target: String,
    /// Where the probe ran from (`local`).
    pub from: String,
    /// Seconds from launch (or attach) to the first success; null if it never succeeded.
    pub ready_s: Option<f64>,
    /// The last thing it saw, in words.
    pub last: String,
    /// Latency of the last success, in milliseconds.
    pub latency_ms: Option<f64>,
}

/// GPU memory held by the watched process tree (additive JSON field `gpu`), from nvidia-smi.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct GpuReport {
    /// The most the tree held at a sample (MiB).
    pub peak_mib: u64,
    /// What it held at the last sample (MiB).
    pub last_mib: u64,
    /// GPU memory still held by the tree's processes after teardown (null when not torn down).
    pub after_teardown_mib: Option<u64>,
    /// Why nvidia-smi could not tell, if it failed.
    pub error: Option<String>,
}

/// The verdict object printed by `--json` (README.md, "Verdicts and exit codes"), plus additive fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The version of this object's format ([`OUTCOME_SCHEMA`]; additive field).
    #[serde(default = "outcome_schema")]
    pub schema: u32,
    /// How the watch ended.
    pub verdict: Verdict,
    /// The failure signature that decided it, if any.
    pub signature: Option<Signature>,
    /// One sentence saying why (secret-shaped values redacted).
    pub reason: String,
    /// The decisive log line.
    pub line: Option<LineRef>,
    /// Lines around the decisive line.
    pub context: Vec<String>,
    /// The phase the server was in.
    pub phase: Option<String>,
    /// Seconds from launch (or attach) to the verdict.
    pub elapsed_s: f64,
    /// How the process ended, when it did.
    pub exit: Option<ExitInfo>,
    /// The watched process.
    pub pid: Option<u32>,
    /// The log followed.
    pub log: String,
    /// The run (`FIREDUP_RUN_ID`).
    pub run_id: String,
    /// When each phase first began.
    pub timeline: Vec<PhaseAt>,
    /// Other signatures seen in the same failure, by precedence (additive field).
    #[serde(default)]
    pub secondary: Vec<Signature>,
    /// Whether the server was left running (additive field).
    #[serde(default)]
    pub server_running: bool,
    /// Readiness probes and what each saw (additive field).
    #[serde(default)]
    pub probes: Vec<ProbeReport>,
    /// Seconds between the health probe and the real request succeeding (additive field).
    #[serde(default)]
    pub request_gap_s: Option<f64>,
    /// GPU memory of the watched tree, where nvidia-smi exists (additive field).
    #[serde(default)]
    pub gpu: Option<GpuReport>,
    /// Seconds from launch (or attach) to every readiness condition holding; null if never
    /// (additive field).
    #[serde(default)]
    pub ready_s: Option<f64>,
    /// The SSH host the server runs on, for `--host` (additive field; absent for local runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// An attach by `--log`: its run id names a history record (`firedup show`), not a run
    /// directory that `logs`, `stop` or `watch` could open. Not part of the JSON.
    #[serde(skip)]
    pub attached: bool,
    /// The log already held this many lines before the launch appended to it: this run's output
    /// (and what was judged) starts at this line of the file (additive field; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_from_line: Option<u64>,
    /// The name a person gave the run (`run --name`), else null (additive field).
    #[serde(default)]
    pub name: Option<String>,
    /// In a multi-process launch, the rank (shard, worker, task) where the root cause happened,
    /// else null (additive field).
    #[serde(default)]
    pub rank: Option<u32>,
    /// The server's base URL (`http://127.0.0.1:30000`), once known: from `--port` (`auto`
    /// too), `--http` or the profile and the command's flags; else null (additive field).
    #[serde(default)]
    pub url: Option<String>,
    /// The server's port, once known (as `url`); else null (additive field).
    #[serde(default)]
    pub port: Option<u16>,
    /// For a batch scheduler's job: its scheduler, id, last state, nodes and pending reason
    /// (additive field).
    #[serde(default)]
    pub job: Option<JobSummary>,
    /// The process whose end stops the run (`run --owner PID`), else null (additive field).
    #[serde(default)]
    pub owner: Option<u32>,
    /// In a multi-node run, the node where the root cause happened, else null (additive field).
    #[serde(default)]
    pub node: Option<String>,
    /// In a multi-node run, each node in node-rank order, else null (additive field).
    #[serde(default)]
    pub nodes: Option<Vec<NodeReport>>,
    /// In a multi-node run that failed, how the group came to decide while nodes still ran
    /// (additive field, absent elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<GroupSettled>,
    /// When the decisive line was seen and whether it was an echo (what a group of nodes
    /// chooses by). Not part of the JSON.
    #[serde(skip)]
    pub cause: Option<CauseMark>,
    /// Where each rank was at the last look at their stacks since the last progress (what a
    /// group of nodes compares across them: [`crate::group`]). Not part of the JSON.
    #[serde(skip)]
    pub placed: Vec<crate::rank_place::RankPlace>,
}

/// The version of the JSON verdict's format: additive fields keep it, a change that breaks
/// readers bumps it.
pub const OUTCOME_SCHEMA: u32 = 1;

fn outcome_schema() -> u32 {
    OUTCOME_SCHEMA
}

impl Outcome {
    /// An outcome reached without a watch (a host firedup could not reach, a run interrupted
    /// before its verdict, a detached launch): `verdict` and `reason`, the run's id, log and
    /// pid, and nothing the watch would have found.
    pub fn without_watch(
        verdict: Verdict,
        reason: String,
        run_id: &str,
        log: &str,
        pid: Option<u32>,
    ) -> Outcome {
        Outcome {
            schema: OUTCOME_SCHEMA,
            verdict,
            signature: None,
            reason,
            line: None,
            context: Vec::new(),
            phase: None,
            elapsed_s: 0.0,
            exit: None,
            pid,
            log: log.to_string(),
            run_id: run_id.to_string(),
            timeline: Vec::new(),
            secondary: Vec::new(),
            server_running: false,
            probes: Vec::new(),
            request_gap_s: None,
            gpu: None,
            ready_s: None,
            host: None,
            attached: false,
            log_from_line: None,
            name: None,
            rank: None,
            url: None,
            port: None,
            job: None,
            owner: None,
            node: None,
            nodes: None,
            settled: None,
            cause: None,
            placed: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
