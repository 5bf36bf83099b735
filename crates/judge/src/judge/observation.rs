//! What the shell tells the judge: one observation at a time, each with the time it was made.
//! Serializable, because the remote agent streams them over SSH exactly as the local observer
//! makes them (a log line travels as its number and text: the judge classifies it).

use crate::job::JobSnapshot;
use crate::notify_message::NotifyMessage;
use crate::probe_outcome::ProbeOutcome;
use crate::profile::ProbeKind;
use crate::verdict::ExitInfo;

/// State of the log file as the follower sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum LogState {
    /// The log does not exist (yet); `dir_exists` says whether its directory does.
    Missing {
        /// Whether the log's directory exists.
        dir_exists: bool,
    },
    /// The log is there and being read.
    Readable,
    /// The log was truncated; reading starts over from its beginning.
    Truncated,
    /// The log was renamed or replaced; the new file is followed.
    Rotated,
    /// The log cannot be read, for this reason.
    Unreadable(String),
}

/// One thing the shell saw. Serializable: the remote agent streams these.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Observation {
    /// A log line (cleaned text); the judge classifies it.
    Line {
        /// The line's number in the log (1-based, counted by the follower).
        number: u64,
        /// The line's text, cleaned of escape sequences and invalid UTF-8.
        text: String,
    },
    /// The log file changed state.
    Log(LogState),
    /// The process is running with this pid.
    Started {
        /// The process id.
        pid: u32,
    },
    /// The command could not be started at all.
    SpawnFailed {
        /// Why, in one sentence.
        reason: String,
    },
    /// The process was seen gone (its pidfd fired); how it ended follows as [`Observation::Exited`]
    /// once learned, which can be seconds later (its supervisor's record, written with an fsync
    /// on a loaded disk). The times the verdict's reason states count to here.
    Gone,
    /// The process ended; `None` when its status cannot be learned (not our child).
    Exited(Option<ExitInfo>),
    /// Server mode: the launched process exited 0 while processes of the run (found by its
    /// `FIREDUP_RUN_ID`) live on: it daemonized. The run goes on, followed through `pid`; the
    /// exit of the last of them is the run's exit.
    LauncherLeft {
        /// The daemon followed from now on.
        pid: u32,
        /// Its command line, for the verdict's reason.
        command: String,
        /// Where its output goes when that is not the log (`/dev/null`: a daemon that detached
        /// from its terminal): its ready line can never be seen, so the probes decide, or, with
        /// none, the watch ends at once saying why. `None`: it writes the log (or cannot be told).
        #[serde(default)]
        output: Option<String>,
    },
    /// The process tree's cumulative CPU time (clock ticks) and bytes read.
    Usage {
        /// Cumulative CPU time of the tree, in clock ticks (1/100 s).
        cpu_ticks: u64,
        /// Cumulative bytes read by the tree.
        read_bytes: u64,
    },
    /// Kernel or cgroup evidence that the OOM killer ended the process.
    OomEvidence(String),
    /// The run's owner (`run --owner PID`) ended, and firedup is stopping the run: the exit
    /// that follows is firedup's doing.
    OwnerGone {
        /// The owner's pid.
        pid: u32,
    },
    /// firedup's own probe failed and cannot recover.
    MonitorFault(String),
    /// A readiness probe's result.
    Probe {
        /// Which probe answered.
        kind: ProbeKind,
        /// What it saw.
        outcome: ProbeOutcome,
    },
    /// A message from the command on its sd_notify socket.
    Notify(NotifyMessage),
    /// GPU memory (MiB) held by the watched process tree.
    GpuMemory(u64),
    /// nvidia-smi exists but failed: reported, never a verdict (GPU memory is evidence only).
    GpuError(String),
    /// A process of the run that carries a rank (`RANK`, `LOCAL_RANK` or `SLURM_PROCID` in its
    /// environment) ended.
    RankEnded {
        /// The rank its environment named.
        rank: u32,
        /// The process id.
        pid: u32,
        /// How it ended, when that could be learned.
        exit: Option<ExitInfo>,
    },
    /// Every rank was silent, and this one was not inside a collective while its peers were
    /// (their stacks compared).
    RankOutsideCollective {
        /// The rank.
        rank: u32,
        /// What showed it, in words (the stack or wait channel seen).
        evidence: String,
    },
    /// Every rank had been silent for a while, and this is where each live one was (its stack
    /// read); sent at each such look, whatever it found. The judge keeps the last one for the
    /// verdict ([`crate::verdict::Outcome::placed`]), where a group of nodes compares them.
    RankPlaces {
        /// Each rank read, in rank order.
        ranks: Vec<crate::rank_place::RankPlace>,
    },
    /// A batch scheduler's reading of the job, each time it changes (see [`crate::job`]).
    Job(JobSnapshot),
    /// firedup itself stopped the run (`firedup stop`, a verdict's teardown, an interrupted
    /// `firedup run`): its record in the run directory was written before the first signal and
    /// before the exit that follows. That exit is firedup's doing, not someone else's.
    FiredupStop {
        /// Who stopped it, in words (`firedup stop (pid 412, uid 1000)`).
        by: String,
    },
    /// Nothing new; the deadline asked for has come.
    Tick,
}
