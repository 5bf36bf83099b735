//! Verified teardown between matrix cells: stop the cell's process tree and every process carrying
//! the run's `FIREDUP_RUN_ID`, then prove the machine is clean before the next cell starts on it:
//! - no process of the tree, nor of the run's id, is left;
//! - the cell's port has no listening socket that was not there before the cell started;
//! - the GPU memory those processes held is released, and no GPU process of the run (born during
//!   the cell, with the run's `FIREDUP_RUN_ID` in its environment: one that escaped the tree,
//!   e.g. a double-forked worker) is still alive — where nvidia-smi exists; a failing nvidia-smi
//!   means it cannot be verified.
//!
//! Each check is bounded; what cannot be proven clean is a named problem, and the runner does not
//! start another cell on a dirty machine unless told to.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::process;
use crate::rundir::stop_record::stop_recorded_run;
use crate::stop::stop_run;
use crate::target::Target;

/// How long a port may stay held after the tree is gone (a socket closing, a slow exit).
const PORT_RELEASE_WAIT: Duration = Duration::from_secs(5);
/// How long the driver may take to release a dead process's GPU memory.
const GPU_RELEASE_WAIT: Duration = Duration::from_secs(10);
const RECHECK: Duration = Duration::from_millis(100);

/// The machine before a cell starts: what is already there is not the cell's doing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Before {
    /// Pids listening on the cell's port.
    pub port_holders: Vec<u32>,
    /// The sockets listening on the cell's port (their owners may not be visible).
    #[serde(default)]
    pub port_inodes: Vec<u64>,
    /// Pids of GPU compute processes; `None` when nvidia-smi is missing or failing.
    pub gpu_pids: Option<Vec<u32>>,
}

impl Before {
    /// Looks at the machine now.
    pub fn capture(port: Option<u16>) -> Before {
        Before {
            port_holders: port
                .map(crate::probe::tcp::listener_pids)
                .unwrap_or_default(),
            port_inodes: port
                .map(crate::probe::tcp::listener_inodes)
                .unwrap_or_default(),
            gpu_pids: crate::probe::gpu::gpu_pids()
                .ok()
                .flatten()
                .map(|apps| apps.into_iter().map(|(p, _)| p).collect()),
        }
    }
}

/// What teardown found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TeardownCheck {
    /// Everything was proven clean.
    pub clean: bool,
    /// What is not clean, one phrase each (`port 6391 still held by pid 42 (redis-server)`).
    pub problems: Vec<String>,
    /// What happened on the way (`SIGKILL after the 2s grace`).
    pub notes: Vec<String>,
    /// GPU memory the tree still held at the end, where known (`None`: no nvidia-smi here).
    pub gpu_after_mib: Option<u64>,
    /// How long the teardown and its checks took, in seconds.
    pub took_s: f64,
}

impl TeardownCheck {
    /// One phrase for tables and history.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if self.clean {
            parts.push("clean".to_string());
        } else {
            parts.push(format!("DIRTY: {}", self.problems.join("; ")));
        }
        parts.extend(self.notes.iter().cloned());
        parts.join("; ")
    }
}

/// Stops `target`'s tree and verifies the machine is clean. `port` is the cell's listen port;
/// `before` is how the machine looked before the cell started.
pub fn teardown(
    target: &Target,
    grace: Duration,
    port: Option<u16>,
    before: &Before,
) -> TeardownCheck {
    let held_before = &before.port_holders;
    let began = Instant::now();
    let mut check = TeardownCheck::default();
    let mut pids: Vec<u32> = target.pid.into_iter().collect();
    // The tree and whatever else carries the run's FIREDUP_RUN_ID (a daemon, a double fork).
    if target.pid.is_some() || !target.run_id.is_empty() {
        let report = match &target.run {
            Some(run) => stop_recorded_run(run, target.pid, target.start_ticks, grace),
            None => stop_run(target.pid, target.start_ticks, &target.run_id, grace),
        };
        if report.escalated {
            check.notes.push(format!(
                "SIGKILL after the {} grace",
                crate::duration::format_duration(grace)
            ));
        }
        for (p, cmd) in &report.survivors {
            check
                .problems
                .push(format!("pid {p} ({cmd}) survived SIGKILL"));
        }
        pids.extend(report.targeted.iter().copied());
        pids.sort_unstable();
        pids.dedup();
    }
    if let Some(port) = port {
        // By socket, not only by owner: a listener whose owner cannot be seen (another user's
        // process, e.g. a container proxy) still keeps the port.
        let deadline = Instant::now() + PORT_RELEASE_WAIT;
        loop {
            let new_sockets: Vec<u64> = crate::probe::tcp::listener_inodes(port)
                .into_iter()
                .filter(|i| !before.port_inodes.contains(i))
                .collect();
            if new_sockets.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                let holders: Vec<u32> = crate::probe::tcp::listener_pids(port)
                    .into_iter()
                    .filter(|p| !held_before.contains(p))
                    .collect();
                let who = if holders.is_empty() {
                    "a process firedup cannot see (another user's?)".to_string()
                } else {
                    holders
                        .iter()
                        .map(|p| format!("pid {p} ({})", process::cmdline(*p)))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                check
                    .problems
                    .push(format!("port {port} still held by {who}"));
                break;
            }
            std::thread::sleep(RECHECK);
        }
    }
    let deadline = Instant::now() + GPU_RELEASE_WAIT;
    loop {
        match crate::probe::gpu::gpu_pids() {
            Ok(None) => break,
            Ok(Some(apps)) => {
                // The tree's own processes, and any GPU process born during the cell that is
                // still alive (it escaped the tree but is the cell's).
                let left: Vec<(u32, u64)> = apps
                    .iter()
                    .filter(|(p, _)| {
                        pids.contains(p)
                            || before
                                .gpu_pids
                                .as_ref()
                                .is_some_and(|b| !b.contains(p) && process::is_alive(*p, None))
                    })
                    .map(|(p, mib)| (*p, mib.unwrap_or(0)))
                    .collect();
                let mib: u64 = left.iter().map(|(_, m)| m).sum();
                check.gpu_after_mib = Some(mib);
                if left.is_empty() {
                    break;
                }
                if Instant::now() >= deadline {
                    let who: Vec<String> = left
                        .iter()
                        .map(|(p, m)| {
                            let alive = if process::is_alive(*p, None) {
                                process::cmdline(*p)
                            } else {
                                "exited".into()
                            };
                            format!("pid {p} ({alive}) {m} MiB")
                        })
                        .collect();
                    check.problems.push(format!(
                        "{mib} MiB of GPU memory still held by the cell's processes: {}",
                        who.join(", ")
                    ));
                    break;
                }
            }
            Err(e) => {
                check
                    .problems
                    .push(format!("GPU release cannot be verified: {e}"));
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    check.clean = check.problems.is_empty();
    check.took_s = began.elapsed().as_secs_f64();
    check
}
