//! The host's side of a matrix cell run with `--host`: `firedup __cell-finish` (bench, then
//! verified teardown, where the server runs), `firedup __cell-cancel RUN_ID` (Ctrl-C: stop the
//! bench) and `firedup __cell-before [PORT]` (who listens on
//! the cell's port and uses the GPU before it starts). Requests come as JSON on stdin, answers as JSON on stdout,
//! so that the port, process and GPU checks are made on the machine they are about.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result};
use regex::Regex;
use serde::{Deserialize, Serialize};

use super::bench::{self, BenchResult};
use super::teardown::{Before, TeardownCheck, teardown};
use crate::engine::Target;
use crate::rundir::RunDir;

/// What `__cell-finish` is asked to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FinishRequest {
    pub run_id: String,
    /// Run the bench first (the cell is ready).
    pub bench: Option<BenchRequest>,
    pub grace_ms: u64,
    pub port: Option<u16>,
    pub before: Before,
}

/// A bench to run on the host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchRequest {
    pub command: String,
    pub env: Vec<(String, String)>,
    pub timeout_ms: u64,
    /// Metric name and regex.
    pub metrics: Vec<(String, String)>,
}

/// What `__cell-finish` answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FinishAnswer {
    pub bench: Option<BenchResult>,
    pub teardown: TeardownCheck,
}

/// `firedup __cell-finish`.
pub fn cell_finish() -> Result<i32> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
        .context("cannot read the request on stdin")?;
    let req: FinishRequest = serde_json::from_str(&text).context("bad cell-finish request")?;
    let run = RunDir::open(&req.run_id)?;
    let process = run.process();
    let target = Target {
        log: std::path::PathBuf::from(run.meta()?.log),
        pid: process.map(|p| p.pid),
        start_ticks: process.map(|p| p.start_ticks).filter(|t| *t != 0),
        run: Some(run.clone()),
        run_id: run.id.clone(),
        ..Default::default()
    };
    let bench = match &req.bench {
        Some(b) => {
            let metrics = b
                .metrics
                .iter()
                .map(|(n, r)| Ok((n.clone(), Regex::new(r)?)))
                .collect::<Result<Vec<_>>>()?;
            // Bounded by its timeout; the local firedup's Ctrl-C stops it through
            // `__cell-cancel`, which kills the process group recorded here.
            let never = AtomicBool::new(false);
            Some(bench::run(
                &b.command,
                &b.env,
                &run.path.join("bench.log"),
                Duration::from_millis(b.timeout_ms),
                &metrics,
                &never,
                Some(&run.path.join(BENCH_PGID)),
            ))
        }
        None => None,
    };
    let check = teardown(
        &target,
        Duration::from_millis(req.grace_ms),
        req.port,
        &req.before,
    );
    let answer = FinishAnswer {
        bench,
        teardown: check,
    };
    println!("{}", serde_json::to_string(&answer)?);
    Ok(0)
}

/// Where a running bench's process group is written, in the run directory.
const BENCH_PGID: &str = "bench.pgid";

/// `firedup __cell-cancel RUN_ID`: kills the process group of the run's bench, if one runs.
pub fn cell_cancel(run_id: &str) -> Result<i32> {
    let run = RunDir::open(run_id)?;
    if let Ok(text) = std::fs::read_to_string(run.path.join(BENCH_PGID)) {
        if let Some(pg) = text
            .trim()
            .parse::<i32>()
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pg, rustix::process::Signal::KILL);
        }
    }
    Ok(0)
}

/// `firedup __cell-before [PORT]`: the machine before a cell, as JSON ([`Before`]).
pub fn cell_before(port: Option<u16>) -> Result<i32> {
    println!("{}", serde_json::to_string(&Before::capture(port))?);
    Ok(0)
}
