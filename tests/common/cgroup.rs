//! A memory-limited cgroup for tests of the kernel's OOM killer (cgroup v1 or v2), made under this
//! process's own cgroup; `None` where this machine's cgroups cannot be written.

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
