//! A multi-node run among the other runs, through the real binary (issue 27): `ps` lists the
//! group as one entry naming its nodes, `show` and `history` give its verdict and its nodes
//! (also after Ctrl-C), `stop GROUP_ID --json` has the shape CONTRACT.md gives `stop --json`,
//! `--name` names the group, and the `run` flags a group does not take are refused up front.
//! Two real sshd on this machine are the nodes (tests/common/nodes.rs).

use crate::common;

use std::time::Duration;

use common::Env;
use common::bounded::{wait_for, wait_output};
use common::nodes::{Nodes, args, server_script};
use serde_json::Value;

/// The entry of `ps --json` (`--all` with `all`) whose run id is `id`.
fn ps_entry(env: &Env, nodes: &Nodes, id: &str, all: bool) -> Option<Value> {
    let mut a = args(&["ps", "--json"]);
    if all {
        a.push("--all".into());
    }
    let ps = nodes.fd(env, &a);
    assert_eq!(ps.code, 0, "{}", ps.explain());
    ps.json
        .as_array()
        .expect("ps --json is an array")
        .iter()
        .find(|e| e["run_id"] == id)
        .cloned()
}

/// The id of a node's run on its host, from its log's path (`runs/RUN_ID/output.log`).
fn run_of(node: &Value) -> String {
    let log = std::path::PathBuf::from(node["log"].as_str().expect("a log"));
    let dir = log
        .parent()
        .and_then(|d| d.file_name())
        .expect("runs/RUN_ID");
    dir.to_string_lossy().into_owned()
}

/// The history's rows of run `id` (`history --json`: one object a line).
fn history_rows(env: &Env, id: &str) -> Vec<Value> {
    let h = env.fd("history").json().output();
    assert_eq!(h.code, 0, "{}", h.explain());
    h.stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["run_id"] == id)
        .collect()
}

#[test]
fn a_named_group_is_one_entry_in_ps_show_and_history_and_stops_by_name_with_the_contracts_json() {
    let env = Env::new();
    let nodes = Nodes::start(&env, 2);
    let server = server_script(&env);
    let mut a = args(&["run", "--json", "--ready-line", "ready to roll"]);
    a.extend(args(&["--name", "web", "--grace", "2s"]));
    a.extend(nodes.host_args());
    a.extend(args(&["--", &server]));
    let r = nodes.fd(&env, &a);
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert_eq!(r.json["name"], "web", "{}", r.explain());
    let group = r.run_id().to_string();
    let pids: Vec<u64> = (0..2)
        .map(|i| r.json["nodes"][i]["pid"].as_u64().expect("a pid per node"))
        .collect();

    // ps: one entry naming its nodes, with the contract's names per node.
    let entry = ps_entry(&env, &nodes, &group, false).expect("the group in ps");
    assert_eq!(entry["name"], "web", "{entry}");
    let listed = entry["nodes"].as_array().expect("nodes").clone();
    assert_eq!(listed.len(), 2, "{entry}");
    for (i, n) in listed.iter().enumerate() {
        assert_eq!(n["node_rank"], i as u64, "{entry}");
        assert_eq!(n["node"], format!("node{i}"), "{entry}");
        assert_eq!(n["pid"], pids[i], "{entry}");
        assert!(n["log"].as_str().is_some_and(|l| !l.is_empty()), "{entry}");
        for key in ["exit", "phase"] {
            assert!(n.get(key).is_some(), "no {key}: {entry}");
        }
    }
    let table = nodes.fd(&env, &args(&["ps", "--wide"]));
    eprintln!("ps:\n{}", table.stdout);
    assert!(table.stdout.contains(&group), "{}", table.explain());
    assert!(
        table.stdout.contains("node 1 (node1) running"),
        "{}",
        table.explain()
    );

    // show and history: the group's verdict and its nodes, by id and by name.
    for id in [group.as_str(), "web"] {
        let s = env.fd("show").arg(id).output();
        assert_eq!(s.code, 0, "{}", s.explain());
        eprintln!("show {id}:\n{}", s.stdout);
        assert!(
            s.stdout.starts_with(&format!("{group}: ready")),
            "{}",
            s.explain()
        );
        assert!(s.stdout.contains("node0,node1"), "{}", s.explain());
        assert!(s.stdout.contains("phases "), "{}", s.explain());
        for (i, pid) in pids.iter().enumerate() {
            let line = format!("node {i}    node{i}: pid {pid}");
            assert!(s.stdout.contains(&line), "no {line:?}\n{}", s.explain());
        }
    }
    let rows = history_rows(&env, &group);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        rows[0]["outcome"]["nodes"].as_array().map(Vec::len),
        Some(2)
    );
    // Node 0's phases, on the group's clock (node 0 is launched first): ready, when the group was.
    let phases: Vec<&str> = r.json["nodes"][0]["timeline"]
        .as_array()
        .expect("node 0's timeline")
        .iter()
        .filter_map(|p| p["phase"].as_str())
        .collect();
    assert_eq!(phases.last(), Some(&"ready"), "{}", r.explain());
    let at = r.json["nodes"][0]["timeline"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["at_s"]
        .clone();
    assert_eq!(at, r.json["ready_s"], "{}", r.explain());

    // stop NAME --json: the contract's `stop --json` object, about every node.
    let s = nodes.fd(&env, &args(&["stop", "web", "--json", "--grace", "2s"]));
    assert_eq!(s.code, 0, "{}", s.explain());
    for key in [
        "run_id",
        "clean",
        "never_started",
        "stopped",
        "escalated",
        "survivors",
        "escaped",
        "port",
        "port_free",
        "port_holders",
        "gpu_after_mib",
        "gpu_released",
        "took_s",
        "job",
        "description",
    ] {
        assert!(s.json.get(key).is_some(), "no {key}: {}", s.explain());
    }
    assert_eq!(s.json["run_id"], group.as_str(), "{}", s.explain());
    assert_eq!(s.json["clean"], true, "{}", s.explain());
    assert!(s.json["stopped"].is_array(), "{}", s.explain());
    let stopped = s.json["nodes"].as_array().expect("nodes").clone();
    assert_eq!(stopped.len(), 2, "{}", s.explain());
    for (i, n) in stopped.iter().enumerate() {
        assert_eq!(n["node_rank"], i as u64, "{}", s.explain());
        assert_eq!(n["node"], format!("node{i}"), "{}", s.explain());
        assert_eq!(n["clean"], true, "{}", s.explain());
        assert!(n["stopped"].is_array(), "{}", s.explain());
    }
    for p in pids {
        assert!(
            !common::alive(p),
            "pid {p} runs after stop\n{}",
            s.explain()
        );
    }
    // Over: gone from ps, still in ps --all.
    assert!(ps_entry(&env, &nodes, &group, false).is_none());
    let ended = ps_entry(&env, &nodes, &group, true).expect("the group in ps --all");
    assert!(
        ended["state"]
            .as_str()
            .unwrap_or_default()
            .starts_with("ended"),
        "{ended}"
    );
}

#[test]
fn ctrl_c_of_a_group_records_it_in_the_history_as_interrupted_with_its_nodes() {
    let env = Env::new();
    let nodes = Nodes::start(&env, 2);
    let mut a = args(&["run", "--until", "exit", "--grace", "2s"]);
    a.extend(nodes.host_args());
    a.extend(args(&["--", "sleep", "300"]));
    let child = nodes.spawn(&env, &a);
    let groups = env.state.path().join("groups");
    // The record names its nodes once every node is launched.
    let group = wait_for("the group's record", Duration::from_secs(120), || {
        let entry = std::fs::read_dir(&groups).ok()?.flatten().find(|e| {
            e.file_name().to_string_lossy().ends_with(".json")
                && std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("\"node1\""))
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        Some(name.trim_end_matches(".json").to_string())
    });
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = wait_output(child, Duration::from_secs(120));
    let explain = format!("{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.code, 130, "{explain}");
    let rows = history_rows(&env, &group);
    assert_eq!(rows.len(), 1, "{rows:?}\n{explain}");
    assert_eq!(rows[0]["interrupted"], true, "{rows:?}");
    let listed = rows[0]["outcome"]["nodes"]
        .as_array()
        .expect("nodes")
        .clone();
    assert_eq!(listed.len(), 2, "{rows:?}");
    let s = env.fd("show").arg(&group).output();
    assert!(
        s.stdout.starts_with(&format!("{group}: interrupted")),
        "{}",
        s.explain()
    );
    assert!(s.stdout.contains("node 1    node1: pid"), "{}", s.explain());
    for n in &listed {
        let pid = n["pid"].as_u64().expect("a pid per node");
        assert!(
            !common::alive(pid),
            "pid {pid} runs after Ctrl-C\n{explain}"
        );
    }
    // logs and watch of the group name each node's own run.
    for command in ["logs", "watch"] {
        let l = env.firedup(&[command, &group]);
        assert_eq!(l.code, 2, "{}", l.explain());
        let node0 = format!("firedup {command} --host node0 {}", run_of(&listed[0]));
        assert!(l.stderr.contains(&node0), "no {node0:?}\n{}", l.explain());
    }
    // Every node's stop was clean: the group is over, listed only with --all.
    assert!(ps_entry(&env, &nodes, &group, false).is_none());
    assert!(ps_entry(&env, &nodes, &group, true).is_some());
}

#[test]
fn the_run_flags_a_group_does_not_take_are_refused_up_front_saying_what_to_do() {
    let env = Env::new();
    let owner = std::process::id().to_string();
    let cases: [(&[&str], &str); 6] = [
        (&["--then", "true"], "firedup stop GROUP_ID"),
        (&["--detach"], "in the background"),
        (&["--notify"], "--ready-line"),
        (&["--owner", &owner], "firedup stop GROUP_ID"),
        (&["--port", "auto"], "give --port N"),
        (&["--slurm"], "--sbatch-arg=--nodes=N"),
    ];
    for (flag, instead) in cases {
        let mut a = vec!["run"];
        a.extend_from_slice(flag);
        a.extend(["--host", "node0", "--host", "node1", "--", "true"]);
        let r = env.firedup(&a);
        assert_eq!(r.code, 2, "{flag:?}: {}", r.explain());
        assert!(r.stderr.contains(flag[0]), "{flag:?}: {}", r.explain());
        assert!(r.stderr.contains(instead), "{flag:?}: {}", r.explain());
        assert_eq!(r.stderr.lines().count(), 1, "{flag:?}: {}", r.explain());
        assert!(!env.state.path().join("groups").exists(), "{}", r.explain());
    }
}
