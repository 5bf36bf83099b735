//! Stopping a server and proving it is gone: SIGTERM to its process group (and every process of its
//! tree, which may have left the group), then SIGCONT (a stopped process, `kill -STOP` or a
//! debugger's, only handles its SIGTERM once it runs again), a grace period, SIGKILL for what is
//! left, then a check that no process of the tree survives.
//!
//! [`stop_run`] also sweeps `/proc` for the run's processes ([`process::of_run`]: below its
//! supervisor, or escaped with its owner's uid and its `FIREDUP_RUN_ID`) before and after, so a
//! daemon, a double fork or a `setsid` grandchild that left the tree is stopped too, and "none
//! left" is only said once that was checked. Another user's process is never signalled for
//! carrying the run's id. The run's supervisor is not signalled: it ends by itself once
//! it has recorded the command's exit, and is waited for (bounded) before the last check.

use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process, kill_process_group};

use crate::process;

/// How a stop went.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StopReport {
    /// Processes that were running when the stop began.
    pub targeted: Vec<u32>,
    /// Whether SIGKILL was needed.
    pub escalated: bool,
    /// Processes still alive at the end, with their command lines.
    pub survivors: Vec<(u32, String)>,
    /// How long the stop took, its last check included.
    pub took: Duration,
    /// The sweep for the run's processes, when there was one.
    pub swept: Option<SweepNote>,
    /// A batch job's cancel, when the run was one: what the scheduler said and what was checked.
    #[serde(default)]
    pub job: Option<Box<JobStop>>,
}

/// How a batch job's cancel went (`scancel`, then the checks).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct JobStop {
    /// The job's id.
    pub id: String,
    /// Its state when the stop ended (`CANCELLED`, `COMPLETED`, ...; `None`: Slurm no longer
    /// knows it).
    pub state: Option<String>,
    /// The job has ended: a terminal state, or the queue no longer lists it.
    pub ended: bool,
    /// `scancel` was sent (false: the job had already ended).
    pub cancelled: bool,
    /// What was checked, in words (`squeue -j 12: not listed`, ...).
    pub checked: Vec<String>,
}

/// What the `/proc` sweep for a run's id could check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct SweepNote {
    /// Processes of the run found by the sweep that were not in the launched process's tree.
    pub escaped: usize,
    /// Processes of the run owner's uid whose environment could not be read: not checked.
    pub unreadable: usize,
}

impl StopReport {
    /// The stop in one phrase (`stopped 2 process(es) with SIGTERM in 12ms; none left ...`).
    pub fn describe(&self) -> String {
        if let Some(job) = &self.job {
            return self.describe_job(job);
        }
        let checked = match self.swept {
            Some(n) if n.unreadable > 0 => format!(
                " of those firedup can see (swept /proc for the run's processes: below its supervisor, or of its user with its FIREDUP_RUN_ID; {} of its user's processes could not be checked)",
                n.unreadable
            ),
            Some(_) => " (swept /proc for the run's processes: below its supervisor, or of its user with its FIREDUP_RUN_ID)".to_string(),
            None => String::new(),
        };
        if self.targeted.is_empty() && self.survivors.is_empty() {
            return format!("nothing left to stop{checked}");
        }
        let how = if self.escalated {
            "SIGTERM, then SIGKILL"
        } else {
            "SIGTERM"
        };
        if self.survivors.is_empty() {
            let escaped = match self.swept {
                Some(n) if n.escaped > 0 => {
                    format!(" ({} outside its process tree)", n.escaped)
                }
                _ => String::new(),
            };
            format!(
                "stopped {} process(es){escaped} with {how} in {}; none left{checked}",
                self.targeted.len(),
                crate::duration::format_duration(self.took)
            )
        } else {
            let s: Vec<String> = self
                .survivors
                .iter()
                .map(|(p, c)| format!("{p} ({c})"))
                .collect();
            format!(
                "{} process(es) survived {how}: {}",
                self.survivors.len(),
                s.join(", ")
            )
        }
    }
}

impl StopReport {
    /// Nothing of the run is left: no process survived, and a batch job has ended.
    pub fn clean(&self) -> bool {
        self.survivors.is_empty() && self.job.as_ref().is_none_or(|j| j.ended)
    }

    fn describe_job(&self, job: &JobStop) -> String {
        let state = job.state.as_deref().unwrap_or("no longer known to Slurm");
        let head = if job.ended && !job.cancelled {
            format!("Slurm job {} had already ended ({state})", job.id)
        } else if job.ended {
            format!("cancelled Slurm job {} ({state})", job.id)
        } else {
            format!("Slurm job {} did not end after scancel: {state}", job.id)
        };
        let left = if self.survivors.is_empty() {
            String::new()
        } else {
            let s: Vec<String> = self
                .survivors
                .iter()
                .map(|(p, c)| format!("{p} ({c})"))
                .collect();
            format!("; {} process(es) of it survived: {}", s.len(), s.join(", "))
        };
        format!(
            "{head} in {}{left}; checked: {}",
            crate::duration::format_duration(self.took),
            job.checked.join("; ")
        )
    }
}

/// How long the supervisor may take to record the exit and end, once the command is gone.
const SUPERVISOR_END_WAIT: Duration = Duration::from_secs(2);

/// Stops everything of run `run_id`: the tree of `pid` (as [`stop_tree`]) and every process of
/// the run ([`process::of_run`]), then checks, by the same sweep, that none is left.
pub(crate) fn stop_run(
    pid: Option<u32>,
    start_ticks: Option<u64>,
    run_id: &str,
    grace: Duration,
) -> StopReport {
    let began = Instant::now();
    let start_ticks = start_ticks.filter(|t| *t != 0);
    let leader_alive = pid.is_some_and(|p| process::is_alive(p, start_ticks));
    let mut targeted: Vec<u32> = match pid {
        Some(p) if leader_alive => process::tree(p),
        Some(p) => left_in_session(p, start_ticks),
        None => Vec::new(),
    };
    // The process group is signalled only while it is known to be the run's.
    let group = pid.filter(|_| leader_alive || !targeted.is_empty());
    let first = process::of_run(run_id);
    let mut unreadable = first.unreadable;
    let before_sweep: Vec<u32> = targeted.clone();
    targeted.extend(first.beside_supervisor());
    targeted.sort_unstable();
    targeted.dedup();
    let escaped = targeted
        .iter()
        .filter(|p| !before_sweep.contains(p))
        .count();
    let mut escalated = false;
    if !targeted.is_empty() {
        terminate(group, &targeted);
        let deadline = began + grace;
        while any_alive(&targeted) {
            if Instant::now() >= deadline {
                escalated = true;
                let mut all = targeted.clone();
                if let Some(p) = group {
                    all.extend(process::tree(p));
                }
                all.extend(process::of_run(run_id).beside_supervisor());
                signal_all(group, &all, Signal::KILL);
                let kill_deadline = Instant::now() + Duration::from_secs(5);
                while any_alive(&all) && Instant::now() < kill_deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // The supervisor ends once it has recorded the exit: give it that moment, so that the last
    // sweep below finds nothing of a run that is really gone.
    let supervisor_deadline = Instant::now() + SUPERVISOR_END_WAIT;
    while !run_id.is_empty() && Instant::now() < supervisor_deadline {
        let now = process::of_run(run_id);
        if now.pids.is_empty() || !now.beside_supervisor().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let last = process::of_run(run_id);
    unreadable = unreadable.max(last.unreadable);
    let mut left: Vec<u32> = targeted
        .iter()
        .copied()
        .filter(|p| process::is_alive(*p, None))
        .collect();
    left.extend(last.pids);
    left.sort_unstable();
    left.dedup();
    StopReport {
        targeted,
        escalated,
        survivors: left.into_iter().map(|p| (p, process::cmdline(p))).collect(),
        took: began.elapsed(),
        swept: (!run_id.is_empty()).then_some(SweepNote {
            escaped,
            unreadable,
        }),
        job: None,
    }
}

/// Stops the tree rooted at `pid` (a session/group leader started by firedup). `start_ticks`
/// guards against a reused pid: if the process is not the one launched, nothing is signalled.
pub(crate) fn stop_tree(pid: u32, start_ticks: Option<u64>, grace: Duration) -> StopReport {
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
                swept: None,
                job: None,
            };
        }
        left
    };
    terminate(Some(pid), &targeted);
    let deadline = began + grace;
    let mut escalated = false;
    while any_alive(&targeted) {
        if Instant::now() >= deadline {
            escalated = true;
            let now = process::tree(pid);
            let mut all = targeted.clone();
            all.extend(now);
            signal_all(Some(pid), &all, Signal::KILL);
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
        swept: None,
        job: None,
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

/// SIGTERM, then SIGCONT: a stopped process keeps a SIGTERM pending until it runs again, and
/// would otherwise sit out the whole grace before its SIGKILL (a running one ignores SIGCONT).
fn terminate(group: Option<u32>, pids: &[u32]) {
    signal_all(group, pids, Signal::TERM);
    signal_all(group, pids, Signal::CONT);
}

fn signal_all(group: Option<u32>, pids: &[u32], sig: Signal) {
    if let Some(p) = group.and_then(|g| Pid::from_raw(g as i32)) {
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
    fn a_stopped_tree_ends_by_its_sigterm_without_waiting_for_the_kill() {
        // Issue 15: `stop` of a SIGSTOPped server waited the whole grace, then SIGKILLed it.
        // Both ways in: the tree alone (a matrix cell's teardown) and the run (`firedup stop`).
        let by_tree = |pid, ticks| stop_tree(pid, ticks, Duration::from_secs(60));
        let by_run = |pid, ticks| stop_run(Some(pid), ticks, "", Duration::from_secs(60));
        for stop in [&by_tree as &dyn Fn(u32, Option<u64>) -> StopReport, &by_run] {
            stop_a_stopped_tree(stop);
        }
    }

    fn stop_a_stopped_tree(stop: &dyn Fn(u32, Option<u64>) -> StopReport) {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 300 & wait"]);
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
        // Bounded wait for the child, then stop the whole group.
        let mut tree = Vec::new();
        for _ in 0..500 {
            tree = process::tree(pid);
            if tree.len() == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(tree.len(), 2, "sh and its sleep: {tree:?}");
        let group = Pid::from_raw(pid as i32).unwrap();
        kill_process_group(group, Signal::STOP).unwrap();
        for _ in 0..500 {
            if tree
                .iter()
                .all(|p| process::stat(*p).is_some_and(|s| s.state == 'T'))
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let report = stop(pid, ticks);
        let _ = leader.wait();
        assert!(report.survivors.is_empty(), "{report:?}");
        assert!(
            !report.escalated,
            "the stopped tree needed SIGKILL: its SIGTERM was never handled: {report:?}"
        );
    }

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
