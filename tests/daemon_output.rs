//! A daemon whose output is not the log: `firedup run -- redis-server --daemonize yes` (the README
//! names it). Daemonized, redis sends its stdout and stderr to /dev/null, so its ready line can
//! never reach the log; firedup used to wait out the profile's 2-minute stall window, report
//! `stalled` and stop the healthy daemon (issue 23, item 7). The launcher's exit 0 leaves the
//! daemon followed, and its port (owned by a process of the run) decides.
//!
//! A real redis-server (installed by `.ci/run`), on a free port, its working directory a
//! temporary one; killed by the test if firedup's stop leaves it.

use crate::common;
use common::{Env, alive, free_port};

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(180);

/// Kills the daemon whose pid `pidfile` holds, if it is still there, when dropped.
struct DaemonGuard(std::path::PathBuf);

impl DaemonGuard {
    fn pid(&self) -> Option<u32> {
        std::fs::read_to_string(&self.0)
            .ok()
            .and_then(|t| t.trim().parse().ok())
    }
}

impl Drop for DaemonGuard {
    fn drop(&mut self) {
        if let Some(p) = self.pid().filter(|p| alive(*p as u64)) {
            // SAFETY: kill(2) on the redis this test started.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
    }
}

#[test]
fn a_daemonized_redis_writing_to_dev_null_is_ready_by_its_port_and_stop_leaves_nothing() {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(found, "redis-server is not installed");
    let env = Env::new();
    let port = free_port().to_string();
    let dir = env.path("redis-dir");
    std::fs::create_dir(&dir).unwrap();
    let pidfile = dir.join("redis.pid");
    let guard = DaemonGuard(pidfile.clone());
    let out = env
        .run()
        .json()
        .arg(
            // Bounds the run before the fix (it waited out the 2-minute stall).
            "--timeout",
        )
        .arg("60s")
        .command(&[
            "redis-server",
            "--daemonize",
            "yes",
            "--port",
            &port,
            "--dir",
            dir.to_str().unwrap(),
            "--pidfile",
            pidfile.to_str().unwrap(),
            "--save",
            "",
        ])
        .bounded(BOUND)
        .output();
    let explain = format!(
        "exit {}\nstdout: {}\nstderr: {}",
        out.code, out.stdout, out.stderr
    );
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
    assert_eq!(
        (v["verdict"].as_str(), v["server_running"].as_bool()),
        (Some("ready"), Some(true)),
        "{explain}"
    );
    let reason = v["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("/dev/null") && reason.contains(&format!("port 127.0.0.1:{port}")),
        "{explain}"
    );
    let daemon = guard.pid().expect("redis wrote its pidfile");
    assert!(alive(daemon as u64), "the daemon was stopped: {explain}");
    let run_id = v["run_id"].as_str().unwrap_or("").to_string();
    let stop = env.fd("stop").arg(&run_id).bounded(BOUND).output();
    assert_eq!(stop.code, 0, "{}\n{}", stop.stdout, stop.stderr);
    assert!(stop.stdout.contains("none left"), "{}", stop.stdout);
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(daemon as u64) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !alive(daemon as u64),
        "`stop` left the redis daemon {daemon}"
    );
}
