//! The JSON verdict's `job` field (docs/contract.md): a batch scheduler's job as the verdict
//! reports it. The judge fills it from its last reading of the job.

/// The JSON verdict's `job` field: `scheduler`, `id`, `state`, `nodes`, `reason`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JobSummary {
    /// The scheduler: `"slurm"`.
    pub scheduler: String,
    /// The job's id.
    pub id: String,
    /// The scheduler's last state.
    pub state: String,
    /// The nodes it ran on.
    pub nodes: Vec<String>,
    /// The pending reason, or null.
    pub reason: Option<String>,
}
