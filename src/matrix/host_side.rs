//! The SSH host's side of the commands that [`firedup::host::SshHost`] runs there, each doing
//! what [`LocalHost`] does, on the machine it is about: `firedup __cell-before [PORT]` (who
//! listens on the cell's port and uses the GPU before it starts), `firedup __cell-finish` (bench,
//! then verified teardown), `firedup __cell-cancel RUN_ID` (Ctrl-C: stop the bench) and
//! `firedup __stop RUN_ID GRACE_MS` (stop a run and verify). Requests come as JSON on stdin,
//! answers as JSON on stdout.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result};

use firedup::host::{FinishRequest, Host, LocalHost};

/// `firedup __cell-finish`.
pub fn cell_finish() -> Result<i32> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
        .context("cannot read the request on stdin")?;
    let req: FinishRequest = serde_json::from_str(&text).context("bad cell-finish request")?;
    // Bounded by its timeout; the local firedup's Ctrl-C stops the bench through
    // `__cell-cancel`.
    let never = AtomicBool::new(false);
    let answer = firedup::host::of_run_here(&req.run_id).finish_cell(&req, &never);
    println!("{}", serde_json::to_string(&answer)?);
    Ok(0)
}

/// `firedup __cell-cancel RUN_ID`: kills the process group of the run's bench, if one runs.
pub fn cell_cancel(run_id: &str) -> Result<i32> {
    LocalHost.cancel_bench(run_id)?;
    Ok(0)
}

/// `firedup __cell-before [PORT]`: the machine before a cell, as JSON.
pub fn cell_before(port: Option<u16>) -> Result<i32> {
    let before = LocalHost.before_cell(port)?;
    println!("{}", serde_json::to_string(&before)?);
    Ok(0)
}

/// `firedup __stop RUN_ID GRACE_MS`: stops the run here and answers with how it went, as JSON.
pub fn stop_for_host(run_id: &str, grace_ms: u64) -> Result<i32> {
    // A batch job's run is cancelled through Slurm (`run --slurm --host LOGIN`).
    let stopped =
        firedup::host::of_run_here(run_id).stop(run_id, Duration::from_millis(grace_ms))?;
    println!("{}", serde_json::to_string(&stopped)?);
    Ok(0)
}
