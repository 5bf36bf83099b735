//! How a multi-node run ends, through the real binary (issue 27's leftovers): `stop GROUP_ID`
//! with a node out of reach exits as `stop --host` of an unreachable host does (7), the
//! reachable nodes still stopped; `--name` refused as a single run's is while a live run or
//! group has it; Ctrl-C leaves each node's run directory with its verdict; a matrix cell over
//! several hosts is refused, saying what to do instead. Two real sshd on
//! this machine are the nodes (tests/common/nodes.rs).

use crate::common;

use std::time::Duration;

use common::Env;
use common::bounded::{wait_for, wait_output};
use common::nodes::{Nodes, args, server_script};

/// A two-node server group, ready: its run and (name) its pids.
fn ready_group(env: &Env, nodes: &Nodes, name: Option<&str>) -> (common::Run, Vec<u64>) {
    let mut a = args(&["run", "--json", "--ready-line", "ready to roll"]);
    a.extend(args(&["--grace", "2s"]));
    if let Some(n) = name {
        a.extend(args(&["--name", n]));
    }
    a.extend(nodes.host_args());
    a.extend(args(&["--", &server_script(env)]));
    let r = nodes.fd(env, &a);
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    let pids = (0..2)
        .map(|i| r.json["nodes"][i]["pid"].as_u64().expect("a pid per node"))
        .collect();
    (r, pids)
}

#[test]
fn stop_group_id_with_a_node_out_of_reach_stops_the_others_and_exits_as_an_unreachable_host() {
    let env = Env::new();
    let mut nodes = Nodes::start(&env, 2);
    let (r, pids) = ready_group(&env, &nodes, None);
    let group = r.run_id().to_string();
    // Node 1 can no longer be reached (its sshd is down); its run goes on there.
    nodes.sshd[1].stop();
    let s = nodes.fd(&env, &args(&["stop", &group, "--grace", "2s"]));
    // As `stop --host HOST` of a host that cannot be reached: monitor_error's 7, not 1
    // ("something survived": nothing is known of node 1).
    assert_eq!(s.code, 7, "{}", s.explain());
    assert!(
        s.stderr.contains("node 1 (node1) was not stopped"),
        "{}",
        s.explain()
    );
    assert!(
        s.stderr.contains(&format!("firedup stop {group}")),
        "{}",
        s.explain()
    );
    assert!(
        !common::alive(pids[0]),
        "node 0 runs after the stop\n{}",
        s.explain()
    );
    assert!(common::alive(pids[1]), "{}", s.explain());
    // Reachable again: the same stop finishes the group.
    nodes.sshd[1].restart();
    let s = nodes.fd(&env, &args(&["stop", &group, "--grace", "2s"]));
    assert_eq!(s.code, 0, "{}", s.explain());
    assert!(
        !common::alive(pids[1]),
        "node 1 runs after the stop\n{}",
        s.explain()
    );
}

/// The group records under the state directory.
fn group_records(env: &Env) -> usize {
    std::fs::read_dir(env.state.path().join("groups")).map_or(0, |d| {
        d.flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .count()
    })
}

#[test]
fn a_name_is_refused_for_a_group_or_a_run_while_a_live_group_or_run_has_it() {
    let env = Env::new();
    let nodes = Nodes::start(&env, 2);
    let (r, _) = ready_group(&env, &nodes, Some("web"));
    let group = r.run_id().to_string();
    // A second group of that name: refused before anything is launched, as a single run is.
    let mut a = args(&["run", "--until", "exit", "--name", "web"]);
    a.extend(nodes.host_args());
    a.extend(args(&["--", "true"]));
    let again = nodes.fd(&env, &a);
    assert_eq!(again.code, 2, "{}", again.explain());
    assert!(
        again.stderr.contains(&group) && again.stderr.contains("firedup stop web"),
        "{}",
        again.explain()
    );
    assert_eq!(group_records(&env), 1, "{}", again.explain());
    // A run here of that name: `stop web` would mean either.
    let single = env.firedup(&["run", "--until", "exit", "--name", "web", "--", "true"]);
    assert_eq!(single.code, 2, "{}", single.explain());
    assert!(single.stderr.contains(&group), "{}", single.explain());
    // A group's id is never a name.
    let as_id = env.firedup(&["run", "--until", "exit", "--name", &group, "--", "true"]);
    assert_eq!(as_id.code, 2, "{}", as_id.explain());
    // A live run here has a name: a group may not take it.
    let solo = env.firedup(&[
        "run",
        "--name",
        "solo",
        "--ready-line",
        "up",
        "--",
        "sh",
        "-c",
        "echo up; sleep 300",
    ]);
    assert_eq!(solo.code, 0, "{}", solo.explain());
    let mut a = args(&["run", "--until", "exit", "--name", "solo"]);
    a.extend(nodes.host_args());
    a.extend(args(&["--", "true"]));
    let taken = nodes.fd(&env, &a);
    assert_eq!(taken.code, 2, "{}", taken.explain());
    assert!(
        taken.stderr.contains("still running"),
        "{}",
        taken.explain()
    );
    assert_eq!(group_records(&env), 1, "{}", taken.explain());
    for id in ["solo", "web"] {
        let s = nodes.fd(&env, &args(&["stop", id, "--grace", "2s"]));
        assert_eq!(s.code, 0, "{}", s.explain());
    }
    // Once the group is over, its name is free again.
    let after = env.firedup(&["run", "--until", "exit", "--name", "web", "--", "true"]);
    assert_eq!(after.code, 0, "{}", after.explain());
}

#[test]
fn ctrl_c_of_a_group_leaves_each_nodes_run_with_its_stop_as_its_recorded_verdict() {
    let env = Env::new();
    let nodes = Nodes::start(&env, 2);
    let mut a = args(&["run", "--until", "exit", "--grace", "2s"]);
    a.extend(nodes.host_args());
    a.extend(args(&["--", "sleep", "300"]));
    let child = nodes.spawn(&env, &a);
    let groups = env.state.path().join("groups");
    let record: serde_json::Value =
        wait_for("the group's record", Duration::from_secs(120), || {
            let entry = std::fs::read_dir(&groups).ok()?.flatten().find(|e| {
                e.file_name().to_string_lossy().ends_with(".json")
                    && std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("\"node1\""))
            })?;
            serde_json::from_str(&std::fs::read_to_string(entry.path()).ok()?).ok()
        });
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = wait_output(child, Duration::from_secs(120));
    let explain = format!("{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.code, 130, "{explain}");
    for (i, n) in record["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .enumerate()
    {
        let run_id = n["run_id"].as_str().expect("a run id");
        // The node's own record (its host's run directory) holds a verdict.
        let recorded = nodes
            .remote_state
            .join("runs")
            .join(run_id)
            .join("verdict.json");
        let text = std::fs::read_to_string(&recorded)
            .unwrap_or_else(|e| panic!("node {i}: no {} ({e})\n{explain}", recorded.display()));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        // The node's own watch's verdict once the interrupt stopped it.
        assert_eq!(v["verdict"], "killed", "node {i}: {v}\n{explain}");
        assert!(
            v["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("stopped it"),
            "node {i}: {v}\n{explain}"
        );
        // What the node's host says of it: ended, with that verdict, not running or unknown.
        let host = format!("node{i}");
        let w = nodes.fd(&env, &args(&["watch", "--json", "--host", &host, run_id]));
        eprintln!("watch --host {host} {run_id}: {}", w.explain());
        assert_eq!(
            (&w.json["verdict"], &w.json["reason"]),
            (&v["verdict"], &v["reason"]),
            "node {i}: {}\n{explain}",
            w.explain()
        );
        assert_eq!(w.json["server_running"], false, "{}", w.explain());
        let ps = nodes.fd(&env, &args(&["ps", "--json", "--all", "--host", &host]));
        let entry = ps
            .json
            .as_array()
            .and_then(|a| a.iter().find(|e| e["run_id"] == run_id).cloned());
        eprintln!("ps --host {host}: {entry:?}");
        let state = entry
            .as_ref()
            .and_then(|e| e["state"].as_str())
            .unwrap_or_default()
            .to_string();
        assert!(state.starts_with("ended"), "node {i}: {}", ps.explain());
    }
}

#[test]
fn a_matrix_cell_over_several_hosts_is_refused_before_anything_starts_saying_what_to_do() {
    let env = Env::new();
    let file = env.path("group.toml");
    std::fs::write(
        &file,
        "[base]\ncommand = [\"true\"]\nuntil = \"exit\"\nhost = [\"node0\", \"node1\"]\n\n[[axis]]\nenv = \"A\"\nvalues = [\"1\", \"2\"]\n",
    )
    .unwrap();
    let flags: [&[&str]; 3] = [
        &["matrix", "--host", "node0", "--host", "node1"],
        &["matrix", "--host", "node0,node1"],
        &["matrix", file.to_str().unwrap()],
    ];
    for given in flags {
        let mut a = given.to_vec();
        if given.len() > 2 {
            a.extend(["--axis", "env:A=1,2", "--", "true"]);
        }
        let r = env.firedup(&a);
        assert_eq!(r.code, 2, "{given:?}: {}", r.explain());
        assert!(
            r.stderr
                .contains("multi-node group as a cell is not supported")
                && r.stderr.contains("firedup run --host A --host B"),
            "{given:?}: {}",
            r.explain()
        );
        assert!(!env.state.path().join("runs").exists(), "{}", r.explain());
    }
}

#[test]
fn after_a_node_fails_each_nodes_verified_teardown_is_in_the_verdicts_nodes() {
    let env = Env::new();
    let nodes = Nodes::start(&env, 2);
    let script = env.script(
        "job.sh",
        "if [ \"$FIREDUP_NODE_RANK\" = 1 ]; then sleep 1; echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB'; exit 1; fi\nsleep 300",
    );
    let mut a = args(&["run", "--json", "--until", "exit", "--grace", "2s"]);
    a.extend(nodes.host_args());
    a.extend(args(&["--", &script]));
    let r = nodes.fd(&env, &a);
    assert_eq!((r.code, r.verdict()), (1, "failed"), "{}", r.explain());
    assert_eq!(r.json["node"], "node1", "{}", r.explain());
    for i in 0..2 {
        let t = &r.json["nodes"][i]["teardown"];
        // Node 0 stopped by the group, node 1's leftovers by its own end: each verified there.
        assert_eq!(t["clean"], true, "node {i}: {}", r.explain());
        assert!(
            t["description"].as_str().is_some_and(|d| !d.is_empty()),
            "node {i}: {}",
            r.explain()
        );
        let pid = r.json["nodes"][i]["pid"].as_u64().expect("a pid");
        assert!(!common::alive(pid), "node {i}: {}", r.explain());
    }
}
