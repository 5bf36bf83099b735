//! What a matrix cell asks of its host after the verdict ([`FinishRequest`]: the bench, then
//! the verified teardown) and what the host answers ([`FinishAnswer`]). Serializable: over SSH
//! they travel as JSON to and from `firedup __cell-finish` on the host.

use serde::{Deserialize, Serialize};

use super::bench::BenchResult;
use super::teardown::{Before, TeardownCheck};

/// What the host is asked to do once a cell has its verdict.
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

/// What the host answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FinishAnswer {
    pub bench: Option<BenchResult>,
    pub teardown: TeardownCheck,
}
