//! A real Slurm for the tests (tests/slurm/cluster.sh): whether one answers here, and what the
//! tests ask it and this machine about a job.

use std::process::Command;
use std::time::{Duration, Instant};

/// Whether a Slurm answers here (`SLURM_CONF` set and `sinfo` working). Without one, the test
/// says so and passes, unless `FIREDUP_TEST_REQUIRE_SLURM=1` (CI), which makes it fail.
pub fn slurm() -> bool {
    let ok = std::env::var_os("SLURM_CONF").is_some()
        && Command::new("sinfo")
            .args(["-h", "-o", "%t"])
            .output()
            .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("FIREDUP_TEST_REQUIRE_SLURM").as_deref() != Ok("1"),
            "FIREDUP_TEST_REQUIRE_SLURM=1 but no Slurm answers: start one with `bash tests/slurm/cluster.sh start DIR` and export SLURM_CONF=DIR/slurm.conf"
        );
        eprintln!(
            "skipped: no Slurm here (bash tests/slurm/cluster.sh start DIR; export SLURM_CONF=DIR/slurm.conf)"
        );
    }
    ok
}

/// This machine's short host name: the cluster's only node.
pub fn node() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    name.trim()
        .split('.')
        .next()
        .unwrap_or_default()
        .to_string()
}

pub fn sh(cmd: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("sh runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Polls `what` until it is `Some` or `bound` passes.
pub fn wait_for<T>(bound: Duration, mut what: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(v) = what() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The id of the job named `name`, once it runs.
pub fn running_job(name: &str) -> Option<String> {
    wait_for(Duration::from_secs(60), || {
        let line = sh(&format!("squeue -h -n {name} -o '%i %T'"));
        let (id, state) = line.split_once(' ')?;
        (state == "RUNNING").then(|| id.to_string())
    })
}

/// Processes on this machine carrying `FIREDUP_RUN_ID=run_id`.
pub fn processes_of(run_id: &str) -> Vec<u32> {
    let want = format!("FIREDUP_RUN_ID={run_id}");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|b| b.split(|c| *c == 0).any(|e| e == want.as_bytes()))
        })
        .filter(|pid| super::alive(u64::from(*pid)))
        .collect()
}
