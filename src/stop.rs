//! Stopping a server and proving it is gone: SIGTERM to its process group (and every process of its
//! tree, which may have left the group), a grace period, SIGKILL for what is left, then a check
//! that no process of the tree survives.

use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process, kill_process_group};

use crate::process;

/// How a stop went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopReport {
    /// Processes that were running when the stop began.
    pub targeted: Vec<u32>,
    /// Whether SIGKILL was needed.
    pub escalated: bool,
    /// Processes still alive at the end, with their command lines.
    pub survivors: Vec<(u32, String)>,
    pub took: Duration,
}

/// Stops the tree rooted at `pid` (a session/group leader started by firedup). `start_ticks`
/// guards against a reused pid: if the process is not the one launched, nothing is signalled.
pub fn stop_tree(pid: u32, start_ticks: Option<u64>, grace: Duration) -> StopReport {
    let began = Instant::now();
    if !process::is_alive(pid, start_ticks.filter(|t| *t != 0)) {
        return StopReport {
            targeted: Vec::new(),
            escalated: false,
            survivors: Vec::new(),
            took: began.elapsed(),
        };
    }
    let targeted = process::tree(pid);
    signal_all(pid, &targeted, Signal::TERM);
    let deadline = began + grace;
    let mut escalated = false;
    while any_alive(&targeted) {
        if Instant::now() >= deadline {
            escalated = true;
            let now = process::tree(pid);
            let mut all = targeted.clone();
            all.extend(now);
            signal_all(pid, &all, Signal::KILL);
            let kill_deadline = Instant::now() + Duration::from_secs(5);
            while any_alive(&all) && Instant::now() < kill_deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let survivors = targeted
        .iter()
        .filter(|p| process::is_alive(**p, None))
        .map(|p| (*p, process::cmdline(*p)))
        .collect();
    StopReport {
        targeted,
        escalated,
        survivors,
        took: began.elapsed(),
    }
}

fn signal_all(leader: u32, pids: &[u32], sig: Signal) {
    if let Some(p) = Pid::from_raw(leader as i32) {
        let _ = kill_process_group(p, sig);
    }
    for pid in pids {
        if let Some(p) = Pid::from_raw(*pid as i32) {
            let _ = kill_process(p, sig);
        }
    }
}

fn any_alive(pids: &[u32]) -> bool {
    pids.iter().any(|p| process::is_alive(*p, None))
}
