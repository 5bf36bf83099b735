//! Evidence that the kernel's OOM killer, not someone else, sent a watched process its SIGKILL.
//!
//! Two witnesses, in order: the memory cgroup's `oom_kill` counter rising since the watch began,
//! and the kernel log's `Killed process PID (COMM)` line. The kernel log is shared by the whole
//! machine and outlives processes, so its line counts only when it is about *this* process:
//! - written after the process started (a pid is reused: an earlier victim with the same number
//!   is somebody else; the test suite kills a `python3` under a cgroup limit and a later `sh`
//!   got its pid);
//! - naming a command the process was seen running (in a container the kernel log carries the
//!   host's pids, which can equal ours and mean another process).
//!
//! Without a timestamp on the kernel line (printk time off) nothing can be checked: no evidence,
//! because a false `oom_killed` is worse than a `sigkill` that does not say why.

use crate::process;

/// What is known about one watched process to recognise its OOM kill.
#[derive(Debug, Clone)]
pub(crate) struct OomWitness {
    pid: Option<u32>,
    /// The memory cgroup's counter file and its count when the watch began.
    cgroup_baseline: Option<(String, u64)>,
    /// When the process started, on the kernel log's clock (seconds of CLOCK_MONOTONIC).
    started_s: Option<f64>,
    /// The command names (`/proc/PID/comm`) the process was seen with; it may exec.
    comms: Vec<String>,
}

impl OomWitness {
    /// Takes the baseline of the process `pid` as the watch begins.
    pub(crate) fn new(pid: Option<u32>) -> OomWitness {
        let mut w = OomWitness {
            pid,
            cgroup_baseline: pid.and_then(process::cgroup_oom_kills),
            started_s: pid.and_then(started_on_monotonic_clock),
            comms: Vec::new(),
        };
        w.sample();
        w
    }

    /// Notes the process's current command name (called while it runs: it may exec another).
    pub(crate) fn sample(&mut self) {
        let Some(pid) = self.pid else { return };
        if let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) {
            let comm = comm.trim_end_matches('\n').to_string();
            if !comm.is_empty() && !self.comms.contains(&comm) {
                self.comms.push(comm);
            }
        }
    }

    /// The evidence, in words, that the process's SIGKILL came from the OOM killer; `None` when
    /// nothing shows it.
    pub(crate) fn evidence(&self) -> Option<String> {
        if let Some((path, before)) = &self.cgroup_baseline {
            if let Some(after) = process::cgroup_oom_kills_at(path) {
                if after > *before {
                    return Some(format!("{path} counted {} OOM kill(s)", after - before));
                }
            }
        }
        let pid = self.pid?;
        let started_s = self.started_s?;
        let out = std::process::Command::new("dmesg").output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        kernel_oom_line(&text, pid, started_s, &self.comms).map(str::to_string)
    }
}

/// The start of `pid` in seconds of CLOCK_MONOTONIC (the kernel log's clock): now, less the
/// process's age. The age comes from `/proc/PID/stat` and `/proc/uptime`, both on the boot clock,
/// so it is exact whatever the two clocks differ by.
fn started_on_monotonic_clock(pid: u32) -> Option<f64> {
    let st = process::stat(pid)?;
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    // SAFETY: sysconf with a valid name.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as f64 } else { 100.0 };
    let age = (uptime - st.start_ticks as f64 / hz).max(0.0);
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    Some(now.tv_sec as f64 + now.tv_nsec as f64 / 1e9 - age)
}

/// The start time's resolution (a clock tick) and rounding, as slack before the start.
const START_SLACK_S: f64 = 0.05;

/// The newest kernel log line (`dmesg` output, `[  SECONDS] text`) that says the OOM killer killed
/// `pid`, written after `started_s` and naming one of `comms` (any name when none was seen).
pub(crate) fn kernel_oom_line<'a>(
    dmesg: &'a str,
    pid: u32,
    started_s: f64,
    comms: &[String],
) -> Option<&'a str> {
    let needle = format!("Killed process {pid} (");
    dmesg.lines().rev().find_map(|line| {
        let line = line.trim();
        let (seconds, text) = timestamped(line)?;
        if seconds + START_SLACK_S < started_s {
            return None;
        }
        let at = text.find(&needle)?;
        let rest = &text[at + needle.len()..];
        let comm = &rest[..rest.find(')')?];
        (comms.is_empty() || comms.iter().any(|c| c == comm)).then_some(text)
    })
}

/// Splits `[  123.456789] text` into its seconds and its text.
fn timestamped(line: &str) -> Option<(f64, &str)> {
    let rest = line.strip_prefix('[')?;
    let close = rest.find(']')?;
    let seconds = rest[..close].trim().parse().ok()?;
    Some((seconds, rest[close + 1..].trim_start()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KILL_14242: &str = "[  812.345678] Memory cgroup out of memory: Killed process 14242 (python3) total-vm:1065148kB, anon-rss:198528kB, file-rss:6608kB, shmem-rss:0kB, UID:0 pgtables:452kB oom_score_adj:0";

    #[test]
    fn a_kernel_oom_line_counts_only_for_this_process() {
        let comms = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases: &[(&str, u32, f64, Vec<String>, bool)] = &[
            // (why, pid, started_s, comms seen, counts)
            (
                "after the start, its name",
                14242,
                800.0,
                comms(&["python3"]),
                true,
            ),
            (
                "a name it exec'd from",
                14242,
                800.0,
                comms(&["sh", "python3"]),
                true,
            ),
            ("no name seen: time alone", 14242, 800.0, vec![], true),
            (
                "within a tick of the start",
                14242,
                812.37,
                comms(&["python3"]),
                true,
            ),
            (
                "an earlier victim with a reused pid",
                14242,
                900.0,
                comms(&["python3"]),
                false,
            ),
            (
                "another command with the same pid",
                14242,
                800.0,
                comms(&["sh"]),
                false,
            ),
            ("another pid", 1424, 800.0, comms(&["python3"]), false),
        ];
        for (why, pid, started, seen, counts) in cases {
            let got = kernel_oom_line(KILL_14242, *pid, *started, seen);
            assert_eq!(got.is_some(), *counts, "{why}: {got:?}");
        }
    }

    #[test]
    fn the_newest_matching_line_wins_and_untimed_lines_never_count() {
        let log = format!(
            "[  100.000000] Out of memory: Killed process 7 (redis-server) total-vm:1kB\n\
             {KILL_14242}\n\
             [  950.000000] Out of memory: Killed process 14242 (python3) total-vm:2kB\n"
        );
        let got = kernel_oom_line(&log, 14242, 800.0, &[]).unwrap();
        assert!(got.ends_with("total-vm:2kB"), "{got}");
        assert_eq!(got.find('['), None, "the timestamp is taken off: {got}");
        let untimed = "Out of memory: Killed process 14242 (python3) total-vm:2kB";
        assert_eq!(kernel_oom_line(untimed, 14242, 0.0, &[]), None);
    }
}
