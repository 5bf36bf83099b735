//! Verified teardown between matrix cells: stop the cell's process tree, then prove the machine
//! is clean before the next cell starts on it:
//! - no process of the tree is left;
//! - the cell's port has no listener that was not there before the cell started;
//! - the GPU memory those processes held is released (where nvidia-smi exists; a failing
//!   nvidia-smi means it cannot be verified).
//!
//! Each check is bounded; what cannot be proven clean is a named problem, and the runner does not
//! start another cell on a dirty machine unless told to.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::engine::Target;
use crate::process;
use crate::stop::stop_tree;

/// How long a port may stay held after the tree is gone (a socket closing, a slow exit).
const PORT_RELEASE_WAIT: Duration = Duration::from_secs(5);
/// How long the driver may take to release a dead process's GPU memory.
const GPU_RELEASE_WAIT: Duration = Duration::from_secs(10);
const RECHECK: Duration = Duration::from_millis(100);

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

/// Stops `target`'s tree and verifies the machine is clean. `port` is the cell's listen port and
/// `held_before` the pids that listened on it before the cell started (not the cell's doing).
pub fn teardown(
    target: &Target,
    grace: Duration,
    port: Option<u16>,
    held_before: &[u32],
) -> TeardownCheck {
    let began = Instant::now();
    let mut check = TeardownCheck::default();
    let mut pids: Vec<u32> = target.pid.into_iter().collect();
    if let Some(pid) = target.pid {
        let report = stop_tree(pid, target.start_ticks, grace);
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
        let deadline = Instant::now() + PORT_RELEASE_WAIT;
        loop {
            let holders: Vec<u32> = crate::probe::tcp::listener_pids(port)
                .into_iter()
                .filter(|p| !held_before.contains(p))
                .collect();
            if holders.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                let who: Vec<String> = holders
                    .iter()
                    .map(|p| format!("pid {p} ({})", process::cmdline(*p)))
                    .collect();
                check
                    .problems
                    .push(format!("port {port} still held by {}", who.join(", ")));
                break;
            }
            std::thread::sleep(RECHECK);
        }
    }
    let deadline = Instant::now() + GPU_RELEASE_WAIT;
    loop {
        match crate::probe::gpu::tree_memory_mib(&pids) {
            Ok(None) => break,
            Ok(Some(mib)) => {
                check.gpu_after_mib = Some(mib);
                if mib == 0 {
                    break;
                }
                if Instant::now() >= deadline {
                    check.problems.push(format!(
                        "{mib} MiB of GPU memory still held by the cell's processes"
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
