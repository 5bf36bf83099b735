//! Which node each `srun` task ran on, as srun's own report says (`srun: error: NODE: task 1:
//! Exited with exit code 3`, `srun: error: NODE: tasks 0,2-3: Killed`): a multi-node Slurm job's
//! verdict names the node of the rank where the root cause happened (CONTRACT: `node`). Only what
//! srun printed is used; a task it never reported has no node here.

/// The node and the tasks a line of srun's report names, if it is one.
pub(super) fn srun_task_nodes(text: &str) -> Option<(String, Vec<u32>)> {
    let rest = &text[text.find("srun: error: ")? + 13..];
    let (node, rest) = rest.split_once(": task")?;
    if node.is_empty() || node.contains(char::is_whitespace) {
        return None;
    }
    let rest = rest.strip_prefix('s').unwrap_or(rest).strip_prefix(' ')?;
    let (list, _) = rest.split_once(':')?;
    let mut tasks = Vec::new();
    for part in list.split(',') {
        let part = part.trim();
        let (first, last) = part.split_once('-').unwrap_or((part, part));
        let (first, last) = (first.parse::<u32>().ok()?, last.parse::<u32>().ok()?);
        // A range is bounded so that a garbled line cannot make a huge list.
        if last < first || last - first > 4096 {
            return None;
        }
        tasks.extend(first..=last);
    }
    (!tasks.is_empty()).then(|| (node.to_string(), tasks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srun_report_lines_name_the_node_of_their_tasks() {
        let cases: &[(&str, Option<(&str, &[u32])>)] = &[
            (
                "srun: error: fdnode2: task 1: Exited with exit code 3",
                Some(("fdnode2", &[1])),
            ),
            (
                "srun: error: nid003053: task 0: Segmentation fault (core dumped)",
                Some(("nid003053", &[0])),
            ),
            (
                "srun: error: node07: tasks 0,2-3: Terminated",
                Some(("node07", &[0, 2, 3])),
            ),
            (
                "srun: error: sn30-r1-h1: task 3: Out Of Memory",
                Some(("sn30-r1-h1", &[3])),
            ),
            (
                "srun: error: Unable to create step for job 42: Invalid",
                None,
            ),
            ("srun: Terminating StepId=42.0", None),
            ("0: task 1: Exited with exit code 3", None),
            ("srun: error: node07: tasks 5-2: Killed", None),
        ];
        for (line, want) in cases {
            let got = srun_task_nodes(line);
            let want = want.map(|(n, t)| (n.to_string(), t.to_vec()));
            assert_eq!(got, want, "{line}");
        }
    }
}
