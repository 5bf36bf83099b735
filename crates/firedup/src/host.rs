//! The `Host` seam: where a server runs. Launching it, observing it (a [`Source`] for the judge
//! loop), finding a run again, stopping it and proving it gone, and the host's side of a matrix
//! cell (the machine before it, the bench, the verified teardown) are asked of a [`Host`], so
//! the commands `run`, `watch`, `stop` and a matrix cell are written once, whatever the host.
//!
//! - [`LocalHost`]: this machine (the supervisor, `LocalObserver`, `/proc`).
//! - [`SshHost`]: another machine over SSH (the same code there, as the `firedup __agent`,
//!   `__remote-launch`, `__meta`, `__stop` and `__cell-*` commands of the copied firedup).
//! - [`SlurmHost`]: a Slurm batch job (`sbatch`, `scontrol`, `scancel`), and
//!   [`SlurmLoginHost`] (`ssh` feature): the same with the scheduler's commands run on a login
//!   node over SSH.
//!
//! A trait, not an enum: a third host (a batch scheduler) is a new implementation, and the
//! commands hold a `&dyn Host` (an `Arc` where a signal thread needs one too). Everything a host
//! finds is returned as data; nothing here prints. A host that cannot be reached or used is
//! [`HostError::Unreachable`] (the commands make it a `monitor_error` verdict), firedup's own
//! failure on it is [`HostError::Failed`] (one sentence, exit 2).

pub mod bench;
mod cell;
mod late_writer;
pub mod local;
pub mod slurm;
#[cfg(feature = "ssh")]
pub mod ssh;
#[cfg(feature = "ssh")]
mod ssh_node;
pub mod teardown;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::rundir::RunRecords;
pub use cell::{BenchRequest, FinishAnswer, FinishRequest};
pub use local::LocalHost;
pub use slurm::SlurmHost;
#[cfg(feature = "ssh")]
pub use slurm::login::SlurmLoginHost;
#[cfg(feature = "ssh")]
pub use ssh::SshHost;
pub use teardown::{Before, TeardownCheck};

use crate::launch::LaunchSpec;
use crate::plan::Plan;
use crate::rundir::RunMeta;
use crate::source::Source;
use crate::stop::StopReport;
use crate::target::Target;

/// The host of run `run_id` (an id or a name) of this machine: [`SlurmHost`] for a run whose
/// record names a batch job (`run --slurm`), else [`LocalHost`] (also for a run not found: its
/// command then says so).
pub fn of_run_here(run_id: &str) -> Box<dyn Host> {
    let submitted = crate::rundir::RunDir::open(run_id)
        .ok()
        .and_then(|r| r.meta().ok())
        .is_some_and(|m| m.job.is_some());
    if submitted {
        Box::new(SlurmHost::default())
    } else {
        Box::new(LocalHost)
    }
}

/// The host a launch goes to, chosen in one place for `run` and `matrix`: a Slurm batch job
/// (`slurm` holds its sbatch arguments) submitted here or through the SSH login node `ssh`, else
/// the SSH host, else this machine.
#[cfg(feature = "ssh")]
pub fn choose(ssh: Option<SshHost>, slurm: Option<Vec<String>>) -> std::sync::Arc<dyn Host> {
    use std::sync::Arc;
    match (slurm, ssh) {
        (Some(sbatch_args), Some(login)) => Arc::new(SlurmLoginHost::new(login, sbatch_args)),
        (Some(sbatch_args), None) => Arc::new(SlurmHost::new(sbatch_args)),
        (None, Some(h)) => Arc::new(h),
        (None, None) => Arc::new(LocalHost),
    }
}

/// Where a server runs: see the module doc.
pub trait Host: std::fmt::Debug + Send + Sync {
    /// The SSH destination as the user wrote it; `None` for this machine.
    fn name(&self) -> Option<&str>;

    /// Whether a run here has a process firedup watches (false for a batch job: its end comes
    /// from the scheduler's state, and the judge must not expect a process).
    fn watches_process(&self) -> bool {
        true
    }

    /// Checks, before anything is launched, what can be checked from here (the command, its
    /// working directory and the log path, on this machine).
    fn check_launch(
        &self,
        command: &[String],
        cwd: Option<&Path>,
        log: Option<&Path>,
    ) -> crate::error::Result<()>;

    /// Launches `spec` under the host's supervisor; returns what was launched.
    fn launch(&self, spec: &LaunchSpec) -> Result<Started, HostError>;

    /// A run launched earlier, by its id or name, with its record.
    fn find_run(&self, id: &str) -> Result<FoundRun, HostError>;

    /// Attaches to a log written by something started another way (and its process, `pid`, when
    /// known). `note` hears what the user should know about the attach (the process found writing
    /// the log, where judging starts).
    fn attach_log(
        &self,
        log: &Path,
        pid: Option<u32>,
        from: LogFrom,
        note: &mut dyn FnMut(String),
    ) -> Result<Attached, HostError>;

    /// The log of process `pid`, started another way, for `watch --pid PID` without `--log`: the
    /// regular file its output (descriptor 1) goes to. Only this machine can look.
    fn output_of(&self, pid: u32) -> Result<PathBuf, HostError> {
        Err(HostError::failed(crate::Error::Usage(format!(
            "the output of process {pid} can only be found on this machine: give its log with --log PATH"
        ))))
    }

    /// The observations of `target` under `plan`, for [`crate::engine::judge_loop`]. `attached`:
    /// the target came from [`Host::attach_log`], not from a launch or [`Host::find_run`].
    fn source(&self, plan: &Plan, target: &Target, attached: bool) -> Box<dyn Source + Send>;

    /// Whether anything of the run lives (its process, its tree, a process carrying its
    /// `FIREDUP_RUN_ID`); `None` when this host cannot tell without asking the judge.
    fn alive(&self, target: &Target) -> Option<bool>;

    /// Stops run `run_id` (an id or a name): SIGTERM, grace, SIGKILL, then verifies that nothing
    /// of it is left.
    fn stop(&self, run_id: &str, grace: Duration) -> Result<RunStop, HostError>;

    /// GPU memory the stopped processes still hold, waiting (bounded) for the driver to release
    /// it; `None` where it cannot be told.
    fn gpu_after_stop(&self, stop: &RunStop) -> Option<u64>;

    /// The machine before a matrix cell starts: who listens on its port, which GPU processes run.
    fn before_cell(&self, port: Option<u16>) -> Result<Before, HostError>;

    /// After a cell's verdict: its bench (when asked), then the verified teardown. `cancel` ends
    /// a bench running here early (Ctrl-C). A teardown that cannot be verified is dirty.
    fn finish_cell(&self, request: &FinishRequest, cancel: &AtomicBool) -> FinishAnswer;

    /// Ctrl-C during a cell: stops its bench, if one runs, and the server, bounded by `grace`.
    /// Best effort: the cell's teardown verifies.
    fn cancel(&self, target: &Target, grace: Duration);

    /// Records the verdict the launch reached in the run's directory (`verdict.json`: what a
    /// later watch of the ended run reports), where the host keeps it (here: a run on this
    /// machine). Best effort: the verdict stands without.
    fn record_verdict(&self, target: &Target, outcome: &crate::verdict::Outcome) {
        if let Some(run) = &target.run {
            let _ = run.record_verdict(outcome);
        }
    }
}

/// What [`Host::launch`] started.
#[derive(Debug)]
pub struct Started {
    /// The run: its id, log and pid (and here, its run directory and the supervisor's pipe).
    pub target: Target,
    /// The supervisor, when this process started it: reaped by [`Started::reap`].
    pub supervisor: Option<std::process::Child>,
}

impl Started {
    /// Reaps the supervisor if it is done (it stays alive as long as the server does).
    pub fn reap(&mut self) {
        if let Some(s) = self.supervisor.as_mut() {
            let _ = s.try_wait();
        }
    }
}

/// A run found by [`Host::find_run`].
#[derive(Debug, Clone)]
pub struct FoundRun {
    /// What to watch (its own id, where a name was given).
    pub target: Target,
    /// How it was launched.
    pub meta: RunMeta,
    /// Whether it has ended (a launcher that exited 0 leaving its daemon serving has not).
    pub ended: bool,
    /// What its run directory recorded about how it went (empty where the host does not say).
    pub records: RunRecords,
}

/// Where an attach by log starts judging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogFrom {
    /// `--from-start`: what the log already holds too.
    pub start: bool,
    /// `--from-end`: only lines written from now on.
    pub end: bool,
    /// Without a pid, a log that does not exist yet is waited for this long (the log grace), so
    /// that the process writing it is found when it appears; `None`: not waited for.
    pub wait_for_log: Option<std::time::Duration>,
}

/// What [`Host::attach_log`] attached to.
#[derive(Debug, Clone)]
pub struct Attached {
    /// The log and the process (found writing it, where it was not given); `run_id` is empty.
    pub target: Target,
    /// Judge only what is written from now on.
    pub from_end: bool,
    /// The process's command line, when known.
    pub command: Vec<String>,
}

/// How [`Host::stop`] went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStop {
    /// What was signalled, whether SIGKILL was needed, and what survived.
    pub report: StopReport,
    /// The run has no process record and nothing carries its id: it never started.
    pub never_started: bool,
}

impl RunStop {
    /// The stop in one phrase, as `firedup stop` says it.
    pub fn describe(&self) -> String {
        if self.never_started {
            format!("never started; {}", self.report.describe())
        } else {
            self.report.describe()
        }
    }

    /// Nothing of the run is left.
    pub fn clean(&self) -> bool {
        self.report.clean()
    }
}

/// A host that failed to do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The host could not be reached or used (SSH, the remote firedup): nothing can be said about
    /// the server there.
    #[error("{0}")]
    Unreachable(String),
    /// firedup's own failure (a run that does not exist, a launch refused).
    #[error(transparent)]
    Failed(#[from] crate::Error),
}

impl HostError {
    /// firedup's own failure, whatever error type it comes as.
    pub fn failed(e: impl Into<crate::Error>) -> HostError {
        HostError::Failed(e.into())
    }
}
