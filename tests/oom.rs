//! `oom_killed` for real: a memory-limited cgroup, a process that allocates past the limit, and the
//! kernel OOM killer. Skipped (with a message) where this machine's cgroups cannot be written.

mod common;
use common::Env;

/// Creates a child memory cgroup limited to `limit` bytes; returns the path of its `cgroup.procs`.
fn limited_cgroup(name: &str, limit: u64) -> Option<std::path::PathBuf> {
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

#[test]
fn sigkill_by_the_oom_killer_is_oom_killed() {
    let Some(procs) = limited_cgroup(&format!("firedup-test-{}", std::process::id()), 200 << 20)
    else {
        eprintln!("skipped: no writable memory cgroup on this machine");
        return;
    };
    let env = Env::new();
    let firedup = env!("CARGO_BIN_EXE_firedup");
    // firedup itself joins the cgroup, so the command starts inside it and the baseline is known.
    let script = format!(
        "echo $$ > {} && exec {firedup} run --json --until exit -- python3 -c 'b = bytearray(1 << 30)'",
        procs.display()
    );
    let r = std::process::Command::new("sh")
        .args(["-c", &script])
        .env("FIREDUP_STATE_DIR", env.state.path())
        .env("FIREDUP_PLAIN", "1")
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap_or_default();
    let _ = std::fs::remove_dir(procs.parent().unwrap());
    if std::fs::read_to_string(&procs).is_err() && json.is_null() {
        eprintln!(
            "skipped: could not join the cgroup: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        return;
    }
    assert_eq!(
        r.status.code(),
        Some(4),
        "{json}\n{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(json["verdict"], "killed");
    assert_eq!(json["signature"], "oom_killed", "{json}");
    assert_eq!(json["exit"]["signal"], 9);
}
