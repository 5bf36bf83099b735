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
    let start_ticks = start_ticks.filter(|t| *t != 0);
    let targeted = if process::is_alive(pid, start_ticks) {
        process::tree(pid)
    } else {
        // The leader has exited; what it left behind in its session (a daemon started with `&`,
        // reparented away from the tree) is still the run's.
        let left = left_in_session(pid, start_ticks);
        if left.is_empty() {
            return StopReport {
                targeted: Vec::new(),
                escalated: false,
                survivors: Vec::new(),
                took: began.elapsed(),
            };
        }
        left
    };
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

/// Live processes of the session (or group) that `leader` created with `setsid`, once the leader
/// is gone. A pid is not reused while it is still some live process's session or group id, so
/// they are the run's, unless the leader's pid is already taken by another process (then its
/// session is gone and nothing is returned).
fn left_in_session(leader: u32, start_ticks: Option<u64>) -> Vec<u32> {
    if let Some(s) = process::stat(leader) {
        let ours = s.state == 'Z' && start_ticks.is_none_or(|t| t == s.start_ticks);
        if !ours {
            return Vec::new();
        }
    }
    process::all_processes()
        .into_iter()
        .filter(|(p, s)| {
            *p != leader
                && (s.session == leader || s.pgrp == leader)
                && s.state != 'Z'
                && start_ticks.is_none_or(|t| s.start_ticks >= t)
        })
        .map(|(p, _)| p)
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    #[test]
    fn what_an_exited_leader_left_in_its_session_is_stopped() {
        // Found by tests/faults.rs (death/parent_exits_leaving_a_daemon): the leader exits 0 and
        // its background child lived on after the verdict.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 300 & echo $!; exit 0"])
            .stdout(Stdio::piped());
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let mut leader = cmd.spawn().unwrap();
        let pid = leader.id();
        let ticks = process::stat(pid).map(|s| s.start_ticks);
        let mut line = String::new();
        BufReader::new(leader.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let daemon: u32 = line.trim().parse().unwrap();
        leader.wait().unwrap();
        assert!(process::is_alive(daemon, None));
        assert_eq!(
            process::tree(pid),
            vec![daemon],
            "the tree outlives its root"
        );
        let report = stop_tree(pid, ticks, Duration::from_secs(2));
        assert_eq!(report.targeted, vec![daemon]);
        assert!(report.survivors.is_empty(), "{report:?}");
        assert!(!process::is_alive(daemon, None));
    }
}
