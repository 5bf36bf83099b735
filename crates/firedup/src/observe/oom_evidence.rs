//! Evidence that the kernel's OOM killer, not someone else, sent a watched process its SIGKILL.
//!
//! Two witnesses, in order: the memory cgroup's `oom_kill` counter of the process's own cgroup
//! rising since the watch began, and the kernel log's `Killed process PID (COMM)` line. The kernel
//! log is shared by the whole machine and outlives processes, so its line counts only when it is
//! about *this* process:
//! - logged after the watch began ([`KernelLogTail`]: read from where the log stood then, so an
//!   earlier victim that had the same pid is never read; the test suite kills a `python3` under a
//!   cgroup limit and a later `sh` got its pid);
//! - naming a command the process was seen running (in a container the kernel log carries the
//!   host's pids, which can equal ours and mean another process).
//!
//! The cgroup counter is the cgroup's own (`memory.events.local` on cgroup v2): the hierarchical
//! count also rises for a kill in any cgroup below, which is somebody else.
//!
//! Where the kernel log cannot be read there is no kernel evidence: a false `oom_killed` is worse
//! than a `sigkill` that does not say why.

use super::kernel_log::KernelLogTail;
use crate::process;

/// What is known about one watched process to recognise its OOM kill.
#[derive(Debug)]
pub(crate) struct OomWitness {
    pid: Option<u32>,
    /// The memory cgroup's counter file and its count when the watch began.
    cgroup_baseline: Option<(String, u64)>,
    /// The kernel log from when the watch began.
    kernel_log: Option<KernelLogTail>,
    /// The kernel's OOM-kill lines logged since then.
    kills: Vec<String>,
    /// The command names (`/proc/PID/comm`) the process was seen with; it may exec.
    comms: Vec<String>,
}

impl OomWitness {
    /// Takes the baseline of the process `pid` as the watch begins.
    pub(crate) fn new(pid: Option<u32>) -> OomWitness {
        let mut w = OomWitness {
            pid,
            cgroup_baseline: pid.and_then(process::cgroup_oom_kills),
            kernel_log: pid.and_then(|_| KernelLogTail::open()),
            kills: Vec::new(),
            comms: Vec::new(),
        };
        w.sample();
        w
    }

    /// Notes the process's current command name (called while it runs: it may exec another) and
    /// keeps the kernel's OOM-kill lines logged since the last look (the kernel log is a ring:
    /// read often, nothing is lost to it).
    pub(crate) fn sample(&mut self) {
        let Some(pid) = self.pid else { return };
        if let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) {
            let comm = comm.trim_end_matches('\n').to_string();
            if !comm.is_empty() && !self.comms.contains(&comm) {
                self.comms.push(comm);
            }
        }
        self.read_kernel_log();
    }

    fn read_kernel_log(&mut self) {
        if let Some(log) = &mut self.kernel_log {
            let kills = &mut self.kills;
            log.read_new(&mut |message| {
                if message.contains("Killed process ") {
                    kills.push(message.to_string());
                }
            });
        }
    }

    /// The evidence, in words, that the process's SIGKILL came from the OOM killer; `None` when
    /// nothing shows it.
    pub(crate) fn evidence(&mut self) -> Option<String> {
        if let Some((path, before)) = &self.cgroup_baseline {
            if let Some(after) = process::cgroup_oom_kills_at(path) {
                if after > *before {
                    return Some(format!("{path} counted {} OOM kill(s)", after - before));
                }
            }
        }
        let pid = self.pid?;
        self.read_kernel_log();
        oom_kill_line(&self.kills, pid, &self.comms).map(str::to_string)
    }
}

/// The newest of the kernel's `messages` that says the OOM killer killed `pid`, naming one of
/// `comms` (any name when none was seen: the process ended before it could be looked at).
pub(crate) fn oom_kill_line<'a>(
    messages: &'a [String],
    pid: u32,
    comms: &[String],
) -> Option<&'a str> {
    let needle = format!("Killed process {pid} (");
    messages.iter().rev().find_map(|text| {
        let at = text.find(&needle)?;
        let rest = &text[at + needle.len()..];
        let comm = &rest[..rest.find(')')?];
        (comms.is_empty() || comms.iter().any(|c| c == comm)).then_some(text.as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KILL_14242: &str = "Memory cgroup out of memory: Killed process 14242 (python3) total-vm:1065148kB, anon-rss:198528kB, file-rss:6608kB, shmem-rss:0kB, UID:0 pgtables:452kB oom_score_adj:0";

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_kernel_oom_line_counts_only_for_this_process() {
        let cases: &[(&str, u32, Vec<String>, bool)] = &[
            // (why, pid, comms seen, counts)
            ("its pid, its name", 14242, strings(&["python3"]), true),
            (
                "a name it exec'd from",
                14242,
                strings(&["sh", "python3"]),
                true,
            ),
            ("no name seen", 14242, vec![], true),
            (
                "another command with the same pid",
                14242,
                strings(&["sh"]),
                false,
            ),
            ("another pid", 1424, strings(&["python3"]), false),
            ("a pid that the victim's starts with", 142, vec![], false),
        ];
        let log = strings(&[KILL_14242]);
        for (why, pid, seen, counts) in cases {
            let got = oom_kill_line(&log, *pid, seen);
            assert_eq!(got.is_some(), *counts, "{why}: {got:?}");
        }
    }

    #[test]
    fn the_newest_matching_line_wins() {
        let log = strings(&[
            "Out of memory: Killed process 7 (redis-server) total-vm:1kB",
            KILL_14242,
            "Out of memory: Killed process 14242 (python3) total-vm:2kB",
        ]);
        let got = oom_kill_line(&log, 14242, &[]).unwrap();
        assert!(got.ends_with("total-vm:2kB"), "{got}");
        assert_eq!(oom_kill_line(&[], 14242, &[]), None);
    }
}
