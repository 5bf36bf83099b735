//! [`SlurmLoginHost`]: Slurm driven through a login node over SSH (`firedup run --slurm --host
//! LOGIN`, `watch --slurm-job JOBID --host LOGIN`). The scheduler's commands run there, on the
//! one SSH connection of [`SshHost`], by the firedup copied there: `__slurm-submit` submits
//! (the run directory, the batch script and the job's log live on the login node, which the
//! job's nodes see on their shared file system), `__agent` follows the job's log and polls
//! `scontrol` there (the same [`crate::slurm::source::SlurmSource`] as on the login node itself),
//! `__stop` cancels and verifies there, `__meta` finds the run.
//!
//! Why the login node runs the whole watch rather than each `scontrol` being sent over SSH from
//! here: the job's end must be judged only after its log was read to its end (slurmstepd's OOM
//! line lands just after the state changes), and both are on the login node; the run's cancel
//! marker and exit record are in its run directory there too. The stream reaches the judge here
//! as a remote watch's does (heartbeats, lost contact, resume).

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::login_side::{JobAttached, SubmitRequest};
use crate::agent::RemoteLaunched;
use crate::host::{
    Attached, Before, FinishAnswer, FinishRequest, FoundRun, Host, HostError, LogFrom, RunStop,
    SshHost, Started,
};
use crate::launch::LaunchSpec;
use crate::plan::Plan;
use crate::source::Source;
use crate::target::Target;

/// Slurm on a login node reached over SSH: see the module doc.
#[derive(Debug, Clone)]
pub struct SlurmLoginHost {
    ssh: SshHost,
    /// `--sbatch-arg`s, given to every submit after firedup's own.
    sbatch_args: Vec<String>,
    /// The job attached to (`watch --slurm-job`), for a target with no run directory.
    job: Option<String>,
}

impl SlurmLoginHost {
    /// Submits through `ssh`'s host with `sbatch_args` after firedup's own arguments.
    pub fn new(ssh: SshHost, sbatch_args: Vec<String>) -> SlurmLoginHost {
        SlurmLoginHost {
            ssh,
            sbatch_args,
            job: None,
        }
    }

    /// Attaches to job `job_id`, submitted some other way: its log is the job's `StdOut=` on
    /// the login node.
    pub fn attach_job(
        &mut self,
        job_id: &str,
        note: &mut dyn FnMut(String),
    ) -> Result<Attached, HostError> {
        let host = self.ssh.host().to_string();
        let answer = self
            .ssh
            .remote_request(vec!["__slurm-job".into(), job_id.to_string()], None)?;
        let attached: JobAttached = serde_json::from_str(answer.trim()).map_err(|e| {
            HostError::Unreachable(format!("{host}: bad answer about job {job_id}: {e}"))
        })?;
        for n in attached.notes {
            note(format!("{host}: {n}"));
        }
        self.job = Some(job_id.to_string());
        Ok(Attached {
            target: Target {
                log: attached.log.into(),
                ..Default::default()
            },
            from_end: false,
            command: Vec::new(),
        })
    }
}

impl Host for SlurmLoginHost {
    fn name(&self) -> Option<&str> {
        self.ssh.name()
    }

    fn watches_process(&self) -> bool {
        false
    }

    fn check_launch(
        &self,
        _: &[String],
        _: Option<&Path>,
        _: Option<&Path>,
    ) -> crate::error::Result<()> {
        // The paths are the login node's: its `__slurm-submit` checks them.
        Ok(())
    }

    fn launch(&self, spec: &LaunchSpec) -> Result<Started, HostError> {
        let host = self.ssh.host().to_string();
        let request = serde_json::to_vec(&SubmitRequest {
            spec: spec.clone(),
            sbatch_args: self.sbatch_args.clone(),
        })
        .map_err(|e| HostError::Failed(crate::Error::Remote(format!("cannot encode: {e}"))))?;
        let answer = self
            .ssh
            .remote_request(vec!["__slurm-submit".into()], Some(request))?;
        let launched = serde_json::from_str::<RemoteLaunched>(answer.trim()).map_err(|e| {
            HostError::Unreachable(format!("{host}: bad answer from the submit: {e}"))
        })?;
        // The agent there reads sbatch's refusal from the run's record.
        Ok(Started {
            target: Target {
                log: launched.log.into(),
                run_id: launched.run_id,
                ..Default::default()
            },
            supervisor: None,
        })
    }

    fn find_run(&self, id: &str) -> Result<FoundRun, HostError> {
        self.ssh.find_run(id)
    }

    fn attach_log(
        &self,
        _log: &Path,
        _pid: Option<u32>,
        _from: LogFrom,
        _note: &mut dyn FnMut(String),
    ) -> Result<Attached, HostError> {
        Err(HostError::failed(crate::Error::usage(
            "a Slurm job is watched by its id (--slurm-job JOBID) or its run id, not by --log",
        )))
    }

    fn source(&self, plan: &Plan, target: &Target, attached: bool) -> Box<dyn Source + Send> {
        match (&self.job, attached) {
            (Some(job), true) => self.ssh.job_source(plan, &target.log, job),
            // A run: the agent watches it as the job its record names.
            _ => self.ssh.source(plan, target, false),
        }
    }

    fn alive(&self, _: &Target) -> Option<bool> {
        None
    }

    fn stop(&self, run_id: &str, grace: Duration) -> Result<RunStop, HostError> {
        self.ssh.stop(run_id, grace)
    }

    fn gpu_after_stop(&self, _: &RunStop) -> Option<u64> {
        None
    }

    fn before_cell(&self, port: Option<u16>) -> Result<Before, HostError> {
        self.ssh.before_cell(port)
    }

    fn finish_cell(&self, request: &FinishRequest, cancel: &AtomicBool) -> FinishAnswer {
        self.ssh.finish_cell(request, cancel)
    }

    fn cancel(&self, target: &Target, grace: Duration) {
        self.ssh.cancel(target, grace)
    }
}
