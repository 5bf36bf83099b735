//! The bench step of a matrix cell: on a ready cell, run the bench command (`sh -c`, in its own
//! process group, output straight into a file next to the run's log), bounded by a timeout and
//! stoppable by Ctrl-C, then pull the named metrics out of its output.
//!
//! A bench that fails is recorded with its status and whatever metrics it printed; it never turns
//! the cell's verdict into something else.

use std::collections::BTreeMap;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use regex::Regex;
use serde::{Deserialize, Serialize};

/// How a bench run went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// Exit status (128+N for a signal); `None` when it did not finish.
    pub status: Option<i32>,
    /// The bench was killed (its whole process group) at its timeout.
    pub timed_out: bool,
    /// The bench was killed (its whole process group) because the matrix was cancelled.
    pub interrupted: bool,
    /// Each metric found: the number in its regex's first group, at the regex's last match in
    /// the output.
    pub metrics: BTreeMap<String, f64>,
    /// Metrics whose regex matched nothing.
    pub missing: Vec<String>,
    /// The bench's output file.
    pub output: PathBuf,
    /// How long the bench ran, in seconds.
    pub took_s: f64,
    /// The bench could not be started.
    pub error: Option<String>,
}

impl BenchResult {
    /// One phrase for the table: empty when all went well.
    pub fn problem(&self) -> Option<String> {
        if let Some(e) = &self.error {
            return Some(format!("bench not started: {e}"));
        }
        if self.interrupted {
            return Some("bench interrupted".into());
        }
        if self.timed_out {
            return Some("bench timed out".into());
        }
        match self.status {
            Some(0) if self.missing.is_empty() => None,
            Some(0) => Some(format!("bench printed no {}", self.missing.join(", "))),
            Some(s) => Some(format!("bench exit {s}")),
            None => Some("bench did not finish".into()),
        }
    }
}

/// The metrics in `output`: for each named regex, the number in its first group at its last
/// match (bench tools print their summary last). Returns the metrics and the names not found.
pub fn extract(output: &str, metrics: &[(String, Regex)]) -> (BTreeMap<String, f64>, Vec<String>) {
    let mut found = BTreeMap::new();
    let mut missing = Vec::new();
    for (name, re) in metrics {
        let value = re
            .captures_iter(output)
            .filter_map(|c| c.get(1))
            .filter_map(|m| m.as_str().trim().replace(',', "").parse::<f64>().ok())
            .last();
        match value {
            Some(v) => {
                found.insert(name.clone(), v);
            }
            None => missing.push(name.clone()),
        }
    }
    (found, missing)
}

/// Runs `command` with `env`, output into `output`, until it exits, `timeout` passes or `cancel`
/// is set (then its whole process group is killed). The group's id is written to `pgid_file`
/// when given, for another firedup to stop it (`__cell-cancel` on a matrix's host).
pub fn run(
    command: &str,
    env: &[(String, String)],
    output: &Path,
    timeout: Duration,
    metrics: &[(String, Regex)],
    cancel: &AtomicBool,
    pgid_file: Option<&Path>,
) -> BenchResult {
    let began = Instant::now();
    let mut result = BenchResult {
        status: None,
        timed_out: false,
        interrupted: false,
        metrics: BTreeMap::new(),
        missing: metrics.iter().map(|(n, _)| n.clone()).collect(),
        output: output.to_path_buf(),
        took_s: 0.0,
        error: None,
    };
    let file = match std::fs::File::create(output) {
        Ok(f) => f,
        Err(e) => {
            result.error = Some(format!("cannot create {}: {e}", output.display()));
            return result;
        }
    };
    let err_file = match file.try_clone() {
        Ok(f) => f,
        Err(e) => {
            result.error = Some(format!("cannot share {}: {e}", output.display()));
            return result;
        }
    };
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err_file)
        // Its own group, so a timeout or Ctrl-C stops the bench and everything it started.
        .process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            result.error = Some(e.to_string());
            return result;
        }
    };
    if let Some(f) = pgid_file {
        let _ = std::fs::write(f, child.id().to_string());
    }
    let deadline = began + timeout;
    crate::process::wait_for_exit(child.id(), Duration::from_millis(100), &|| {
        Instant::now() >= deadline || cancel.load(Ordering::SeqCst)
    });
    let status = match child.try_wait() {
        Ok(Some(s)) => Some(s),
        _ => {
            result.interrupted = cancel.load(Ordering::SeqCst);
            result.timed_out = !result.interrupted;
            if let Some(pg) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process_group(pg, rustix::process::Signal::KILL);
            }
            child.wait().ok();
            None
        }
    };
    if let Some(f) = pgid_file {
        let _ = std::fs::remove_file(f);
    }
    result.status = status.map(|s| s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)));
    result.took_s = began.elapsed().as_secs_f64();
    let text = std::fs::read(output)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let (found, missing) = extract(&text, metrics);
    result.metrics = found;
    result.missing = missing;
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounded_wait::{HANG, bounded};

    fn re(pairs: &[(&str, &str)]) -> Vec<(String, Regex)> {
        pairs
            .iter()
            .map(|(n, r)| (n.to_string(), Regex::new(r).unwrap()))
            .collect()
    }

    #[test]
    fn metrics_come_from_the_last_match() {
        let out = "\
SET: rps=0.0 (overall: -nan) avg_msec=nan
SET: 98039.22 requests per second, p50=0.255 msec
GET: 1,234,567.50 requests per second, p50=0.191 msec
Output token throughput (tok/s):         1532.07
";
        let m = re(&[
            ("set_rps", r"SET: ([0-9.,]+) requests per second"),
            ("get_rps", r"GET: ([0-9.,]+) requests per second"),
            ("tok_s", r"Output token throughput \(tok/s\):\s+([0-9.]+)"),
            ("tpot", r"TPOT \(ms\):\s+([0-9.]+)"),
        ]);
        let (found, missing) = extract(out, &m);
        assert_eq!(found["set_rps"], 98039.22);
        assert_eq!(found["get_rps"], 1_234_567.5);
        assert_eq!(found["tok_s"], 1532.07);
        assert_eq!(missing, ["tpot"]);
    }

    #[test]
    fn a_bench_runs_with_its_env_and_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = AtomicBool::new(false);
        let m = re(&[("tps", r"tps = ([0-9.]+)")]);
        let ok = run(
            "echo \"tps = $RATE\"",
            &[("RATE".into(), "41.5".into())],
            &dir.path().join("a.log"),
            Duration::from_secs(10),
            &m,
            &cancel,
            None,
        );
        assert_eq!(ok.status, Some(0));
        assert_eq!(ok.metrics["tps"], 41.5);
        assert_eq!(ok.problem(), None);

        let failed = run(
            "echo oops; exit 3",
            &[],
            &dir.path().join("b.log"),
            Duration::from_secs(10),
            &m,
            &cancel,
            None,
        );
        assert_eq!(failed.status, Some(3));
        assert_eq!(failed.problem().as_deref(), Some("bench exit 3"));

        // A bench that outlives its timeout has its whole group killed: were the background
        // sleep left holding the output, the call would last 300 s and the bounded wait fail.
        let (log, m2) = (dir.path().join("c.log"), m.clone());
        let slow = bounded("a bench past its timeout", HANG, move || {
            let cancel = AtomicBool::new(false);
            run(
                "sleep 300 & sleep 300",
                &[],
                &log,
                Duration::from_millis(300),
                &m2,
                &cancel,
                None,
            )
        });
        assert!(slow.timed_out);
        assert_eq!(slow.problem().as_deref(), Some("bench timed out"));
    }
}
