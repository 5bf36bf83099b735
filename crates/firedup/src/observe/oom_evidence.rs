//! Evidence that the kernel's OOM killer, not someone else, sent a process of the run its SIGKILL:
//! the watched process, or any process of its tree (a vLLM worker, an sglang scheduler, a rank).
//!
//! Two witnesses, in order: the memory cgroup's `oom_kill` counter of the watched process's own
//! cgroup rising since the watch began (for a launch, since just before it, when the process is
//! in the cgroup it was launched in or already gone: a kill in its first moments counts), and the
//! kernel log's `Killed process PID (COMM)` line. The
//! kernel log is shared by the whole machine and outlives processes, so its line counts only when
//! it is about a process *of this run*:
//! - logged after the watch began ([`KernelLogTail`]: read from where the log stood then, so an
//!   earlier victim that had the same pid is never read; the test suite kills a `python3` under a
//!   cgroup limit and a later `sh` got its pid);
//! - naming a pid of the run's tree alive at one of the last two samples (a pid gone longer ago
//!   may belong to somebody else by now), or a rank the observer saw die by SIGKILL just now (a
//!   worker born and OOM-killed between two samples);
//! - where the kernel's pids are not ours (a container: the kernel log carries the host's pids,
//!   which can equal ours and mean another process), naming a command that process was seen
//!   running too.
//!
//! The cgroup counter is the cgroup's own (`memory.events.local` on cgroup v2; v1 counts locally):
//! the hierarchical count also rises for a kill in any cgroup below, which is somebody else.
//!
//! Where the kernel log cannot be read there is no kernel evidence: a false `oom_killed` is worse
//! than a `sigkill` that does not say why.

use std::collections::HashMap;

use super::kernel_log::KernelLogTail;
use crate::process;

/// The cgroup counter a watch compares with: `now` (the watched process's cgroup, read as the
/// watch begins), or the count read before the launch where the process is in that same cgroup
/// (a kill between the launch and the watch counts) or already gone (killed in its first
/// moments, in the cgroup it was launched in).
fn cgroup_baseline(
    now: Option<(String, u64)>,
    before: Option<(String, u64)>,
) -> Option<(String, u64)> {
    match (now, before) {
        (Some((path, count)), Some((launched_in, earlier))) if path == launched_in => {
            Some((path, count.min(earlier)))
        }
        (Some(now), _) => Some(now),
        (None, before) => before,
    }
}

/// The processes seen at one sample, each with the command names it was seen with (a process may
/// exec another).
type Seen = HashMap<u32, Vec<String>>;

/// What is known about one watched run to recognise an OOM kill of its processes.
#[derive(Debug)]
pub(crate) struct OomWitness {
    /// The memory cgroup's counter file and its count when the watch began.
    cgroup_baseline: Option<(String, u64)>,
    /// The kernel log from when the watch began.
    kernel_log: Option<KernelLogTail>,
    /// The kernel's pids are this process's (the initial pid namespace: no container between).
    kernel_pids_are_ours: bool,
    /// The kernel's OOM-kill lines logged since then.
    kills: Vec<String>,
    /// The run's processes alive at the last sample.
    current: Seen,
    /// Those alive at the sample before, gone at the last (their kill may be read only now).
    earlier: Seen,
    /// Evidence was handed on already: once is enough.
    told: bool,
}

impl OomWitness {
    /// Takes the baseline of the run whose first process is `pid` as the watch begins; `before`:
    /// the counter of the cgroup it was launched in, read just before the launch.
    pub(crate) fn new(pid: Option<u32>, before: Option<(String, u64)>) -> OomWitness {
        let mut w = OomWitness {
            cgroup_baseline: cgroup_baseline(pid.and_then(process::cgroup_oom_kills), before),
            kernel_log: pid.and_then(|_| KernelLogTail::open()),
            kernel_pids_are_ours: in_initial_pid_namespace(),
            kills: Vec::new(),
            current: Seen::new(),
            earlier: Seen::new(),
            told: false,
        };
        let first: Vec<u32> = pid.into_iter().collect();
        w.sample(&first);
        w
    }

    /// Notes the run's processes (`tree`, just read) with their command names, and keeps the
    /// kernel's OOM-kill lines logged since the last look (the kernel log is a ring: read often,
    /// nothing is lost to it).
    pub(crate) fn sample(&mut self, tree: &[u32]) {
        self.read_kernel_log();
        let mut current = Seen::with_capacity(tree.len());
        for &pid in tree {
            let mut comms = self.current.remove(&pid).unwrap_or_default();
            if let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) {
                let comm = comm.trim_end_matches('\n').to_string();
                if !comm.is_empty() && !comms.contains(&comm) {
                    comms.push(comm);
                }
            }
            current.insert(pid, comms);
        }
        // What is left of the last sample is gone now.
        self.earlier = std::mem::replace(&mut self.current, current);
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

    /// A process of the run (`pid`, a rank whose pidfd the observer held) died by SIGKILL: a
    /// kernel line naming it counts, whether or not a sample saw it. Only where the kernel's pids
    /// are ours: in a container its pid may be another process's on the host (the cgroup's
    /// counter still witnesses there).
    pub(crate) fn killed(&mut self, pid: u32) {
        if self.kernel_pids_are_ours {
            self.current.entry(pid).or_default();
        }
    }

    /// Whether the kernel logged, since the watch began, that its OOM killer killed `pid` (a
    /// rank of the run, just died, whose status was lost): then it died by SIGKILL. Only where
    /// the kernel's pids are ours.
    pub(crate) fn kernel_killed(&mut self, pid: u32) -> bool {
        self.read_kernel_log();
        self.kernel_pids_are_ours
            && self
                .kills
                .iter()
                .any(|k| killed_process(k).is_some_and(|(p, _)| p == pid))
    }

    /// New evidence, in words, that the OOM killer killed a process of the run since the watch
    /// began; `None` when nothing shows it, or once it was told.
    fn news(&mut self) -> Option<String> {
        if self.told {
            return None;
        }
        let found = self.cgroup_count().or_else(|| {
            oom_kill_line(
                &self.kills,
                &[&self.current, &self.earlier],
                self.kernel_pids_are_ours,
            )
            .map(str::to_string)
        });
        self.told = found.is_some();
        found
    }

    /// The evidence that the OOM killer killed a process of the run, read now (the kernel log
    /// first, then the cgroup's counter), unless it was told already: at every look of the
    /// observer, so a rank's SIGKILL and the watched process's exit find it there.
    pub(crate) fn evidence(&mut self) -> Option<String> {
        self.read_kernel_log();
        self.news()
    }

    fn cgroup_count(&self) -> Option<String> {
        let (path, before) = self.cgroup_baseline.as_ref()?;
        let after = process::cgroup_oom_kills_at(path)?;
        (after > *before).then(|| format!("{path} counted {} OOM kill(s)", after - before))
    }
}

/// Whether this process is in the initial pid namespace, where the kernel log's pids are ours
/// (its inode number is fixed: `PROC_PID_INIT_INO`).
fn in_initial_pid_namespace() -> bool {
    std::fs::read_link("/proc/self/ns/pid").is_ok_and(|l| l.as_os_str() == "pid:[4026531836]")
}

/// The newest of the kernel's `messages` saying the OOM killer killed one of the run's processes
/// (`run`, the samples that count). Where the kernel's pids are not ours (`pids_are_ours` false),
/// the command the line names must be one the process was seen with, when any was seen.
fn oom_kill_line<'a>(
    messages: &'a [String],
    run: &[&Seen],
    pids_are_ours: bool,
) -> Option<&'a str> {
    messages.iter().rev().find_map(|text| {
        let (pid, comm) = killed_process(text)?;
        let comms = run.iter().find_map(|seen| seen.get(&pid))?;
        let named = pids_are_ours || comms.is_empty() || comms.iter().any(|c| c == comm);
        named.then_some(text.as_str())
    })
}

/// The pid and command of a kernel `Killed process PID (COMM)` line.
fn killed_process(text: &str) -> Option<(u32, &str)> {
    let rest = &text[text.find("Killed process ")? + "Killed process ".len()..];
    let (pid, rest) = rest.split_once(" (")?;
    Some((pid.parse().ok()?, &rest[..rest.find(')')?]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KILL_14242: &str = "Memory cgroup out of memory: Killed process 14242 (python3) total-vm:1065148kB, anon-rss:198528kB, file-rss:6608kB, shmem-rss:0kB, UID:0 pgtables:452kB oom_score_adj:0";

    fn seen(entries: &[(u32, &[&str])]) -> Seen {
        entries
            .iter()
            .map(|(pid, comms)| (*pid, comms.iter().map(|c| c.to_string()).collect()))
            .collect()
    }

    #[test]
    fn a_kernel_oom_line_counts_only_for_a_process_of_the_run() {
        let none: &[&str] = &[];
        let cases: &[(&str, Seen, bool, bool)] = &[
            // (why, the run's processes seen, the kernel's pids are ours, counts)
            (
                "its pid, its name",
                seen(&[(14242, &["python3"])]),
                false,
                true,
            ),
            (
                "a name it exec'd from",
                seen(&[(14242, &["sh", "python3"])]),
                false,
                true,
            ),
            ("no name seen", seen(&[(14242, none)]), false, true),
            (
                "a worker of the run",
                seen(&[(1, &["sh"]), (14242, &["python3"])]),
                false,
                true,
            ),
            (
                "another name, in a container",
                seen(&[(14242, &["sh"])]),
                false,
                false,
            ),
            (
                "exec'd after the last look, no container",
                seen(&[(14242, &["sh"])]),
                true,
                true,
            ),
            (
                "not a process of the run",
                seen(&[(1424, &["python3"])]),
                true,
                false,
            ),
            (
                "a pid that the victim's starts with",
                seen(&[(142, none)]),
                true,
                false,
            ),
            ("no process seen", Seen::new(), true, false),
        ];
        let log = vec![KILL_14242.to_string()];
        for (why, run, ours, counts) in cases {
            let got = oom_kill_line(&log, &[run], *ours);
            assert_eq!(got.is_some(), *counts, "{why}: {got:?}");
        }
    }

    #[test]
    fn the_newest_matching_line_wins_and_a_process_gone_since_the_sample_before_counts() {
        let log: Vec<String> = [
            "Out of memory: Killed process 7 (redis-server) total-vm:1kB",
            KILL_14242,
            "Out of memory: Killed process 14242 (python3) total-vm:2kB",
        ]
        .map(str::to_string)
        .to_vec();
        let now = seen(&[(1, &["sh"])]);
        let before = seen(&[(14242, &["python3"])]);
        let got = oom_kill_line(&log, &[&now, &before], false).unwrap();
        assert!(got.ends_with("total-vm:2kB"), "{got}");
        assert_eq!(oom_kill_line(&[], &[&before], true), None);
    }

    /// A cgroup counter file (v1's `memory.oom_control`) reading `count`.
    fn counter(path: &std::path::Path, count: u64) {
        let text = format!("oom_kill_disable 0\nunder_oom 0\noom_kill {count}\n");
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn the_cgroup_baseline_is_the_launchs_where_the_process_stayed_in_its_cgroup() {
        let at = |path: &str, count: u64| Some((path.to_string(), count));
        let cases = [
            // Read as the watch began, nothing before: that count.
            (at("/cg/a", 2), None, at("/cg/a", 2)),
            // Killed between the launch and the watch: the count before the launch.
            (at("/cg/a", 3), at("/cg/a", 2), at("/cg/a", 2)),
            // Moved to another cgroup: its own count as the watch began.
            (at("/cg/b", 7), at("/cg/a", 2), at("/cg/b", 7)),
            // Gone before the watch began: the cgroup it was launched in.
            (None, at("/cg/a", 2), at("/cg/a", 2)),
            (None, None, None),
        ];
        for (now, before, want) in cases {
            assert_eq!(
                cgroup_baseline(now.clone(), before.clone()),
                want,
                "{now:?} {before:?}"
            );
        }
    }

    #[test]
    fn the_cgroup_counter_rising_is_evidence_at_the_next_look_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.oom_control");
        counter(&file, 3);
        let mut w = OomWitness::new(None, None);
        let path = file.display().to_string();
        w.cgroup_baseline = Some((path.clone(), 3));
        assert_eq!(w.evidence(), None, "no kill since the watch began");
        counter(&file, 4);
        assert_eq!(w.evidence(), Some(format!("{path} counted 1 OOM kill(s)")));
        counter(&file, 5);
        assert_eq!(w.evidence(), None, "told once");
    }

    #[test]
    fn a_rank_killed_between_samples_counts_for_the_kernel_line_where_pids_are_ours() {
        let line =
            "Memory cgroup out of memory: Killed process 25611 (VLLM::Worker) total-vm:9159052kB";
        for (pids_are_ours, counts) in [(true, true), (false, false)] {
            let mut w = OomWitness::new(None, None);
            w.kernel_pids_are_ours = pids_are_ours;
            w.kills.push(line.to_string());
            assert_eq!(w.news(), None, "no sample saw 25611");
            w.killed(25611);
            assert_eq!(w.news().is_some(), counts, "pids ours: {pids_are_ours}");
        }
    }

    #[test]
    fn a_rank_whose_status_was_lost_died_by_sigkill_where_the_kernel_names_its_pid() {
        let mut w = OomWitness::new(None, None);
        w.kills.push(
            "Memory cgroup out of memory: Killed process 11761 (VLLM::Worker) total-vm:1kB".into(),
        );
        for (pid, pids_are_ours, killed) in [
            (11761, true, true),
            (1176, true, false),
            (11761, false, false),
        ] {
            w.kernel_pids_are_ours = pids_are_ours;
            assert_eq!(w.kernel_killed(pid), killed, "{pid}, ours: {pids_are_ours}");
        }
    }

    #[test]
    fn a_witness_tells_once() {
        let mut w = OomWitness::new(Some(std::process::id()), None);
        w.kills.push(format!(
            "Out of memory: Killed process {} (x) total-vm:1kB",
            std::process::id()
        ));
        w.kernel_pids_are_ours = true;
        assert!(w.news().is_some());
        assert_eq!(w.news(), None);
        assert_eq!(w.evidence(), None);
    }
}
