//! A memory-limited cgroup for tests of the kernel's OOM killer (cgroup v1 or v2), made under this
//! process's own cgroup; `None` where this machine's cgroups cannot be written. A command started
//! inside it, and its OOM-kill counter.

use std::path::Path;
use std::process::Command;

/// Creates a child memory cgroup limited to `limit` bytes; returns the path of its `cgroup.procs`.
pub fn limited_cgroup(name: &str, limit: u64) -> Option<std::path::PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let (dir, limit_file) = if controllers.split(',').any(|c| c == "memory") {
            (
                format!("/sys/fs/cgroup/memory{path}/{name}"),
                "memory.limit_in_bytes",
            )
        } else if controllers.is_empty() {
            (format!("/sys/fs/cgroup{path}/{name}"), "memory.max")
        } else {
            continue;
        };
        let dir = std::path::PathBuf::from(dir);
        let _ = std::fs::create_dir(&dir);
        if std::fs::write(dir.join(limit_file), limit.to_string()).is_ok() {
            return Some(dir.join("cgroup.procs"));
        }
    }
    None
}

/// `firedup` (a command that runs firedup) started inside the memory cgroup whose `cgroup.procs`
/// is `procs`: firedup joins it first, so the server and every process it starts are inside.
pub fn in_cgroup(procs: &Path, firedup: Command) -> Command {
    let mut c = Command::new("sh");
    c.args(["-c", r#"echo $$ > "$0" && exec "$@""#])
        .arg(procs)
        .arg(firedup.get_program())
        .args(firedup.get_args());
    for (key, value) in firedup.get_envs() {
        match value {
            Some(v) => c.env(key, v),
            None => c.env_remove(key),
        };
    }
    if let Some(dir) = firedup.get_current_dir() {
        c.current_dir(dir);
    }
    c
}

/// The `oom_kill` count of the v1 or v2 memory cgroup whose `cgroup.procs` is `procs`.
pub fn oom_kills(procs: &Path) -> Option<u64> {
    ["memory.oom_control", "memory.events"]
        .iter()
        .find_map(|f| {
            std::fs::read_to_string(procs.with_file_name(f))
                .ok()?
                .lines()
                .find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok())
        })
}
