//! The login node's side of a Slurm run driven from another machine (`firedup run --slurm
//! --host LOGIN`, `firedup watch --slurm-job JOBID --host LOGIN`): the copied firedup there runs
//! the scheduler's commands, as [`SlurmHost`] does on a login node, and answers as JSON on
//! stdout.
//!
//! - `firedup __slurm-submit`: a [`SubmitRequest`] on stdin; submits with `sbatch` there (the run
//!   directory, the batch script and the job's log are on the login node, which the job's nodes
//!   see on their shared file system) and answers a [`RemoteLaunched`].
//! - `firedup __slurm-job JOBID`: the job's output file (`StdOut=`), as a [`JobAttached`].
//!
//! A usage mistake (a job Slurm does not know, a bad working directory) exits 2 with its
//! sentence; Slurm not answering there exits 7, the code of `monitor_error`.
//!
//! The watch is `firedup __agent` (its `SlurmSource` follows the log and polls `scontrol` there);
//! the stop is `firedup __stop`, which cancels a run whose record names a job.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use crate::agent::RemoteLaunched;
use crate::error::{Context, Result};
use crate::host::{Host, HostError, SlurmHost};
use crate::launch::LaunchSpec;

/// What `__slurm-submit` reads on stdin.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubmitRequest {
    /// The launch, as `firedup run` resolved it (its environment travels here, never on a
    /// command line).
    pub spec: LaunchSpec,
    /// The `--sbatch-arg`s.
    pub sbatch_args: Vec<String>,
}

/// What `__slurm-job JOBID` answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobAttached {
    /// The job's output file on the login node.
    pub log: String,
    /// What the user should hear about the attach (the job's state, its log).
    pub notes: Vec<String>,
}

/// How the login node says it could not do it: the sentence on `err` and the exit code of
/// `monitor_error` (Slurm does not answer there: the local side makes it that verdict); a
/// usage mistake is an `Err` (exit 2: the local side says it as a usage error).
fn refused(e: HostError, err: &mut dyn Write) -> Result<i32> {
    match e {
        HostError::Unreachable(reason) => {
            writeln!(err, "firedup: {reason}")?;
            Ok(crate::verdict::Verdict::MonitorError.exit_code())
        }
        HostError::Failed(e) => Err(e),
    }
}

/// `firedup __slurm-submit`: see the module doc.
pub fn submit(input: &mut dyn Read, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32> {
    let mut text = String::new();
    input
        .read_to_string(&mut text)
        .context("cannot read the submit request on stdin")?;
    let req: SubmitRequest = serde_json::from_str(&text).context("bad submit request")?;
    let started = match SlurmHost::new(req.sbatch_args).launch(&req.spec) {
        Ok(s) => s,
        Err(e) => return refused(e, err),
    };
    let t = started.target;
    let answer = RemoteLaunched {
        run_id: t.run_id,
        log: t.log.display().to_string(),
        pid: None,
        spawn_error: t.spawn_error,
    };
    writeln!(out, "{}", serde_json::to_string(&answer)?)?;
    Ok(0)
}

/// `firedup __slurm-job JOBID`: see the module doc.
pub fn job(id: &str, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32> {
    let mut notes = Vec::new();
    let attached = match SlurmHost::default().attach_job(id, &mut |n| notes.push(n)) {
        Ok(a) => a,
        Err(e) => return refused(e, err),
    };
    let answer = JobAttached {
        log: attached.target.log.display().to_string(),
        notes,
    };
    writeln!(out, "{}", serde_json::to_string(&answer)?)?;
    Ok(0)
}
