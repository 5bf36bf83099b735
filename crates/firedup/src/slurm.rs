//! Slurm, the batch scheduler: its commands (`sbatch`, `scontrol`, `squeue`, `scancel`) as
//! [`Slurm`], run on this machine, each answer read into data; what a run does with them is in
//! [`crate::host::slurm::SlurmHost`] (submit, find, stop) and [`source::SlurmSource`] (the watch).
//!
//! - [`job_info`]: one line of `scontrol show job -o` read into a [`job_info::JobInfo`].
//! - [`submit`]: the batch script and the `sbatch` arguments of `firedup run --slurm`.
//! - [`source`]: the job's log followed and its state polled, as observations for the judge.
//!
//! Nothing here depends on accounting (`sacct`): a cluster without slurmdbd has none.
//! A scheduler command that fails is an `Err(String)`: the command's own error line, for the
//! verdict's reason.

pub mod job_info;
pub mod source;
pub mod submit;

use std::path::Path;
use std::process::{Command, Stdio};

use job_info::JobInfo;

/// The file a run's directory holds once firedup itself asked Slurm to cancel the job (`firedup
/// stop`, a verdict's teardown): a `CANCELLED` end is then not someone else's cancel.
pub const CANCEL_MARKER: &str = "cancel_requested";

/// Slurm's commands, run on this machine (`SLURM_CONF` and `PATH` as firedup has them).
#[derive(Debug, Clone, Copy, Default)]
pub struct Slurm;

impl Slurm {
    /// Runs `program args`: its stdout, or its error in one line.
    fn run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let out = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {program}: {e}"))?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        Err(error_line(program, &out.stderr, &out.stdout))
    }

    /// Whether Slurm answers here (`sinfo` works).
    pub fn reachable(&self) -> Result<(), String> {
        self.run("sinfo", &["-h", "-o", "%P"]).map(|_| ())
    }

    /// The job, as `scontrol show job -o` prints it; `Ok(None)` when Slurm no longer knows it
    /// (it ended longer ago than `MinJobAge`, or the id is wrong).
    pub fn show_job(&self, id: &str) -> Result<Option<JobInfo>, String> {
        match self.run("scontrol", &["show", "job", "-o", id]) {
            Ok(text) => Ok(text.lines().find_map(JobInfo::parse)),
            Err(e) if e.contains("Invalid job id") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The job's place among the pending jobs of its partition, in the order Slurm will
    /// consider them (priority, then id); `None` when it is not pending or Slurm does not say.
    pub fn queue_position(&self, id: &str, partition: Option<&str>) -> Option<u32> {
        let mut args = vec!["-h", "-t", "PD", "-o", "%i", "--sort=-p,i"];
        if let Some(p) = partition {
            args.extend(["-p", p]);
        }
        let text = self.run("squeue", &args).ok()?;
        let at = text.lines().position(|l| l.trim() == id)?;
        u32::try_from(at + 1).ok()
    }

    /// A node list (`node[1-3],gpu7`) expanded into host names; the list itself, split at its
    /// commas, when `scontrol show hostnames` fails.
    pub fn hostnames(&self, list: &str) -> Vec<String> {
        match self.run("scontrol", &["show", "hostnames", list]) {
            Ok(text) => text
                .lines()
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .collect(),
            Err(_) => list.split(',').map(String::from).collect(),
        }
    }

    /// `scancel JOBID`.
    pub fn cancel(&self, id: &str) -> Result<(), String> {
        self.run("scancel", &[id]).map(|_| ())
    }

    /// The job's state as `squeue` shows it; `Ok(None)` once the queue no longer lists it.
    pub fn queue_state(&self, id: &str) -> Result<Option<String>, String> {
        match self.run("squeue", &["-h", "-j", id, "-o", "%T"]) {
            Ok(text) => Ok(text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(String::from)),
            Err(e) if e.contains("Invalid job id") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The pids of the job's processes on this node (`scontrol listpids`); `None` when Slurm
    /// cannot tell (the job does not run here, or the proctrack plugin does not say).
    pub fn listpids(&self, id: &str) -> Option<Vec<u32>> {
        let text = self.run("scontrol", &["listpids", id]).ok()?;
        Some(
            text.lines()
                .skip(1)
                .filter_map(|l| l.split_whitespace().next()?.parse().ok())
                .collect(),
        )
    }

    /// `sbatch --parsable ARGS SCRIPT SCRIPT_ARGS` run in `cwd` with `env` added: the job id, or
    /// sbatch's own error line.
    pub fn submit(
        &self,
        args: &[String],
        script: &Path,
        script_args: &[String],
        cwd: &Path,
        env: &[(String, String)],
    ) -> Result<String, String> {
        let out = Command::new("sbatch")
            .arg("--parsable")
            .args(args)
            .arg(script)
            .args(script_args)
            .current_dir(cwd)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run sbatch: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        // `--parsable` prints `ID` or `ID;CLUSTER`.
        let id = text
            .lines()
            .last()
            .and_then(|l| l.split(';').next())
            .map(str::trim);
        match id {
            Some(id) if out.status.success() && !id.is_empty() => Ok(id.to_string()),
            _ => Err(error_line("sbatch", &out.stderr, &out.stdout)),
        }
    }
}

/// A failed command's error in one line: the last line of its stderr that says `error`, else
/// its last line, else its exit.
fn error_line(program: &str, stderr: &[u8], stdout: &[u8]) -> String {
    let err = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = err
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let line = lines
        .iter()
        .rev()
        .find(|l| l.to_ascii_lowercase().contains("error"))
        .or(lines.last())
        .map(|l| l.to_string())
        .or_else(|| {
            String::from_utf8_lossy(stdout)
                .lines()
                .last()
                .map(|l| l.trim().to_string())
        });
    match line {
        Some(l) if !l.is_empty() => l,
        _ => format!("{program} failed and said nothing"),
    }
}

/// Whether job `id` is still queued or running; true when Slurm cannot be asked (it may be).
pub fn job_active(id: &str) -> bool {
    match Slurm.show_job(id) {
        Ok(Some(info)) => !info.is_terminal(),
        Ok(None) => false,
        Err(_) => true,
    }
}

/// Whether `node` (as Slurm names it) is this machine.
pub fn is_this_host(node: &str) -> bool {
    let Ok(name) = std::fs::read_to_string("/proc/sys/kernel/hostname") else {
        return false;
    };
    let name = name.trim();
    let short = name.split('.').next().unwrap_or(name);
    node == name || node == short || node.split('.').next() == Some(short)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_line_is_the_one_that_says_error() {
        let cases: [(&str, &str, &str); 4] = [
            (
                "sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
                "",
                "sbatch: error: Batch job submission failed: Requested node configuration is not available",
            ),
            (
                "sbatch: warning: x\nsbatch: error: invalid partition specified: nope\n\n",
                "",
                "sbatch: error: invalid partition specified: nope",
            ),
            ("just this\n", "", "just this"),
            ("", "", "sbatch failed and said nothing"),
        ];
        for (stderr, stdout, want) in cases {
            assert_eq!(
                error_line("sbatch", stderr.as_bytes(), stdout.as_bytes()),
                want
            );
        }
    }
}
