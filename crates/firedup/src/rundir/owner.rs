//! A run's owner (`run --owner PID`) and the record of its end.
//!
//! The owner is named by its pid and its start time (`/proc/PID/stat`), so a later process given
//! the same pid is not taken for it. `meta.json` holds it (`owner`). When the owner ends, the
//! supervisor writes `owner_gone.json` *before* it stops the run (so whoever judges the SIGTERM
//! that follows knows it was firedup's, sent because the owner ended) and writes it again with
//! what the stop found (see `crate::owner_watch`).

use serde::{Deserialize, Serialize};

use super::{RunDir, read_json, write_json};
use crate::error::{Result, usage};
use crate::stop::StopReport;

/// The process whose end stops the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// Its pid.
    pub pid: u32,
    /// Its start time after boot in clock ticks: with the pid, it names one process.
    pub start_ticks: u64,
}

impl Owner {
    /// The live process `pid`, with its start time; a usage error when there is none (nothing
    /// would own the run: it would be stopped as soon as it started).
    pub fn resolve(pid: u32) -> Result<Owner> {
        match crate::process::stat(pid) {
            Some(s) if s.state != 'Z' && s.state != 'X' && pid != 0 => Ok(Owner {
                pid,
                start_ticks: s.start_ticks,
            }),
            _ => usage!(
                "--owner {pid}: no such process is running; give the pid of a live process whose end should stop the run"
            ),
        }
    }

    /// [`Owner::resolve`] for a launch: `slurm` (`run --slurm`) and `elsewhere` (`--host`) are
    /// refused, since the pid names a process of this machine and the run would be on another.
    pub fn for_launch(pid: u32, slurm: bool, elsewhere: bool) -> Result<Owner> {
        if slurm {
            usage!(
                "--owner does not go with --slurm yet: PID is a process of this machine, and the job is watched by Slurm, not by firedup's supervisor"
            );
        }
        if elsewhere {
            usage!(
                "--owner does not go with --host yet: PID is a process of this machine, and the run's supervisor would be on the other one"
            );
        }
        Owner::resolve(pid)
    }

    /// Whether the owner still runs (the same process: its start time matches).
    pub fn is_alive(&self) -> bool {
        crate::process::is_alive(self.pid, Some(self.start_ticks))
    }
}

/// What the supervisor recorded when the run's owner ended (`owner_gone.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnerGone {
    /// The owner's pid.
    pub owner: u32,
    /// When the supervisor saw the owner gone: Unix time in seconds.
    pub noticed_at: f64,
    /// What the stop found; `None` while the stop is under way.
    #[serde(default)]
    pub stop: Option<StopReport>,
}

impl OwnerGone {
    /// The ending in one phrase, for the history's teardown column and the verdict's reason.
    pub fn describe(&self) -> String {
        match &self.stop {
            Some(s) => format!(
                "stopped because its owner, pid {}, ended: {}",
                self.owner,
                s.describe()
            ),
            None => format!(
                "its owner, pid {}, ended; the stop had not finished",
                self.owner
            ),
        }
    }
}

impl RunDir {
    /// Reads `owner_gone.json`; `None` unless the run's owner ended.
    pub fn owner_gone(&self) -> Option<OwnerGone> {
        read_json(&self.path.join("owner_gone.json")).ok()
    }
    /// Writes `owner_gone.json` atomically.
    pub fn write_owner_gone(&self, rec: &OwnerGone) -> Result<()> {
        write_json(&self.path.join("owner_gone.json"), rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_is_a_live_process_named_by_pid_and_start_time() {
        let me = Owner::resolve(std::process::id()).unwrap();
        assert!(me.is_alive());
        let reused = Owner {
            start_ticks: me.start_ticks + 1,
            ..me
        };
        assert!(!reused.is_alive(), "another process given the same pid");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let e = Owner::resolve(pid).unwrap_err().to_string();
        assert!(e.contains("no such process is running"), "{e}");
    }
}
