//! A batch scheduler's view of a job, as the shell reads it (Slurm: `scontrol show job -o`), for
//! the judge ([`crate::judge::Observation::Job`]) and the JSON verdict's `job` field.
//!
//! The shell sends a snapshot each time one of its fields changes, and the terminal one only after
//! the job's log has been read to its end (as for a process exit), so a cause printed just before
//! the end is never missed. The state and reason are the scheduler's own words, kept as they are:
//! the judge decides what they mean.

use crate::verdict::ExitInfo;

/// One reading of a job's state.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct JobSnapshot {
    /// The scheduler: `"slurm"`.
    pub scheduler: String,
    /// The job's id, as the scheduler prints it.
    pub id: String,
    /// The scheduler's state word: `PENDING`, `RUNNING`, `COMPLETING`, `COMPLETED`, `FAILED`,
    /// `OUT_OF_MEMORY`, `TIMEOUT`, `NODE_FAIL`, `PREEMPTED`, `CANCELLED`, `BOOT_FAIL`,
    /// `DEADLINE`, `REQUEUED`, `SUSPENDED`, ...
    pub state: String,
    /// The scheduler's reason (`Priority`, `Resources`, `DependencyNeverSatisfied`, ...);
    /// `None` where it says `None`.
    pub reason: Option<String>,
    /// The job's place in the pending queue (1 = next), where the scheduler gives it.
    pub queue_position: Option<u32>,
    /// The nodes the job runs or ran on (expanded host names); empty while pending.
    pub nodes: Vec<String>,
    /// How many times the job was requeued (Slurm `Restarts=`).
    pub restarts: u32,
    /// How the job's batch script ended (Slurm `ExitCode=CODE:SIGNAL`), once it has.
    pub exit: Option<ExitInfo>,
    /// firedup itself asked the scheduler to cancel the job (`firedup stop`, a verdict's
    /// teardown): a CANCELLED end is then not someone else's cancel.
    pub cancel_requested: bool,
}

/// Slurm's `ExitCode=CODE:SIGNAL` (`3:0`, `0:53`, `0:125`) as an [`ExitInfo`]: a signal when
/// SIGNAL is not 0 (with CODE too when that is not 0 either), else the exit code. `None` when
/// the text is not two numbers.
pub fn exit_from_slurm(text: &str) -> Option<ExitInfo> {
    let (code, signal) = text.trim().split_once(':')?;
    let code: i32 = code.parse().ok()?;
    let signal: i32 = signal.parse().ok()?;
    Some(match (code, signal) {
        (c, 0) => ExitInfo::code(c),
        (0, s) => ExitInfo::signal(s, false),
        (c, s) => ExitInfo {
            code: Some(c),
            signal: Some(s),
            core_dumped: false,
        },
    })
}

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

impl From<&JobSnapshot> for JobSummary {
    fn from(s: &JobSnapshot) -> JobSummary {
        JobSummary {
            scheduler: s.scheduler.clone(),
            id: s.id.clone(),
            state: s.state.clone(),
            nodes: s.nodes.clone(),
            reason: s.reason.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_exit_codes_read_as_exits() {
        let cases: &[(&str, Option<ExitInfo>)] = &[
            ("0:0", Some(ExitInfo::code(0))),
            ("3:0", Some(ExitInfo::code(3))),
            ("143:0", Some(ExitInfo::code(143))),
            ("0:53", Some(ExitInfo::signal(53, false))),
            ("0:125", Some(ExitInfo::signal(125, false))),
            (
                "1:9",
                Some(ExitInfo {
                    code: Some(1),
                    signal: Some(9),
                    core_dumped: false,
                }),
            ),
            ("", None),
            ("3", None),
            ("a:b", None),
        ];
        for (text, want) in cases {
            assert_eq!(exit_from_slurm(text), *want, "{text}");
        }
    }
}
