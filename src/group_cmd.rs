//! `firedup run --host A --host B [...] -- COMMAND`: a multi-node run, parsed and presented
//! here, launched, watched and ended by the library's [`firedup::group`]; its record
//! (`groups/GROUP_ID.json`: what `ps`, `stop GROUP_ID` read) is kept up to date here, and its
//! verdict recorded in the history, also when a signal ends it (`group_interrupted`). Also
//! `__free-port` (the port a group's node 0 offers for `{master_port}`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Result, bail};

use crate::group_args::{GroupArgs, ReadyOn};
use crate::judge_args::{JudgeArgs, grace_flag};
use crate::plan;
use crate::remote_args::RemoteArgs;
use crate::report::{print_outcome, transport_verdict};
use firedup::group::record::{GroupRecord, RecordedNode};
use firedup::group::{GroupNode, GroupSpec, placeholders, watch};
use firedup::host::{Host, HostError};
use firedup::session::interrupts::{AfterSignal, Interrupts, OnSignal};

/// `run`'s own flags a group takes: `--log`, `--env`, `--cwd`, `--keep`, `--grace`, `--name`,
/// COMMAND.
pub(crate) struct GroupRunArgs {
    pub log: Option<PathBuf>,
    pub env: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub keep: bool,
    pub grace: String,
    pub name: Option<String>,
    pub command: Vec<String>,
}

type Flags = (
    Option<PathBuf>,
    Vec<String>,
    Option<PathBuf>,
    bool,
    String,
    Option<String>,
    Vec<String>,
);

impl From<Flags> for GroupRunArgs {
    fn from((log, env, cwd, keep, grace, name, command): Flags) -> Self {
        GroupRunArgs {
            log,
            env,
            cwd,
            keep,
            grace,
            name,
            command,
        }
    }
}

/// `firedup run` with `--host` given more than once.
pub(crate) fn run(
    remote: &RemoteArgs,
    judge: &JudgeArgs,
    group: &GroupArgs,
    args: GroupRunArgs,
) -> Result<i32> {
    let GroupRunArgs {
        log,
        env,
        cwd,
        keep,
        grace,
        name,
        command,
    } = args;
    if judge.auto_port() {
        bail!(
            "--port auto is not supported with a multi-node run: the port would be picked on this machine; give --port N (a port free on every node)"
        );
    }
    if let Some(n) = &name {
        crate::group_names::refuse_for_a_group(n)?;
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
    // The group's name is the group's (its history row, `stop NAME`), not each node run's.
    let mut recorded = base.clone();
    recorded.name = name.clone();
    let spec = GroupSpec {
        base: base.clone(),
        master_addr,
        master_port,
        ready_on_all: group.ready_on == Some(ReadyOn::All),
        grace,
    };
    let group_id = firedup::group::record::new_id();
    let mut record = GroupRecord {
        id: group_id.clone(),
        nodes: Vec::new(),
        name: name.clone(),
        command: firedup::secrets::redact_args(&command),
        started_at: crate::rundir::now_unix(),
        outcome: None,
        over: false,
    };
    let recorded_on_nodes = watch::Recorded::default();
    let context = Arc::new(Mutex::new(crate::group_interrupted::GroupContext {
        record: record.clone(),
        names: remote.host.clone(),
        spec: recorded.clone(),
        spec_hash: spec_hash.clone(),
        launched_at: std::time::Instant::now(),
        recorded: recorded_on_nodes.clone(),
    }));
    let heard_by = Arc::clone(&context);
    let interrupts = Interrupts::install(AfterSignal::Exit, move |heard| {
        crate::group_interrupted::report(&heard_by, &heard)
    })?;
    // The handler waits for each node's own verdict to be recorded there (see group_interrupted).
    interrupts.allow_report(crate::group_interrupted::REPORT_WAIT);
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
    record.nodes = sessions
        .iter()
        .map(|n| RecordedNode {
            node_rank: n.node_rank,
            node: n.name.clone(),
            run_id: n.session.target().run_id.clone(),
            pid: n.session.target().pid,
            log: n.session.target().log.display().to_string(),
        })
        .collect();
    record.write()?;
    if let Ok(mut c) = context.lock() {
        c.record = record.clone();
    }
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
        (server, spec.ready_on_all, keep),
        &recorded_on_nodes,
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
    let mut outcome = ending.outcome;
    if let Some(s) = &outcome.settled {
        eprintln!(
            "firedup: the group decided {:.1}s after its first failing node verdict ({}): {}",
            s.after_s, s.by, s.description
        );
    }
    outcome.name = name;
    record.over = !outcome.server_running;
    record.outcome = Some(outcome.clone());
    if let Err(e) = record.write() {
        eprintln!("firedup: {e}");
    }
    print_outcome(judge.json, &outcome, ending.teardown.as_deref(), None);
    crate::history::record_launch(
        "run",
        &recorded,
        &spec_hash,
        &outcome,
        ending.teardown.as_deref(),
    );
    Ok(outcome.verdict.exit_code())
}

/// `__free-port`: a TCP port free on this host, on stdout.
pub(crate) fn free_port() -> Result<i32> {
    println!("{}", firedup::auto_port::pick_free_port()?);
    Ok(0)
}
