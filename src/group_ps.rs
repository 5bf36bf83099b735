//! The multi-node runs launched from this machine, as `ps` lists them: one entry per group,
//! naming its nodes (CONTRACT: `nodes`, per node `node_rank`, `node`, `pid`, `exit`, `phase`,
//! `log`). A group whose record says it is over (its verdict left nothing serving, or a stop
//! found every node clean) is told from the record, and listed only with `--all`; of any other
//! group every node is asked, at once, over SSH (its host's run record: live or ended, its exit,
//! its recorded phase), and the group is live while any node is, or cannot be asked.

use serde_json::{Value, json};

use crate::remote_args::RemoteArgs;
use crate::verdict::{NodeReport, Outcome};
use firedup::group::record::{GroupRecord, RecordedNode};
use firedup::host::Host;

/// A group as `ps` shows it.
pub(crate) struct GroupRow {
    pub record: GroupRecord,
    pub live: bool,
    /// The group's state in words, then each node's.
    pub state: String,
    pub nodes: Vec<NodeReport>,
}

impl GroupRow {
    /// The entry of `ps --json` (the keys of a run's entry, and `node`, `nodes`).
    pub(crate) fn json(&self) -> Value {
        let r = &self.record;
        json!({
            "run_id": r.id, "name": r.name, "state": self.state, "job": null, "pid": null,
            "owner": null, "command": r.command, "log": null, "profile": null,
            "started_at": r.started_at,
            "node": r.outcome.as_ref().and_then(|o| o.node.clone()),
            "nodes": self.nodes,
        })
    }

    /// The PID column: each node's pid, in node-rank order.
    pub(crate) fn pids(&self) -> String {
        let pids: Vec<String> = self
            .nodes
            .iter()
            .map(|n| n.pid.map_or_else(|| "-".into(), |p| p.to_string()))
            .collect();
        pids.join(",")
    }
}

/// The groups `ps` lists: the live ones, or all with `all`.
pub(crate) fn groups(remote: &RemoteArgs, all: bool) -> Vec<GroupRow> {
    let rows: Vec<GroupRow> = std::thread::scope(|scope| {
        let handles: Vec<_> = GroupRecord::list()
            .into_iter()
            .filter(|g| all || !g.over)
            .map(|g| scope.spawn(move || row(remote, g)))
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    rows.into_iter().filter(|r| all || r.live).collect()
}

fn row(remote: &RemoteArgs, record: GroupRecord) -> GroupRow {
    let verdict = record.outcome.as_ref().map(verdict_words);
    if record.over {
        let nodes = record
            .outcome
            .as_ref()
            .and_then(|o| o.nodes.clone())
            .unwrap_or_else(|| record.nodes.iter().map(recorded).collect());
        let state = format!("ended: {}", verdict.unwrap_or_else(|| "stopped".into()));
        return GroupRow {
            record,
            live: false,
            state,
            nodes,
        };
    }
    let asked: Vec<(NodeReport, Option<bool>, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = record
            .nodes
            .iter()
            .map(|n| scope.spawn(move || ask(remote, n)))
            .collect();
        handles
            .into_iter()
            .zip(&record.nodes)
            .map(|(h, n)| {
                h.join()
                    .unwrap_or_else(|_| (recorded(n), None, "unknown".into()))
            })
            .collect()
    });
    let live = asked.iter().any(|(_, live, _)| *live != Some(false));
    let said: Vec<String> = asked
        .iter()
        .map(|(n, _, s)| format!("node {} ({}) {s}", n.node_rank, n.node))
        .collect();
    let head = match (live, verdict) {
        (true, Some(v)) => v,
        (true, None) => "starting (its launch watches it)".into(),
        (false, Some(v)) => format!("ended: {v}"),
        (false, None) => "ended (no verdict recorded)".into(),
    };
    GroupRow {
        record,
        live,
        state: format!("{head}; {}", said.join("; ")),
        nodes: asked.into_iter().map(|(n, _, _)| n).collect(),
    }
}

/// `failed (node1)`: the verdict and the node it names.
fn verdict_words(o: &Outcome) -> String {
    match &o.node {
        Some(node) => format!("{} ({node})", o.verdict),
        None => o.verdict.to_string(),
    }
}

/// A node as its record knows it, before anyone asked its host.
fn recorded(n: &RecordedNode) -> NodeReport {
    NodeReport {
        node_rank: n.node_rank,
        node: n.node.clone(),
        pid: n.pid,
        exit: None,
        phase: None,
        log: n.log.clone(),
        timeline: Vec::new(),
        teardown: None,
    }
}

/// A node as its host tells it: the report, whether it lives (`None`: the host could not be
/// asked), and its state in words.
fn ask(remote: &RemoteArgs, n: &RecordedNode) -> (NodeReport, Option<bool>, String) {
    let found = remote
        .ssh_host_named(&n.node)
        .map_err(|e| e.to_string())
        .and_then(|h| h.find_run(&n.run_id).map_err(|e| e.to_string()));
    match found {
        Ok(f) => {
            let exit = f.records.exit.and_then(|e| e.exit);
            let report = NodeReport {
                node_rank: n.node_rank,
                node: n.node.clone(),
                pid: f.target.pid.or(n.pid),
                exit,
                phase: f.records.verdict.and_then(|v| v.phase),
                log: f.target.log.display().to_string(),
                timeline: Vec::new(),
                teardown: None,
            };
            let said = match (f.ended, exit) {
                (false, _) => "running".to_string(),
                (true, Some(x)) => format!("ended: {}", x.describe()),
                (true, None) => "ended".to_string(),
            };
            (report, Some(!f.ended), said)
        }
        Err(e) => (recorded(n), None, format!("unknown: {e}")),
    }
}
