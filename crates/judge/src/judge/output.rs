//! What the judge says: events while the watch runs (a phase began, the server is ready, the
//! verdict) and the verdict itself, a [`Judgement`]; and a [`Status`] snapshot for displays.

use std::time::Duration;

use crate::verdict::{ExitInfo, GpuReport, LineRef, PhaseAt, ProbeReport, Signature, Verdict};

/// What the judge decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    /// How the watch ended.
    pub verdict: Verdict,
    /// The failure signature that decided it, if any.
    pub signature: Option<Signature>,
    /// Other signatures seen on the way (sorted, without `signature`).
    pub secondary: Vec<Signature>,
    /// One sentence saying why.
    pub reason: String,
    /// The decisive line, when a line decided.
    pub line: Option<LineRef>,
    /// Lines around the decisive line (before it, and after it for a failure).
    pub context: Vec<String>,
    /// The phase the server was in.
    pub phase: Option<String>,
    /// How the process ended, when it did.
    pub exit: Option<ExitInfo>,
    /// When the verdict was reached (for `ready` without a hold: when the condition first held).
    pub at: Duration,
    /// When each phase first began.
    pub timeline: Vec<PhaseAt>,
    /// Whether the process was alive when the verdict was reached.
    pub process_alive: bool,
    /// What each readiness probe saw.
    pub probes: Vec<ProbeReport>,
    /// GPU memory of the tree, where it was sampled.
    pub gpu: Option<GpuReport>,
    /// When every readiness condition first held (also for a crash inside `--hold`).
    pub ready_at: Option<Duration>,
    /// In a multi-process launch, the rank (shard, worker, task) where the root cause happened.
    pub rank: Option<u32>,
    /// The node that rank ran on, where the launcher's report said (srun's `srun: error: NODE:
    /// task N: ...` in a multi-node Slurm job).
    pub node: Option<String>,
    /// For a batch scheduler's job, its last reading (the JSON verdict's `job`).
    pub job: Option<crate::verdict::JobSummary>,
    /// For a failure named by a line: when that line was seen and whether it was an echo.
    pub cause: Option<crate::verdict::CauseMark>,
    /// Where each rank was at the last look at their stacks since the last progress (empty when
    /// there was none since): what a group of nodes compares across them.
    pub placed: Vec<crate::rank_place::RankPlace>,
}

/// Output of one step.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A phase began (the first time it did).
    Phase {
        /// The phase's name.
        phase: String,
        /// When it began.
        at: Duration,
    },
    /// All readiness conditions hold (in `--hold`, the verdict comes later).
    Ready {
        /// When they first held.
        at: Duration,
    },
    /// What a batch scheduler said of the job, in words: it is queued (with its pending reason
    /// and place in the queue), it began running (on which nodes), it was requeued.
    Job {
        /// The note.
        note: String,
        /// When it was learned.
        at: Duration,
    },
    /// The verdict: the last event of a watch.
    Verdict(Box<Judgement>),
}

/// A snapshot for progress displays.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// The current phase.
    pub phase: Option<String>,
    /// The last progress fraction of the current phase.
    pub progress: Option<f64>,
    /// The last meaningful (not noise) line.
    pub last_line: Option<String>,
    /// Lines seen.
    pub lines: u64,
    /// The log does not exist (yet).
    pub log_missing: bool,
    /// The watched process is alive.
    pub process_alive: bool,
    /// Every readiness condition held.
    pub ready: bool,
    /// Time since the last progress evidence.
    pub since_progress: Duration,
    /// Readiness conditions not met yet, in words (`http: HTTP 503 from ...`).
    pub waiting_for: Vec<String>,
    /// The last STATUS= the command sent over sd_notify.
    pub notify_status: Option<String>,
    /// GPU memory of the tree at the last sample (MiB).
    pub gpu_mib: Option<u64>,
    /// A batch job's standing in words (`queued: Priority, 3rd in the queue`, `running on
    /// node07`), when the run is one.
    pub job: Option<String>,
}
