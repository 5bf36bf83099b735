//! What a batch scheduler's words mean (Slurm's `JobState=` and `Reason=`, as `scontrol show job`
//! prints them), as plain functions of the words: which states are a wait in the queue, which
//! are the job running, which are its end and how it ended; which pending reasons can never clear
//! without someone changing the job or the cluster's configuration; and the queue in words.
//!
//! Words this file does not know (a newer Slurm's state) change nothing: the judge keeps the
//! stage it was in, and `--timeout`, `--stall` or `--queue-timeout` still bound the watch.

use crate::job::JobSnapshot;
use crate::verdict::{ExitInfo, Signature};

/// Where a job stands, by its state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum JobStage {
    /// Waiting to run (pending, held, being requeued, suspended): the phase `queued`.
    Queued,
    /// Running (also while it completes or is signalled).
    Running,
    /// It ended.
    Ended(JobEnd),
    /// A state word this file does not know.
    Unknown,
}

/// How a job ended, by its state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum JobEnd {
    /// `COMPLETED`: its batch script exited 0.
    Completed,
    /// `FAILED`: a non-zero exit, a signal, or a launch failure.
    Failed,
    /// `OUT_OF_MEMORY`: the scheduler's memory limit (cgroup) was hit.
    OutOfMemory,
    /// The scheduler itself ended it: `TIMEOUT`/`DEADLINE`, `NODE_FAIL`/`BOOT_FAIL`, `PREEMPTED`,
    /// `CANCELLED`; the signature says which.
    Ended(Signature),
}

/// The stage a state word means. Slurm may add flags after the word (`CANCELLED by 1000` in
/// sacct, `COMPLETING+` elsewhere): only the first word counts.
pub(super) fn stage_of(state: &str) -> JobStage {
    let word = state
        .split(|c: char| c.is_whitespace() || c == '+' || c == ',')
        .next()
        .unwrap_or("");
    match word {
        "PENDING" | "CONFIGURING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED"
        | "RESV_DEL_HOLD" | "SUSPENDED" | "SPECIAL_EXIT" => JobStage::Queued,
        "RUNNING" | "COMPLETING" | "SIGNALING" | "STAGE_OUT" | "RESIZING" => JobStage::Running,
        "COMPLETED" => JobStage::Ended(JobEnd::Completed),
        "FAILED" => JobStage::Ended(JobEnd::Failed),
        "OUT_OF_MEMORY" => JobStage::Ended(JobEnd::OutOfMemory),
        "TIMEOUT" | "DEADLINE" => JobStage::Ended(JobEnd::Ended(Signature::TimeLimit)),
        "NODE_FAIL" | "BOOT_FAIL" => JobStage::Ended(JobEnd::Ended(Signature::NodeFail)),
        "PREEMPTED" => JobStage::Ended(JobEnd::Ended(Signature::Preempted)),
        "CANCELLED" => JobStage::Ended(JobEnd::Ended(Signature::Cancelled)),
        _ => JobStage::Unknown,
    }
}

/// A queued state other than `PENDING`, in words.
fn queued_state_words(state: &str) -> Option<&'static str> {
    match state {
        "CONFIGURING" => Some("its nodes are being set up"),
        "REQUEUED" => Some("requeued"),
        "REQUEUE_HOLD" => Some("requeued and held"),
        "REQUEUE_FED" => Some("being requeued by its federation"),
        "RESV_DEL_HOLD" => Some("held: its reservation was deleted"),
        "SUSPENDED" => Some("suspended by the scheduler"),
        "SPECIAL_EXIT" => Some("held after a special exit"),
        _ => None,
    }
}

/// The pending reason's first word (`ReqNodeNotAvail, UnavailableNodes:n1` → `ReqNodeNotAvail`).
pub(super) fn reason_word(reason: &str) -> &str {
    reason
        .split(|c: char| c == ',' || c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("")
}

/// Why the scheduler will never start a job pending for `reason`, in words; `None` when the
/// reason can clear by waiting (`Priority`, `Resources`, `Dependency`, `ReqNodeNotAvail`,
/// `BeginTime`, held jobs, the aggregate limits of an association, QOS or user, ...).
///
/// Only reasons about the job's own request against a limit or a name that someone must change:
/// a dependency that can never be met, a request outside its partition's limits or its
/// association's or QOS's per-job limits (or below the QOS's minimum), an invalid account or QOS,
/// constraints no node satisfies. Slurm's `job_state_reason_string` has the words; per-user,
/// per-account and aggregate (`Grp`) limits are left out: other jobs ending clears them.
pub(super) fn never_satisfied(reason: &str) -> Option<String> {
    let word = reason_word(reason);
    let fixed = match word {
        "DependencyNeverSatisfied" => {
            Some("a job it depends on ended so that its dependency can never be satisfied")
        }
        "PartitionNodeLimit" => Some(
            "the number of nodes it asks for is outside its partition's limits (or the nodes it requires are down or drained)",
        ),
        "PartitionTimeLimit" => Some("its time limit exceeds its partition's time limit"),
        "PartitionConfig" => Some("it asks for more than its partition allows"),
        "BadConstraints" => Some("no node can satisfy its requirements"),
        "InvalidAccount" => Some("its account is invalid"),
        "InvalidQOS" => Some("its QOS is invalid"),
        "AccountNotAllowed" => Some("its account is not allowed in its partition"),
        "QOSNotAllowed" => Some("its QOS is not allowed by its association or partition"),
        "MaxMemPerLimit" => Some("it asks for more memory per CPU or per node than allowed"),
        _ => None,
    };
    if let Some(f) = fixed {
        return Some(f.to_string());
    }
    // AssocMaxWallDurationPerJobLimit, QOSMaxNodePerJobLimit, AssocMaxCpuMinutesPerJobLimit,
    // QOSMaxGRESPerJob, ...: the job's own request is over a per-job limit.
    let per_job = word.contains("PerJob");
    if word.starts_with("AssocMax") && per_job {
        return Some("it asks for more than its association allows one job".into());
    }
    if word.starts_with("QOSMax") && per_job {
        return Some("it asks for more than its QOS allows one job".into());
    }
    // QOSMinCpuNotSatisfied, QOSMinMemory, QOSMinNode, QOSMinGRES, ...
    if word.starts_with("QOSMin") {
        return Some("it asks for less than its QOS requires of a job".into());
    }
    None
}

/// The job's wait in words: `queued: Priority, 3rd in the queue`,
/// `queued: REQUEUE_HOLD (requeued and held), JobHeldUser`.
pub(super) fn queue_words(s: &JobSnapshot) -> String {
    let detail = queue_detail(s, true);
    if detail.is_empty() {
        "queued".to_string()
    } else {
        format!("queued: {detail}")
    }
}

/// The wait's details: the state (named with `name_state`) when it is not plain `PENDING`,
/// the pending reason, the place in the queue (`REQUEUE_HOLD (requeued and held), JobHeldUser`;
/// without the name `requeued and held, JobHeldUser`).
pub(super) fn queue_detail(s: &JobSnapshot, name_state: bool) -> String {
    let mut parts: Vec<String> = Vec::new();
    let state = s.state.split_whitespace().next().unwrap_or("");
    if let Some(w) = queued_state_words(state) {
        parts.push(if name_state {
            format!("{state} ({w})")
        } else {
            w.to_string()
        });
    }
    if let Some(r) = s
        .reason
        .as_deref()
        .filter(|r| !r.is_empty() && *r != "None")
    {
        parts.push(r.to_string());
    }
    if let Some(p) = s.queue_position {
        parts.push(format!("{} in the queue", ordinal(p)));
    }
    parts.join(", ")
}

/// `1st`, `2nd`, `3rd`, `4th`, `11th`, `21st`, ...
pub(super) fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// `once`, `twice`, `3 times`.
pub(super) fn times(n: u32) -> String {
    match n {
        1 => "once".into(),
        2 => "twice".into(),
        n => format!("{n} times"),
    }
}

/// Slurm's `ExitCode=CODE:SIGNAL` of `e` (`3:0`, `0:53`).
pub(super) fn slurm_exit_code(e: &ExitInfo) -> String {
    format!("{}:{}", e.code.unwrap_or(0), e.signal.unwrap_or(0))
}

/// Slurm's `ExitCode` 0:53: the batch step could not open its output file, so the job ended
/// before its script ran (the directory of `--output` does not exist).
pub(super) fn output_not_opened(e: &ExitInfo) -> bool {
    e.signal == Some(53) && e.code.unwrap_or(0) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_mean_a_stage() {
        let cases: &[(&str, JobStage)] = &[
            ("PENDING", JobStage::Queued),
            ("CONFIGURING", JobStage::Queued),
            ("REQUEUED", JobStage::Queued),
            ("REQUEUE_HOLD", JobStage::Queued),
            ("REQUEUE_FED", JobStage::Queued),
            ("RESV_DEL_HOLD", JobStage::Queued),
            ("SUSPENDED", JobStage::Queued),
            ("RUNNING", JobStage::Running),
            ("COMPLETING", JobStage::Running),
            ("COMPLETED", JobStage::Ended(JobEnd::Completed)),
            ("FAILED", JobStage::Ended(JobEnd::Failed)),
            ("OUT_OF_MEMORY", JobStage::Ended(JobEnd::OutOfMemory)),
            (
                "TIMEOUT",
                JobStage::Ended(JobEnd::Ended(Signature::TimeLimit)),
            ),
            (
                "DEADLINE",
                JobStage::Ended(JobEnd::Ended(Signature::TimeLimit)),
            ),
            (
                "NODE_FAIL",
                JobStage::Ended(JobEnd::Ended(Signature::NodeFail)),
            ),
            (
                "BOOT_FAIL",
                JobStage::Ended(JobEnd::Ended(Signature::NodeFail)),
            ),
            (
                "PREEMPTED",
                JobStage::Ended(JobEnd::Ended(Signature::Preempted)),
            ),
            (
                "CANCELLED by 1000",
                JobStage::Ended(JobEnd::Ended(Signature::Cancelled)),
            ),
            (
                "CANCELLED",
                JobStage::Ended(JobEnd::Ended(Signature::Cancelled)),
            ),
            ("SOMETHING_NEW", JobStage::Unknown),
            ("", JobStage::Unknown),
        ];
        for (state, want) in cases {
            assert_eq!(stage_of(state), *want, "{state}");
        }
    }

    #[test]
    fn only_reasons_that_cannot_clear_are_final() {
        let finals = [
            "DependencyNeverSatisfied",
            "PartitionNodeLimit",
            "PartitionTimeLimit",
            "PartitionConfig",
            "BadConstraints",
            "InvalidAccount",
            "InvalidQOS",
            "AccountNotAllowed",
            "QOSNotAllowed",
            "MaxMemPerLimit",
            "AssocMaxWallDurationPerJobLimit",
            "QOSMaxWallDurationPerJobLimit",
            "AssocMaxNodePerJobLimit",
            "QOSMaxNodePerJobLimit",
            "AssocMaxCpuPerJobLimit",
            "QOSMaxCpuMinutesPerJobLimit",
            "AssocMaxGRESPerJob",
            "QOSMaxMemoryPerJob",
            "QOSMinCpuNotSatisfied",
            "QOSMinGRES",
        ];
        for r in finals {
            assert!(never_satisfied(r).is_some(), "{r} should be final");
        }
        let waits = [
            "Priority",
            "Resources",
            "Dependency",
            "ReqNodeNotAvail, UnavailableNodes:node7",
            "BeginTime",
            "JobHeldUser",
            "JobHeldAdmin",
            "None",
            "Prolog",
            "Licenses",
            "Reservation",
            "NodeDown",
            "PartitionDown",
            "PartitionInactive",
            "AssocGrpCpuLimit",
            "AssocGrpNodeLimit",
            "QOSGrpGRES",
            "AssocMaxJobsLimit",
            "AssocMaxSubmitJobLimit",
            "QOSMaxJobsPerUserLimit",
            "QOSMaxSubmitJobPerUserLimit",
            "QOSMaxCpuPerUserLimit",
            "QOSMaxNodePerUserLimit",
            "MaxCpuPerAccount",
            "MaxJobsPerAccount",
            "JobArrayTaskLimit",
            "JobHoldMaxRequeue",
            "Cleaning",
            "",
        ];
        for r in waits {
            assert_eq!(never_satisfied(r), None, "{r} can clear");
        }
    }

    #[test]
    fn the_queue_in_words() {
        let snap = |state: &str, reason: Option<&str>, pos: Option<u32>| JobSnapshot {
            scheduler: "slurm".into(),
            id: "7".into(),
            state: state.into(),
            reason: reason.map(String::from),
            queue_position: pos,
            ..JobSnapshot::default()
        };
        let cases = [
            (
                snap("PENDING", Some("Priority"), Some(3)),
                "queued: Priority, 3rd in the queue",
            ),
            (
                snap("PENDING", Some("Resources"), None),
                "queued: Resources",
            ),
            (snap("PENDING", None, None), "queued"),
            (
                snap("PENDING", Some("None"), Some(1)),
                "queued: 1st in the queue",
            ),
            (
                snap("REQUEUE_HOLD", Some("JobHeldUser"), None),
                "queued: REQUEUE_HOLD (requeued and held), JobHeldUser",
            ),
            (
                snap("SUSPENDED", None, None),
                "queued: SUSPENDED (suspended by the scheduler)",
            ),
        ];
        for (s, want) in cases {
            assert_eq!(queue_words(&s), want);
        }
        let ords: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            ords,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st",
                "111th"
            ]
        );
        assert_eq!([times(1), times(2), times(3)], ["once", "twice", "3 times"]);
    }

    #[test]
    fn exit_codes_in_slurm_words() {
        assert_eq!(slurm_exit_code(&ExitInfo::code(3)), "3:0");
        assert_eq!(slurm_exit_code(&ExitInfo::signal(53, false)), "0:53");
        assert!(output_not_opened(&ExitInfo::signal(53, false)));
        assert!(!output_not_opened(&ExitInfo::code(53)));
        assert!(!output_not_opened(&ExitInfo::signal(9, false)));
    }
}
