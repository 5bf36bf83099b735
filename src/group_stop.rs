//! `firedup stop GROUP_ID` (or the group's `--name`): every node's run stopped on its host at
//! once, each stop verified there; exit 0 only when nothing is left on any node, and the group's
//! record then says it is over. The exit code is a single stop's, over the nodes: 1 when a
//! survivor was found on any node; else 2 when firedup itself failed on a node; else 7
//! (`monitor_error`, as `stop --host HOST` of an unreachable host) when a node could not be
//! reached, its reason said on stderr with what to do: the reachable nodes are still stopped
//! and verified. `--json` prints the object CONTRACT.md gives for `stop --json`
//! about the whole group (`stopped` and `survivors` gathered from every node, each survivor with
//! its `node`; `port`, `port_free`, `gpu_after_mib` null: the nodes are other hosts), plus
//! `nodes`: each node's own stop object with its `node_rank` and `node`.

use std::time::Instant;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use crate::judge_args::grace_flag;
use crate::remote_args::RemoteArgs;
use crate::verdict::Verdict;
use firedup::group::record::{GroupRecord, RecordedNode};
use firedup::host::{Host, HostError, RunStop};

/// Whether `stop`'s RUN_ID names a multi-node run launched here (without `--host`): a group's
/// id, or its name where no run here has that name.
pub(crate) fn is_group(remote: &RemoteArgs, id: &str) -> bool {
    remote.host.is_empty()
        && (id.starts_with("group-") || crate::rundir::RunDir::open(id).is_err())
        && GroupRecord::find(id).is_some()
}

/// Why a node's stop could not be done.
#[derive(Debug)]
enum NotStopped {
    /// The host could not be reached or used (SSH, the remote firedup).
    Unreachable(String),
    /// firedup's own failure there (the run unknown on that host).
    Failed(String),
}

impl std::fmt::Display for NotStopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotStopped::Unreachable(e) | NotStopped::Failed(e) => f.write_str(e),
        }
    }
}

impl From<HostError> for NotStopped {
    fn from(e: HostError) -> Self {
        match e {
            HostError::Unreachable(reason) => NotStopped::Unreachable(reason),
            HostError::Failed(e) => NotStopped::Failed(e.to_string()),
        }
    }
}

/// One node's stop: what its host found, or why it could not be asked.
struct NodeStop<'a> {
    node: &'a RecordedNode,
    stop: Result<RunStop, NotStopped>,
}

impl NodeStop<'_> {
    fn said(&self) -> String {
        match &self.stop {
            Ok(s) => s.describe(),
            Err(e) => format!("stopping failed: {e}"),
        }
    }

    fn clean(&self) -> bool {
        self.stop.as_ref().is_ok_and(RunStop::clean)
    }

    fn json(&self) -> Value {
        let mut v = match &self.stop {
            Ok(s) => crate::stop_json::stop_json(&self.node.run_id, s, &Default::default()),
            Err(_) => json!({
                "run_id": self.node.run_id, "clean": false, "never_started": false,
                "stopped": [], "escalated": false, "survivors": [], "escaped": null,
                "port": null, "port_free": null, "port_holders": null, "gpu_after_mib": null,
                "gpu_released": null, "took_s": null, "job": null, "description": self.said(),
            }),
        };
        v["node_rank"] = json!(self.node.node_rank);
        v["node"] = json!(self.node.node);
        v
    }
}

/// `firedup stop GROUP_ID`: see the module doc.
pub(crate) fn stop(remote: &RemoteArgs, group_id: &str, grace: &str, json: bool) -> Result<i32> {
    let Some(mut record) = GroupRecord::find(group_id) else {
        bail!("no multi-node run {group_id} was launched from this machine");
    };
    let grace = grace_flag(grace)?;
    let mut hosts = Vec::new();
    for n in &record.nodes {
        hosts.push(remote.ssh_host_named(&n.node)?);
    }
    let began = Instant::now();
    let stops: Vec<NodeStop> = std::thread::scope(|scope| {
        let handles: Vec<_> = record
            .nodes
            .iter()
            .zip(&hosts)
            .map(|(node, host)| {
                scope.spawn(move || NodeStop {
                    node,
                    stop: host.stop(&node.run_id, grace).map_err(NotStopped::from),
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a node's stop does not panic"))
            .collect()
    });
    let took = began.elapsed();
    let clean = stops.iter().all(NodeStop::clean);
    let id = record.id.clone();
    if json {
        println!("{}", group_stop_json(&id, &stops, took.as_secs_f64()));
    } else {
        for s in &stops {
            let n = s.node;
            println!(
                "{id}: node {} ({}) {}: {}",
                n.node_rank,
                n.node,
                n.run_id,
                s.said()
            );
        }
    }
    for s in &stops {
        if let Err(e) = &s.stop {
            let n = s.node;
            eprintln!(
                "firedup: node {} ({}) was not stopped: {e}; the other nodes' stops are above: run `firedup stop {id}` again once {} can be reached",
                n.node_rank, n.node, n.node
            );
        }
    }
    if clean && !record.over {
        record.over = true;
        if let Err(e) = record.write() {
            eprintln!("firedup: {e}");
        }
    }
    Ok(exit_code(&stops))
}

/// A single stop's exit code over the nodes (see the module doc).
fn exit_code(stops: &[NodeStop]) -> i32 {
    let survived = stops
        .iter()
        .any(|s| s.stop.as_ref().is_ok_and(|s| !s.clean()));
    let failed = |unreachable: bool| {
        stops.iter().any(|s| match &s.stop {
            Err(NotStopped::Unreachable(_)) => unreachable,
            Err(NotStopped::Failed(_)) => !unreachable,
            Ok(_) => false,
        })
    };
    if survived {
        1
    } else if failed(false) {
        2
    } else if failed(true) {
        Verdict::MonitorError.exit_code()
    } else {
        0
    }
}

/// The group's stop object (see the module doc).
fn group_stop_json(id: &str, stops: &[NodeStop], took_s: f64) -> Value {
    let nodes: Vec<Value> = stops.iter().map(NodeStop::json).collect();
    let gathered = |key: &str| -> Vec<Value> {
        nodes
            .iter()
            .flat_map(|n| n[key].as_array().cloned().unwrap_or_default())
            .collect()
    };
    let survivors: Vec<Value> = nodes
        .iter()
        .flat_map(|n| {
            let node = n["node"].clone();
            n["survivors"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |mut s| {
                    s["node"] = node.clone();
                    s
                })
        })
        .collect();
    let escaped: Vec<u64> = nodes.iter().filter_map(|n| n["escaped"].as_u64()).collect();
    let description: Vec<String> = stops
        .iter()
        .map(|s| format!("node {} ({}): {}", s.node.node_rank, s.node.node, s.said()))
        .collect();
    json!({
        "run_id": id,
        "clean": stops.iter().all(NodeStop::clean),
        "never_started": stops.iter().all(|s| s.stop.as_ref().is_ok_and(|s| s.never_started)),
        "stopped": gathered("stopped"),
        "escalated": nodes.iter().any(|n| n["escalated"] == json!(true)),
        "survivors": survivors,
        "escaped": (!escaped.is_empty()).then(|| escaped.iter().sum::<u64>()),
        "port": null,
        "port_free": null,
        "port_holders": null,
        "gpu_after_mib": null,
        "gpu_released": null,
        "took_s": (took_s * 1000.0).round() / 1000.0,
        "job": null,
        "description": description.join("; "),
        "nodes": nodes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use firedup::{StopReport, SweepNote};
    use std::time::Duration;

    fn node(rank: u32) -> RecordedNode {
        RecordedNode {
            node_rank: rank,
            node: format!("node{rank}"),
            run_id: format!("run-{rank}"),
            pid: Some(100 + rank),
            log: format!("/logs/{rank}.log"),
        }
    }

    fn stopped(targeted: Vec<u32>, survivors: Vec<(u32, String)>) -> Result<RunStop, NotStopped> {
        Ok(RunStop {
            report: StopReport {
                targeted,
                escalated: !survivors.is_empty(),
                survivors,
                took: Duration::from_millis(500),
                swept: Some(SweepNote::default()),
                job: None,
            },
            never_started: false,
        })
    }

    #[test]
    fn the_groups_object_gathers_every_nodes_stop() {
        let nodes = [node(0), node(1), node(2)];
        // (each node's stop) → (clean, stopped, escalated, survivors' nodes)
        let cases: Vec<(
            Vec<Result<RunStop, NotStopped>>,
            bool,
            Vec<u32>,
            bool,
            Vec<&str>,
        )> = vec![
            (
                vec![stopped(vec![1, 2], vec![]), stopped(vec![3], vec![])],
                true,
                vec![1, 2, 3],
                false,
                vec![],
            ),
            (
                vec![
                    stopped(vec![1], vec![]),
                    stopped(vec![5], vec![(5, "srv".into())]),
                ],
                false,
                vec![1, 5],
                true,
                vec!["node1"],
            ),
            (
                vec![
                    stopped(vec![1], vec![]),
                    Err(NotStopped::Unreachable("node1 unreachable".into())),
                ],
                false,
                vec![1],
                false,
                vec![],
            ),
        ];
        for (i, (results, clean, pids, escalated, survivor_nodes)) in cases.into_iter().enumerate()
        {
            let stops: Vec<NodeStop> = nodes
                .iter()
                .zip(results)
                .map(|(node, stop)| NodeStop { node, stop })
                .collect();
            let v = group_stop_json("group-abc123", &stops, 1.0);
            assert_eq!(v["run_id"], "group-abc123", "case {i}");
            assert_eq!(v["clean"], clean, "case {i}: {v}");
            assert_eq!(v["stopped"], json!(pids), "case {i}: {v}");
            assert_eq!(v["escalated"], escalated, "case {i}: {v}");
            let got: Vec<&str> = v["survivors"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|s| s["node"].as_str())
                .collect();
            assert_eq!(got, survivor_nodes, "case {i}: {v}");
            assert!(v["port"].is_null() && v["gpu_after_mib"].is_null(), "{v}");
            assert_eq!(v["nodes"].as_array().unwrap().len(), stops.len(), "{v}");
            for (rank, n) in v["nodes"].as_array().unwrap().iter().enumerate() {
                assert_eq!(n["node_rank"], rank, "case {i}: {v}");
                assert_eq!(n["run_id"], format!("run-{rank}"), "case {i}: {v}");
            }
        }
    }

    #[test]
    fn the_exit_code_is_a_single_stops_over_the_nodes() {
        let nodes = [node(0), node(1)];
        let unreachable = || Err(NotStopped::Unreachable("node1: connection refused".into()));
        let failed = || Err(NotStopped::Failed("no run x here".into()));
        let survivor = || stopped(vec![5], vec![(5, "srv".into())]);
        let clean = || stopped(vec![1], vec![]);
        // (node 0's stop, node 1's stop) → exit code
        let cases: Vec<(
            Result<RunStop, NotStopped>,
            Result<RunStop, NotStopped>,
            i32,
        )> = vec![
            (clean(), clean(), 0),
            (clean(), survivor(), 1),
            (clean(), unreachable(), 7),
            (survivor(), unreachable(), 1),
            (clean(), failed(), 2),
            (failed(), unreachable(), 2),
        ];
        for (i, (a, b, code)) in cases.into_iter().enumerate() {
            let stops = vec![
                NodeStop {
                    node: &nodes[0],
                    stop: a,
                },
                NodeStop {
                    node: &nodes[1],
                    stop: b,
                },
            ];
            assert_eq!(exit_code(&stops), code, "case {i}");
        }
    }
}
