//! What a matrix cell asks of its host after the verdict ([`FinishRequest`]: the bench, then
//! the verified teardown) and what the host answers ([`FinishAnswer`]). Serializable: over SSH
//! they travel as JSON to and from `firedup __cell-finish` on the host.

use serde::{Deserialize, Serialize};

use super::bench::BenchResult;
use super::teardown::{Before, TeardownCheck};

/// What the host is asked to do once a cell has its verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FinishRequest {
    /// The cell's run on the host, by id.
    pub run_id: String,
    /// Run the bench first (the cell is ready).
    pub bench: Option<BenchRequest>,
    /// Milliseconds between SIGTERM and SIGKILL when the run is stopped.
    pub grace_ms: u64,
    /// The cell's listen port, proven free of new listeners after the stop; `None`: no port
    /// check.
    pub port: Option<u16>,
    /// How the machine looked before the cell started ([`Before::capture`]).
    pub before: Before,
}

/// A bench to run on the host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchRequest {
    /// The bench command, run with `sh -c` on the host.
    pub command: String,
    /// Variables set for the bench on top of the host's environment (a matrix adds
    /// `FIREDUP_LOG`, `FIREDUP_RUN_ID`, `FIREDUP_PID`, `FIREDUP_HOST`, `FIREDUP_PORT`,
    /// `FIREDUP_URL`).
    pub env: Vec<(String, String)>,
    /// Milliseconds after which the bench's process group is killed.
    pub timeout_ms: u64,
    /// Metric name and regex.
    pub metrics: Vec<(String, String)>,
}

/// What the host answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FinishAnswer {
    /// How the bench went; `None` when none was asked for (or the run was not found).
    pub bench: Option<BenchResult>,
    /// What the verified teardown found.
    pub teardown: TeardownCheck,
}
