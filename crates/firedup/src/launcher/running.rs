//! [`Running`]: a launched run that reached the verdict asked for, as the library's caller holds
//! it: its id, pid, log, URL and port, [`Running::wait`] for the final outcome, [`Running::stop`]
//! and [`Running::keep`]; a drop stops it and checks that nothing of it is left.

use std::path::Path;
use std::time::Duration;

use super::host_failure;
use crate::engine::NoProgress;
use crate::error::Error;
use crate::plan::WatchOptions;
use crate::profile::Address;
use crate::session::{EndPolicy, Session, Watched};
use crate::stop::StopReport;
use crate::verdict::Outcome;

/// A launched run that reached the verdict asked for. Dropping it stops the run and checks
/// that nothing of it is left (as [`Running::stop`], the report unseen).
#[derive(Debug)]
pub struct Running {
    pub(super) session: Session,
    pub(super) options: WatchOptions,
    pub(super) command: Vec<String>,
    pub(super) address: Option<Address>,
    /// Always `Some` once `start` returns it.
    pub(super) outcome: Option<Outcome>,
    /// Whether the outcome is final (the process ended).
    pub(super) ended: bool,
    pub(super) grace: Duration,
    pub(super) stopped: Option<StopReport>,
    /// [`Running::keep`]: the drop leaves the run alone.
    pub(super) kept: bool,
}

impl Running {
    /// The outcome so far: `ready` (or `succeeded`) from [`Launch::start`], the final one after
    /// [`Running::wait`].
    pub fn outcome(&self) -> &Outcome {
        self.outcome
            .as_ref()
            .expect("a Running is only handed out with its outcome")
    }

    /// The run's id (`firedup ps`, `logs`, `stop`; every process of the run carries it as
    /// `FIREDUP_RUN_ID`).
    pub fn run_id(&self) -> &str {
        &self.session.target().run_id
    }

    /// The launched process.
    pub fn pid(&self) -> Option<u32> {
        self.session.target().pid
    }

    /// The log the command's output goes to.
    pub fn log(&self) -> &Path {
        &self.session.target().log
    }

    /// The server's base URL (`http://host:port`), when the profile, `.port` or `.http` tell it.
    pub fn url(&self) -> Option<String> {
        self.address.as_ref().map(Address::base_url)
    }

    /// The server's port, when the profile, `.port` or `.http` tell it.
    pub fn port(&self) -> Option<u16> {
        self.address.as_ref().map(|a| a.port)
    }

    /// Watches the run until its process ends and returns the final outcome (`succeeded`,
    /// `exited`, `killed`, `failed` ...), judged as `firedup run --until exit` would, the stall
    /// window included. Blocks as long as the server runs; returns at once when the outcome is
    /// already final. `Err` only for firedup's own failure.
    pub fn wait(&mut self) -> Result<&Outcome, Error> {
        if !self.ended {
            let mut options = self.options.clone();
            options.until_exit = true;
            // Server-mode bounds end here: the startup deadline and the hold after ready.
            options.timeout = None;
            options.hold = None;
            self.session
                .replan(&options, &self.command)
                .map_err(host_failure)?;
            let Watched::Verdict(outcome) = self.session.watch(&mut NoProgress, None, None) else {
                unreachable!("an unbounded watch ends with a verdict");
            };
            let mut outcome = *outcome;
            self.session.end(&mut outcome, EndPolicy::Leave);
            self.outcome = Some(outcome);
            self.ended = true;
        }
        Ok(self.outcome())
    }

    /// Stops everything of the run (SIGTERM, the grace, SIGKILL; also what left the process
    /// tree: below its supervisor, or its user's with its `FIREDUP_RUN_ID`) and says what it found: `survivors` is empty when
    /// nothing of the run is left.
    pub fn stop(mut self) -> StopReport {
        self.stop_once()
    }

    /// Leaves the run running, as `firedup run --keep` does, and returns its outcome so far:
    /// `firedup stop RUN_ID` (or its name) ends it later, or its owner's end (this process by
    /// default: launch it [`Launch::without_owner`] to outlive it).
    pub fn keep(mut self) -> Outcome {
        self.kept = true;
        self.outcome().clone()
    }

    pub(super) fn stop_once(&mut self) -> StopReport {
        if let Some(r) = &self.stopped {
            return r.clone();
        }
        let report = match self.session.stop(self.grace) {
            Ok(stop) => stop.report,
            // The host could not be asked (a lost SSH link): nothing can be said to be gone.
            Err(e) => StopReport {
                targeted: self.pid().into_iter().collect(),
                escalated: false,
                survivors: vec![(
                    self.pid().unwrap_or(0),
                    format!("not known to be stopped: {e}"),
                )],
                took: Duration::ZERO,
                swept: None,
                job: None,
            },
        };
        self.stopped = Some(report.clone());
        report
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        // A drop never panics (it may run while a failed test unwinds).
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.stop_once()));
    }
}
