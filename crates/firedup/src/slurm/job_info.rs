//! One job as `scontrol show job -o JOBID` prints it: a single line of `Key=Value` fields, read
//! into [`JobInfo`]. Pure: the text in, the fields out (tested on lines a real Slurm printed).
//!
//! The line is split at each ` Key=`: a value may hold spaces (`Command=`, a path), so a word that
//! does not start with a key shape (`Name=`, `AllocNode:Sid=`, `CPUs/Task=`) belongs to the
//! previous value. Unknown fields are ignored, so newer Slurm versions that add fields still parse.
//! Slurm's empty values (`(null)`, `None`, `N/A`, nothing) are `None`.

use crate::verdict::ExitInfo;
use firedup_judge::job::JobSnapshot;

/// What firedup reads of a job.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobInfo {
    /// `JobId=`.
    pub id: String,
    /// `JobState=`: `PENDING`, `RUNNING`, `COMPLETED`, `OUT_OF_MEMORY`, ...
    pub state: String,
    /// `Reason=`: why it pends or ended (`Priority`, `Resources`, `NonZeroExitCode`); `None`
    /// where Slurm says `None`.
    pub reason: Option<String>,
    /// `Restarts=`: how many times it was requeued.
    pub restarts: u32,
    /// `Requeue=1`: the job goes back to the queue after a node failure or preemption.
    pub requeue: bool,
    /// `ExitCode=CODE:SIGNAL` of the batch script.
    pub exit_code: (i32, i32),
    /// `NodeList=`, compressed (`node[1-3]`); `None` while pending.
    pub node_list: Option<String>,
    /// `BatchHost=`: the node running the batch script.
    pub batch_host: Option<String>,
    /// `StdOut=`: the job's output file, expanded (`%j` replaced).
    pub std_out: Option<String>,
    /// `StdErr=`.
    pub std_err: Option<String>,
    /// `WorkDir=`.
    pub work_dir: Option<String>,
}

/// Job states after which the job runs no more (the scheduler's word for how it ended).
/// `NODE_FAIL` and `PREEMPTED` of a requeueable job may still turn into `PENDING`: see
/// [`JobInfo::settled`].
const TERMINAL: [&str; 11] = [
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "SPECIAL_EXIT",
    "REVOKED",
];

impl JobInfo {
    /// Reads one line of `scontrol show job -o`; `None` when it has no `JobId=` and `JobState=`.
    pub fn parse(line: &str) -> Option<JobInfo> {
        let mut info = JobInfo::default();
        let mut seen_state = false;
        for (key, value) in fields(line) {
            let value = value.trim();
            let some = || empty_to_none(value);
            match key {
                "JobId" => info.id = value.to_string(),
                // A state may carry flags after it (`CANCELLED by 0`).
                "JobState" => {
                    info.state = value.split_whitespace().next().unwrap_or("").to_string();
                    seen_state = true;
                }
                "Reason" => info.reason = some(),
                "Restarts" => info.restarts = value.parse().unwrap_or(0),
                "Requeue" => info.requeue = value == "1",
                "ExitCode" => {
                    let (c, s) = value.split_once(':').unwrap_or((value, "0"));
                    info.exit_code = (c.parse().unwrap_or(0), s.parse().unwrap_or(0));
                }
                "NodeList" => info.node_list = some(),
                "BatchHost" => info.batch_host = some(),
                "StdOut" => info.std_out = some(),
                "StdErr" => info.std_err = some(),
                "WorkDir" => info.work_dir = some(),
                _ => {}
            }
        }
        (!info.id.is_empty() && seen_state).then_some(info)
    }

    /// The job will run no more (a terminal state).
    pub fn is_terminal(&self) -> bool {
        TERMINAL.contains(&self.state.as_str())
    }

    /// The job ended for good: a terminal state, except a requeueable job's `NODE_FAIL` or
    /// `PREEMPTED` seen only once (Slurm may put it back in the queue on the next reading).
    pub fn settled(&self, seen_before: bool) -> bool {
        let may_requeue = self.requeue && matches!(self.state.as_str(), "NODE_FAIL" | "PREEMPTED");
        self.is_terminal() && (seen_before || !may_requeue)
    }

    /// Waiting in the queue (`PENDING`, or held after a requeue).
    pub fn is_pending(&self) -> bool {
        matches!(
            self.state.as_str(),
            "PENDING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED"
        )
    }

    /// How the batch script ended, once the job has: the signal when `ExitCode=` names one,
    /// else the code.
    pub fn exit(&self) -> Option<ExitInfo> {
        if !self.is_terminal() {
            return None;
        }
        Some(match self.exit_code {
            (_, sig) if sig != 0 => ExitInfo::signal(sig, false),
            (code, _) => ExitInfo::code(code),
        })
    }

    /// The snapshot the judge is sent: `nodes` expanded, `queue_position` where Slurm gives it.
    pub fn snapshot(
        &self,
        nodes: Vec<String>,
        queue_position: Option<u32>,
        cancel_requested: bool,
    ) -> JobSnapshot {
        JobSnapshot {
            scheduler: "slurm".into(),
            id: self.id.clone(),
            state: self.state.clone(),
            reason: self.reason.clone(),
            queue_position,
            nodes,
            restarts: self.restarts,
            exit: self.exit(),
            cancel_requested,
        }
    }
}

/// Slurm's ways of saying "nothing".
fn empty_to_none(v: &str) -> Option<String> {
    match v {
        "" | "(null)" | "None" | "N/A" | "Unknown" => None,
        v => Some(v.to_string()),
    }
}

/// The `(key, value)` fields of a line, in order.
fn fields(line: &str) -> Vec<(&str, &str)> {
    // Byte offsets where a field starts: the line's start and each word with a key shape.
    let mut starts = Vec::new();
    let mut at = 0;
    for word in line.split(' ') {
        if key_of(word).is_some() {
            starts.push(at);
        }
        at += word.len() + 1;
    }
    let mut out = Vec::new();
    for (i, &s) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map(|e| e - 1).unwrap_or(line.len());
        let field = line[s..end].trim_end_matches(['\n', '\r']);
        if let Some(key) = key_of(field) {
            out.push((key, &field[key.len() + 1..]));
        }
    }
    out
}

/// The key of a word that starts a field (`JobId=1` → `JobId`), by shape: a letter, then
/// letters, digits and `_:/.-`, then `=`.
fn key_of(word: &str) -> Option<&str> {
    let eq = word.find('=')?;
    let key = &word[..eq];
    let mut chars = key.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '/' | '.' | '-')))
    .then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines a real Slurm 22.05 printed (tests/slurm/cluster.sh), one per state: `name<TAB>line`.
    const LINES: &str = include_str!("job_lines.tsv");

    fn line(name: &str) -> JobInfo {
        let text = LINES
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix('\t'))
            .unwrap_or_else(|| panic!("no line {name}"));
        JobInfo::parse(text).unwrap_or_else(|| panic!("{name} does not parse"))
    }

    #[test]
    fn real_lines_read_as_slurm_printed_them() {
        // (name, state, reason, restarts, exit, nodes, terminal)
        let table: [(
            &str,
            &str,
            Option<&str>,
            u32,
            Option<ExitInfo>,
            Option<&str>,
            bool,
        ); 11] = [
            ("running", "RUNNING", None, 0, None, Some("vm"), false),
            ("completing", "COMPLETING", None, 0, None, Some("vm"), false),
            (
                "cancelled",
                "CANCELLED",
                None,
                0,
                Some(ExitInfo::signal(15, false)),
                Some("vm"),
                true,
            ),
            (
                "completed",
                "COMPLETED",
                None,
                0,
                Some(ExitInfo::code(0)),
                Some("vm"),
                true,
            ),
            (
                "failed",
                "FAILED",
                Some("NonZeroExitCode"),
                0,
                Some(ExitInfo::code(3)),
                Some("vm"),
                true,
            ),
            (
                "oom",
                "OUT_OF_MEMORY",
                Some("OutOfMemory"),
                0,
                Some(ExitInfo::signal(125, false)),
                Some("vm"),
                true,
            ),
            (
                "badoutput",
                "FAILED",
                Some("JobLaunchFailure"),
                0,
                Some(ExitInfo::signal(53, false)),
                Some("vm"),
                true,
            ),
            (
                "depnever",
                "PENDING",
                Some("Dependency"),
                0,
                None,
                None,
                false,
            ),
            (
                "srun7_end",
                "FAILED",
                Some("NonZeroExitCode"),
                0,
                Some(ExitInfo::code(7)),
                Some("vm"),
                true,
            ),
            ("requeued1", "COMPLETING", None, 1, None, Some("vm"), false),
            (
                "requeued2",
                "PENDING",
                Some("BeginTime"),
                1,
                None,
                None,
                false,
            ),
        ];
        for (name, state, reason, restarts, exit, nodes, terminal) in table {
            let name = if name == "completing" {
                "cancelling"
            } else {
                name
            };
            let j = line(name);
            assert_eq!(j.state, state, "{name}");
            assert_eq!(j.reason.as_deref(), reason, "{name}");
            assert_eq!(j.restarts, restarts, "{name}");
            assert_eq!(j.exit(), exit, "{name}");
            assert_eq!(j.node_list.as_deref(), nodes, "{name}");
            assert_eq!(j.is_terminal(), terminal, "{name}");
            assert!(j.requeue, "{name}");
        }
    }

    #[test]
    fn the_log_and_batch_host_come_from_the_line() {
        let j = line("running");
        assert_eq!(j.id, "2");
        assert_eq!(j.std_out.as_deref(), Some("/tmp/shost-lines/a.out"));
        assert_eq!(j.batch_host.as_deref(), Some("vm"));
        assert_eq!(line("depnever").batch_host, None);
        assert_eq!(
            line("badoutput").std_out.as_deref(),
            Some("/tmp/nonexist/d.out")
        );
    }

    #[test]
    fn values_with_spaces_and_unknown_fields() {
        let cases = [
            // A path with a space, a field newer Slurm adds, a state with a flag.
            (
                "JobId=12 JobName=a b JobState=CANCELLED by 0 Reason=None NewField=x StdOut=/tmp/my logs/o.txt Power=",
                ("12", "CANCELLED", Some("/tmp/my logs/o.txt")),
            ),
            (
                "JobId=3 JobState=RUNNING StdOut=(null)",
                ("3", "RUNNING", None),
            ),
        ];
        for (text, (id, state, out)) in cases {
            let j = JobInfo::parse(text).expect(text);
            assert_eq!(
                (j.id.as_str(), j.state.as_str(), j.std_out.as_deref()),
                (id, state, out)
            );
        }
        for bad in [
            "",
            "slurm_load_jobs error: Invalid job id specified",
            "JobId=3",
        ] {
            assert_eq!(JobInfo::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_requeueable_node_failure_settles_on_its_second_reading() {
        let mut j = line("running");
        for (state, requeue, first, second) in [
            ("NODE_FAIL", true, false, true),
            ("PREEMPTED", true, false, true),
            ("NODE_FAIL", false, true, true),
            ("TIMEOUT", true, true, true),
            ("RUNNING", true, false, false),
        ] {
            j.state = state.into();
            j.requeue = requeue;
            assert_eq!(
                (j.settled(false), j.settled(true)),
                (first, second),
                "{state} {requeue}"
            );
        }
    }
}
