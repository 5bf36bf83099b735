//! Inspecting processes directly, by pid: liveness, identity (start time, against pid reuse), the
//! process tree's CPU time and bytes read, and an exit notification through a pidfd that works for a
//! process that is not our child.

use std::collections::HashSet;
use std::fs;
use std::os::fd::AsFd;
use std::time::Duration;

pub mod ending;
pub mod interpreter_helper;
pub mod membership;
mod run_sweep;

pub use run_sweep::{RunSweep, is_of_run, of_run};

/// Fields of `/proc/PID/stat` that firedup uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Parent pid (field 4).
    pub ppid: u32,
    /// Process group id (field 5); a launched command leads its own group.
    pub pgrp: u32,
    /// Session id (field 6); a launched command leads its own session.
    pub session: u32,
    /// utime + stime + cutime + cstime, in clock ticks.
    pub cpu_ticks: u64,
    /// Start time after boot, in clock ticks: with the pid, identifies one process.
    pub start_ticks: u64,
    /// `Z` (zombie) or `X` (dead) processes are gone for our purposes.
    pub state: char,
}

/// Reads `/proc/PID/stat`; `None` when the process is gone or the file does not parse.
pub fn stat(pid: u32) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Parses `/proc/PID/stat`; the command name may contain spaces and parentheses.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state(3) ppid(4) pgrp(5) session(6) ... utime(14) stime(15) cutime(16) cstime(17) ... starttime(22)
    let n = |i: usize| -> Option<u64> { f.get(i - 3)?.parse().ok() };
    Some(ProcStat {
        state: f.first()?.chars().next()?,
        ppid: n(4)? as u32,
        pgrp: n(5)? as u32,
        session: n(6)? as u32,
        cpu_ticks: n(14)? + n(15)? + n(16)? + n(17)?,
        start_ticks: n(22)?,
    })
}

/// Whether `pid` is a live (not zombie) process, and, when `start_ticks` is given, the same one.
pub fn is_alive(pid: u32, start_ticks: Option<u64>) -> bool {
    match stat(pid) {
        Some(s) => {
            s.state != 'Z' && s.state != 'X' && start_ticks.is_none_or(|t| t == s.start_ticks)
        }
        None => false,
    }
}

fn read_bytes(pid: u32) -> u64 {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/io")) else {
        return 0;
    };
    text.lines()
        .find_map(|l| l.strip_prefix("rchar:").and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0)
}

/// All live processes, as (pid, stat).
pub fn all_processes() -> Vec<(u32, ProcStat)> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .collect()
}

/// The pids of `root` and every descendant, plus every process in `root`'s session (a grandchild
/// that re-parented to init but kept the session is still part of the server, also after `root`
/// itself has exited).
pub fn tree(root: u32) -> Vec<u32> {
    let procs = all_processes();
    let mut members: HashSet<u32> = HashSet::new();
    members.insert(root);
    // Once the root has exited and been reaped, its session lives on in what it left behind (a
    // pid is not reused while it is a live process's session id).
    let root_session = procs
        .iter()
        .find(|(p, _)| *p == root)
        .map_or(Some(root), |(_, s)| Some(s.session));
    loop {
        let before = members.len();
        for (pid, s) in &procs {
            if members.contains(&s.ppid) || (Some(s.session) == root_session && s.session == root) {
                members.insert(*pid);
            }
        }
        if members.len() == before {
            break;
        }
    }
    let alive: HashSet<u32> = procs
        .iter()
        .filter(|(_, s)| s.state != 'Z')
        .map(|(p, _)| *p)
        .collect();
    let mut v: Vec<u32> = members.into_iter().filter(|p| alive.contains(p)).collect();
    v.sort();
    v
}

/// Cumulative CPU ticks and bytes read by the process tree under `root`.
pub fn tree_usage(root: u32) -> (u64, u64) {
    usage_of(&tree(root))
}

/// Cumulative CPU ticks and bytes read by the processes `pids` (a tree read by [`tree`]).
pub fn usage_of(pids: &[u32]) -> (u64, u64) {
    let mut cpu = 0;
    let mut read = 0;
    for &pid in pids {
        if let Some(s) = stat(pid) {
            cpu += s.cpu_ticks;
        }
        read += read_bytes(pid);
    }
    (cpu, read)
}

/// Blocks until `pid` exits (pidfd; works for processes that are not our children), or until
/// `stop` returns true (checked every `check` interval). Returns false when the pidfd could not be
/// opened because the process was already gone.
pub fn wait_for_exit(pid: u32, check: Duration, stop: &dyn Fn() -> bool) -> bool {
    let Some(rpid) = rustix::process::Pid::from_raw(pid as i32) else {
        return false;
    };
    let fd = match rustix::process::pidfd_open(rpid, rustix::process::PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(_) => {
            // No pidfd (old kernel or already gone): fall back to a liveness poll.
            while is_alive(pid, None) {
                if stop() {
                    return true;
                }
                std::thread::sleep(check);
            }
            return true;
        }
    };
    let timeout = rustix::event::Timespec {
        tv_sec: check.as_secs() as i64,
        tv_nsec: check.subsec_nanos() as i64,
    };
    loop {
        let borrowed = fd.as_fd();
        let mut fds = [rustix::event::PollFd::new(
            &borrowed,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(n) if n > 0 => return true,
            Ok(_) | Err(rustix::io::Errno::INTR) => {
                if stop() {
                    return true;
                }
            }
            Err(_) => return true,
        }
    }
}

/// Processes that hold `path` open for writing (found through `/proc/PID/fd`), oldest first: when
/// attaching by log alone, the writer is the process to watch.
pub fn writers_of(path: &std::path::Path) -> Vec<u32> {
    let Ok(target) = fs::canonicalize(path) else {
        return Vec::new();
    };
    let me = std::process::id();
    let mut found: Vec<(u64, u32)> = Vec::new();
    for (pid, st) in all_processes() {
        if pid == me || st.state == 'Z' {
            continue;
        }
        if !write_fds(pid, |_, link| link == target).is_empty() {
            found.push((st.start_ticks, pid));
        }
    }
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// [`writers_of`] by identity (device, inode): the file under any of its names (a hard link).
pub fn writers_of_file(dev: u64, ino: u64) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let me = std::process::id();
    let mut found: Vec<(u64, u32)> = Vec::new();
    for (pid, st) in all_processes() {
        if pid == me || st.state == 'Z' {
            continue;
        }
        // Only descriptors on a path (not `pipe:[..]`, `socket:[..]`) are stat'ed.
        let same = |fd: &std::path::Path, link: &std::path::Path| {
            link.is_absolute() && fs::metadata(fd).is_ok_and(|m| (m.dev(), m.ino()) == (dev, ino))
        };
        if !write_fds(pid, same).is_empty() {
            found.push((st.start_ticks, pid));
        }
    }
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// Where `pid` writes in `path`: the file position of each descriptor it holds open for writing
/// on it (`/proc/PID/fdinfo/N`'s `pos`); empty when it holds none or cannot be read.
pub fn write_positions(pid: u32, path: &std::path::Path) -> Vec<u64> {
    let Ok(target) = fs::canonicalize(path) else {
        return Vec::new();
    };
    write_fds(pid, |_, link| link == target)
        .into_iter()
        .map(|f| f.pos)
        .collect()
}

/// One descriptor's `/proc/PID/fdinfo` facts.
#[derive(Debug, Clone, Copy)]
struct FdInfo {
    pos: u64,
}

/// The descriptors of `pid` open for writing on a file `matches` (its `/proc/PID/fd/N` path and
/// where that link points) accepts.
fn write_fds(
    pid: u32,
    matches: impl Fn(&std::path::Path, &std::path::Path) -> bool,
) -> Vec<FdInfo> {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for fd in fds.filter_map(|e| e.ok()) {
        let path = fd.path();
        if !fs::read_link(&path).is_ok_and(|l| matches(&path, &l)) {
            continue;
        }
        let Ok(info) = fs::read_to_string(format!(
            "/proc/{pid}/fdinfo/{}",
            fd.file_name().to_string_lossy()
        )) else {
            continue;
        };
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
        };
        let flags = field("flags:")
            .and_then(|v| u32::from_str_radix(&v, 8).ok())
            .unwrap_or(0);
        if flags & 0o3 != 0 {
            out.push(FdInfo {
                pos: field("pos:").and_then(|v| v.parse().ok()).unwrap_or(0),
            });
        }
    }
    out
}

/// The regular file `pid` writes its output to (its descriptor 1, `/proc/PID/fd/1`), for a watch
/// given a process and no log. `Err`: one sentence saying why it cannot be used and what to do.
pub fn output_file(pid: u32) -> Result<std::path::PathBuf, String> {
    let fd = format!("/proc/{pid}/fd/1");
    let give = "give its log with --log PATH";
    let target = fs::read_link(&fd).map_err(|e| {
        format!("cannot read where process {pid} writes its output ({fd}: {e}): {give}")
    })?;
    let meta = fs::metadata(&fd).map_err(|e| {
        format!(
            "process {pid}'s output ({}) cannot be read ({e}): {give}",
            target.display()
        )
    })?;
    if !meta.is_file() {
        return Err(format!(
            "process {pid} writes its output to {}, which is not a regular file: {give}",
            target.display()
        ));
    }
    if target.to_string_lossy().ends_with(" (deleted)") {
        return Err(format!(
            "process {pid} writes its output to {}, which was removed: {give}",
            target.display()
        ));
    }
    Ok(target)
}

/// Whether `pid` is a firedup supervisor (`firedup __supervise RUN_DIR`): it carries its run's
/// id, and ends by itself once it has recorded the command's exit.
pub fn is_supervisor(pid: u32) -> bool {
    fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|b| b.split(|c| *c == 0).nth(1) == Some(b"__supervise".as_slice()))
}

/// The arguments of `pid`, as it was started (empty when unreadable).
pub fn argv(pid: u32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The command line of a process, for reports: its arguments joined by spaces (empty when
/// unreadable).
pub fn cmdline(pid: u32) -> String {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// The OOM-kill counter file of the memory cgroup holding `pid` (cgroup v2 `memory.events.local`,
/// else `memory.events`, or v1 `memory.oom_control`), with its current count.
///
/// `None` for a process that has ended: the kernel shows a zombie in the root cgroups, whose v1
/// counter never rises (a kill is counted below the root), so a baseline read there would hide
/// the OOM kill that ended it (a server killed before its watch began read as plain `sigkill`).
pub fn cgroup_oom_kills(pid: u32) -> Option<(String, u64)> {
    let cg = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    // Read after the cgroup: a process not ended then was not ended when its cgroup was read.
    if stat(pid).is_none_or(|s| matches!(s.state, 'Z' | 'X')) {
        return None;
    }
    let mut candidates = Vec::new();
    for line in cg.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.is_empty() {
            // The cgroup's own count first: the hierarchical one also counts kills below it.
            candidates.push(format!("/sys/fs/cgroup{path}/memory.events.local"));
            candidates.push(format!("/sys/fs/cgroup{path}/memory.events"));
        } else if controllers.split(',').any(|c| c == "memory") {
            candidates.push(format!("/sys/fs/cgroup/memory{path}/memory.oom_control"));
        }
    }
    candidates
        .into_iter()
        .find_map(|file| Some((file.clone(), cgroup_oom_kills_at(&file)?)))
}

/// Reads the `oom_kill N` counter from a cgroup file found by [`cgroup_oom_kills`].
pub fn cgroup_oom_kills_at(file: &str) -> Option<u64> {
    let text = fs::read_to_string(file).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_process_has_no_cgroup_counter_of_its_own() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let alive = cgroup_oom_kills(pid);
        child.kill().unwrap();
        // A zombie until reaped below.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while stat(pid).is_some_and(|s| s.state != 'Z') && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(stat(pid).map(|s| s.state), Some('Z'));
        assert_eq!(cgroup_oom_kills(pid), None, "while alive: {alive:?}");
        child.wait().unwrap();
        assert_eq!(cgroup_oom_kills(pid), None);
    }

    #[test]
    fn parses_stat_with_awkward_command_names() {
        let text = "1234 (my (weird) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 7 3 1 2 20 0 1 0 98765 1000 10 18446744073709551615";
        let s = parse_stat(text).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.pgrp, 1234);
        assert_eq!(s.session, 1234);
        assert_eq!(s.cpu_ticks, 13);
        assert_eq!(s.start_ticks, 98765);
    }

    #[test]
    fn sees_itself_alive_and_a_wrong_start_time_as_not_the_same_process() {
        let me = std::process::id();
        let s = stat(me).unwrap();
        assert!(is_alive(me, Some(s.start_ticks)));
        assert!(!is_alive(me, Some(s.start_ticks + 1)));
        assert!(tree(me).contains(&me));
    }

    #[test]
    fn a_run_is_found_by_its_id_in_the_environment_and_never_includes_the_sweeper() {
        let id = format!("sweep-test-{}", std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env("FIREDUP_RUN_ID", &id)
            .spawn()
            .unwrap();
        let found = of_run(&id);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found.pids, vec![child.id()]);
        assert!(of_run("").pids.is_empty());
        assert!(!is_supervisor(std::process::id()));
    }
}
