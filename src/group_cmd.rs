//! `firedup run --host A --host B [...] -- COMMAND`: a multi-node run, parsed and presented
//! here, launched, watched and ended by the library's [`firedup::group`]. Also `firedup stop
//! GROUP_ID` (every node stopped, each stop verified there) and `__free-port` (the port a
//! group's node 0 offers for `{master_port}`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, bail};

use crate::group_args::{GroupArgs, ReadyOn};
use crate::judge_args::{JudgeArgs, grace_flag};
use crate::plan;
use crate::remote_args::RemoteArgs;
use crate::report::{print_outcome, transport_verdict};
use firedup::group::record::{GroupRecord, RecordedNode};
use firedup::group::{GroupNode, GroupSpec, placeholders, watch};
use firedup::host::{Host, HostError};
use firedup::session::interrupts::{AfterSignal, Heard, Interrupts, OnSignal, RunEnded};

/// `run`'s own flags a group takes: `--log`, `--env`, `--cwd`, `--keep`, `--grace`, COMMAND.
pub(crate) type GroupRunArgs = (
    Option<PathBuf>,
    Vec<String>,
    Option<PathBuf>,
    bool,
    String,
    Vec<String>,
);

/// `firedup run` with `--host` given more than once.
pub(crate) fn run(
    remote: &RemoteArgs,
    judge: &JudgeArgs,
    group: &GroupArgs,
    (log, env, cwd, keep, grace, command): GroupRunArgs,
) -> Result<i32> {
    if judge.auto_port() {
        bail!(
            "--port auto is not supported with a multi-node run: the port would be picked on this machine; give --port N"
        );
    }
    placeholders::check(&command).map_err(anyhow::Error::msg)?;
    let grace = grace_flag(&grace)?;
    let env: Vec<(String, String)> = env
        .iter()
        .map(|e| plan::parse_env(e))
        .collect::<Result<_, _>>()?;
    firedup::secrets::learn_launch(&env, &command);
    let mut opts = judge.options(false);
    opts.env = env.clone();
    let server =
        plan::resolve(&opts, &command, "", true)?.judge.mode == crate::judge::Mode::UntilReady;
    let mut ssh = Vec::new();
    for h in &remote.host {
        ssh.push(remote.ssh_host_named(h)?);
    }
    let nodes: Vec<GroupNode> = ssh
        .iter()
        .zip(&remote.host)
        .map(|(s, name)| GroupNode {
            name: name.clone(),
            host: Arc::new(s.clone()) as Arc<dyn Host>,
        })
        .collect();
    for n in &nodes {
        n.host
            .check_launch(&command, cwd.as_deref(), log.as_deref())?;
    }
    let first = remote.host[0].as_str();
    let unreachable = |e: HostError| -> Result<i32> {
        match e {
            HostError::Unreachable(reason) => {
                Ok(transport_verdict(judge.json, Some(first), reason))
            }
            HostError::Failed(e) => Err(e.into()),
        }
    };
    let master_addr = match &group.master_addr {
        Some(a) => a.clone(),
        None => match ssh[0].address() {
            Ok(a) => a,
            Err(e) => return unreachable(e),
        },
    };
    let master_port = match group.master_port {
        Some(p) => p,
        None => match ssh[0].free_port() {
            Ok(p) => p,
            Err(e) => return unreachable(e),
        },
    };
    let mut base = crate::run_cmd::launch_spec(judge, &opts, &command, cwd, env, log)?;
    base.grace_ms = Some(grace.as_millis() as u64);
    let hosts = remote.host.join(",");
    let spec_hash = crate::history::launch_hash(&base, Some(&hosts));
    let spec = GroupSpec {
        base: base.clone(),
        master_addr,
        master_port,
        ready_on_all: group.ready_on == Some(ReadyOn::All),
        grace,
    };
    let group_id = firedup::group::record::new_id();
    let names = remote.host.clone();
    let interrupts =
        Interrupts::install(AfterSignal::Exit, move |heard| interrupted(&names, &heard))?;
    let on_signal = if keep { OnSignal::Keep } else { OnSignal::Stop };
    let Some(launching) = interrupts.launching() else {
        interrupts.finish();
        bail!("interrupted before the launch: nothing was started");
    };
    let launched = firedup::group::launch(&nodes, &spec, server, &mut |host, target| {
        interrupts.register(Arc::clone(host), target, grace, on_signal);
    });
    drop(launching);
    let sessions = match launched {
        Ok(s) => s,
        Err((e, stopped)) => {
            interrupts.finish();
            if !stopped.is_empty() {
                eprintln!(
                    "firedup: the nodes launched before are stopped: {}",
                    stopped.join("; ")
                );
            }
            return unreachable(e);
        }
    };
    let record = GroupRecord {
        id: group_id.clone(),
        nodes: sessions
            .iter()
            .map(|n| RecordedNode {
                node_rank: n.node_rank,
                node: n.name.clone(),
                run_id: n.session.target().run_id.clone(),
            })
            .collect(),
    };
    record.write()?;
    if !judge.json {
        let runs: Vec<String> = record
            .nodes
            .iter()
            .map(|n| format!("node {} on {}: {}", n.node_rank, n.node, n.run_id))
            .collect();
        eprintln!("firedup: {group_id}: {}", runs.join(", "));
    }
    let ending = watch::watch(
        &group_id,
        sessions,
        server,
        spec.ready_on_all,
        keep,
        &mut |news| match news {
            watch::NodeNews::Note {
                node_rank,
                node,
                text,
            } => eprintln!("firedup: node {node_rank} ({node}): {text}"),
            watch::NodeNews::Verdict(node) => {
                let o = &node.outcome;
                eprintln!(
                    "firedup: node {} ({}): {} after {:.1}s: {}",
                    node.node_rank, node.node, o.verdict, o.elapsed_s, o.reason
                );
            }
        },
    );
    interrupts.finish();
    let outcome = ending.outcome;
    print_outcome(judge.json, &outcome, ending.teardown.as_deref(), None);
    crate::history::record_launch(
        "run",
        &base,
        &spec_hash,
        &outcome,
        ending.teardown.as_deref(),
    );
    Ok(outcome.verdict.exit_code())
}

/// What a signal ended: one line per node.
fn interrupted(names: &[String], heard: &Heard) {
    let Heard::Ended(ended) = heard else {
        return;
    };
    let signal = firedup::session::interrupts::signal_name(ended.signal);
    for (i, run) in ended.runs.iter().enumerate() {
        let said = match &run.ended {
            RunEnded::Kept | RunEnded::Cancelled => "left running (--keep)".to_string(),
            RunEnded::Stopped(Ok(stop)) => stop.describe(),
            RunEnded::Stopped(Err(e)) => format!("stopping failed: {e}"),
        };
        let name = names.get(i).map_or("?", String::as_str);
        eprintln!(
            "firedup: interrupted ({signal}): node {i} ({name}) {}: {said}",
            run.target.run_id
        );
    }
}

/// Whether `stop`'s RUN_ID names a multi-node run launched here (without `--host`).
pub(crate) fn is_group(remote: &RemoteArgs, id: &str) -> bool {
    remote.host.is_empty() && GroupRecord::find(id).is_some()
}

/// `firedup stop GROUP_ID`: every node's run stopped on its host, each stop verified there;
/// exit 0 only when nothing is left on any node.
pub(crate) fn stop(remote: &RemoteArgs, group_id: &str, grace: &str, json: bool) -> Result<i32> {
    let Some(record) = GroupRecord::find(group_id) else {
        bail!("no multi-node run {group_id} was launched from this machine");
    };
    let grace = grace_flag(grace)?;
    let mut clean = true;
    let mut nodes = Vec::new();
    for n in &record.nodes {
        let host = remote.ssh_host_named(&n.node)?;
        let (said, ok) = match host.stop(&n.run_id, grace) {
            Ok(s) => (s.describe(), s.clean()),
            Err(e) => (format!("stopping failed: {e}"), false),
        };
        clean &= ok;
        if !json {
            println!(
                "{group_id}: node {} ({}) {}: {said}",
                n.node_rank, n.node, n.run_id
            );
        }
        nodes.push(serde_json::json!({
            "node_rank": n.node_rank, "node": n.node, "run_id": n.run_id,
            "stopped": said, "clean": ok,
        }));
    }
    if json {
        println!(
            "{}",
            serde_json::json!({"run_id": group_id, "clean": clean, "nodes": nodes})
        );
    }
    Ok(if clean { 0 } else { 1 })
}

/// `__free-port`: a TCP port free on this host, on stdout.
pub(crate) fn free_port() -> Result<i32> {
    println!("{}", firedup::auto_port::pick_free_port()?);
    Ok(0)
}
