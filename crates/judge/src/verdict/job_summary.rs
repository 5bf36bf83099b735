//! The JSON verdict's `job` field: what a batch scheduler last said about the job (built from a
//! [`crate::job::JobSnapshot`]).

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
