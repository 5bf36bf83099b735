//! A multi-node run (CONTRACT: multi-node runs): one COMMAND started on several hosts as one
//! run, node rank = the host's position. Each node is a normal single-host run ([`Session`]:
//! its own supervisor, log and agent there), launched with its placeholders filled in and its
//! `FIREDUP_NODE_RANK`, `FIREDUP_NNODES`, `FIREDUP_MASTER_ADDR` and `FIREDUP_MASTER_PORT` set
//! ([`placeholders`]); the nodes are watched together to one verdict ([`watch`], deciding by
//! the judge's [`firedup_judge::group`] rule) and torn down together. A node launch that fails
//! stops the nodes already launched. The group is recorded here ([`record`]) for `stop GROUP_ID`.
//!
//! In server mode, node 0 is judged as the single-host run would be (its readiness conditions:
//! its HTTP probe, its ready line); the other nodes are watched to their end (sglang's and
//! vLLM's other nodes serve only a dummy health endpoint, or nothing): the group is ready once
//! node 0 is and every other node's processes live. With `ready_on_all`, every node is judged
//! by its own readiness conditions and the group is ready once all are.

pub mod placeholders;
pub mod record;
pub mod watch;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::host::{Host, HostError};
use crate::launch::LaunchSpec;
use crate::session::{Session, stop_in_words};
use crate::target::Target;
use placeholders::NodeVars;

/// One host of a group.
#[derive(Debug, Clone)]
pub struct GroupNode {
    /// The host as given.
    pub name: String,
    /// How it is reached.
    pub host: Arc<dyn Host>,
}

/// What to launch on every node.
#[derive(Debug, Clone)]
pub struct GroupSpec {
    /// The command, its placeholders not filled in yet, and what it is judged by.
    pub base: LaunchSpec,
    /// Where node 0 is reached (`{master_addr}`).
    pub master_addr: String,
    /// The rendezvous port on node 0 (`{master_port}`).
    pub master_port: u16,
    /// `--ready-on all`: every node is judged by its own readiness conditions.
    pub ready_on_all: bool,
    /// The grace between SIGTERM and SIGKILL of each node's stop.
    pub grace: Duration,
}

/// One node, launched.
#[derive(Debug)]
pub struct NodeSession {
    /// Its position among the hosts.
    pub node_rank: u32,
    /// The host as given.
    pub name: String,
    /// The node's run.
    pub session: Session,
    /// When it was launched, from the group's first launch.
    pub launched_at: Duration,
}

/// The spec node `node_rank` of `nnodes` is launched with.
pub fn node_spec(spec: &GroupSpec, node_rank: u32, nnodes: u32, server: bool) -> LaunchSpec {
    let vars = NodeVars {
        node_rank,
        nnodes,
        master_addr: spec.master_addr.clone(),
        master_port: spec.master_port,
    };
    let mut s = spec.base.clone();
    s.command = vars.fill(&spec.base.command);
    s.env.extend(vars.env());
    s.judging.env.extend(vars.env());
    if server && node_rank > 0 && !spec.ready_on_all {
        // Watched to its end: its processes must live while the group serves.
        s.judging.until_exit = true;
        s.judging.no_probe = true;
        s.judging.ready_lines.clear();
        s.judging.hold = None;
        s.judging.ready_request = None;
        s.judging.http = None;
        s.mode = crate::judge::Mode::UntilExit;
    }
    s
}

/// Launches every node in node-rank order; `registered` hears of each run as soon as it exists
/// (a signal handler ends them all). A launch that fails stops the nodes launched before it,
/// and its error is returned with what their stops found.
pub fn launch(
    nodes: &[GroupNode],
    spec: &GroupSpec,
    server: bool,
    registered: &mut dyn FnMut(&Arc<dyn Host>, &Target),
) -> Result<Vec<NodeSession>, (HostError, Vec<String>)> {
    let nnodes = nodes.len() as u32;
    let specs: Vec<LaunchSpec> = (0..nnodes)
        .map(|i| node_spec(spec, i, nnodes, server))
        .collect();
    // Every node's plan first: a flag one node's plan refuses launches nothing anywhere.
    for s in &specs {
        crate::plan::resolve(&s.judging, &s.command, "", true)
            .map_err(|e| (HostError::failed(e), Vec::new()))?;
    }
    let began = Instant::now();
    let mut launched: Vec<NodeSession> = Vec::new();
    for ((i, node), s) in nodes.iter().enumerate().zip(specs) {
        let node_rank = i as u32;
        let launched_at = began.elapsed();
        match Session::launch(Arc::clone(&node.host), &s, &mut |t| {
            registered(&node.host, t)
        }) {
            Ok(session) => launched.push(NodeSession {
                node_rank,
                name: node.name.clone(),
                session: session.with_grace(spec.grace),
                launched_at,
            }),
            Err(e) => {
                let stopped = launched
                    .iter()
                    .map(|n| {
                        let (said, _) = stop_in_words(
                            n.session.host().as_ref(),
                            &n.session.target().run_id,
                            spec.grace,
                        );
                        format!("node {} ({}): {said}", n.node_rank, n.name)
                    })
                    .collect();
                return Err((e, stopped));
            }
        }
    }
    Ok(launched)
}
