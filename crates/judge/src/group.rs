//! One verdict for a multi-node run (CONTRACT: multi-node runs), chosen from its nodes' own
//! verdicts on one clock: the group's, from its first launch; each node's times are its own
//! from its launch, so they are moved by when that launch came.
//!
//! The rule, an extension of the multi-process rule across nodes:
//! 1. the earliest cause on any node wins: a failure a line names (not an echo), a signal, a
//!    command that never started;
//! 2. a node whose processes ended badly without printing a cause comes next: its peers' echoes
//!    (collective timeouts, closed connections, launcher summaries) follow from it;
//! 3. then echoes; then nodes that only waited (`stalled`, `timed_out`): when every node only
//!    waited (or was stopped by the group while silent, its ranks' places read since its last
//!    progress: its stop's verdict never decides, its places count), the ranks' places
//!    compared across the nodes ([`across_nodes`]) name the one rank outside a collective and
//!    its node, or say that more than one was (and no rank is named); else the node whose stacks
//!    named a rank outside the collective first; then a node firedup lost contact with (its own
//!    failure to watch, never the group's cause while another node says more); last, a node the
//!    group stopped itself after another's verdict (that stop's own echo).
//!
//! Within a class the earliest wins, a lower node rank on a tie. A group where no node has
//! anything to say is fine: `succeeded` when every node succeeded, `ready` when node 0 is ready
//! (the caller only asks once every other node's processes live, or, with `--ready-on all`,
//! are ready too).

use std::time::Duration;

use crate::verdict::{NodeReport, Outcome, PhaseAt, Verdict};
use across_nodes::{Across, outside_across};

mod across_nodes;

/// One node's verdict, as the group sees it.
#[derive(Debug, Clone)]
pub struct NodeEnd {
    /// The node's rank (its position among the hosts).
    pub node_rank: u32,
    /// The host as given.
    pub node: String,
    /// The node's own verdict.
    pub outcome: Outcome,
    /// When the node was launched, from the group's first launch.
    pub launched_at: Duration,
    /// The group stopped this node after another node's verdict.
    pub stopped_by_group: bool,
}

/// How much a node's verdict says about the group, most first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Standing {
    Cause,
    SilentEnd,
    Echo,
    Waiting,
    LostContact,
    StoppedByGroup,
    Fine,
}

fn standing(n: &NodeEnd, server: bool) -> Standing {
    if n.stopped_by_group {
        return Standing::StoppedByGroup;
    }
    match n.outcome.verdict {
        // A server's other nodes serve as long as it does: one whose processes ended, even
        // with 0, has left the group.
        Verdict::Succeeded if server && n.node_rank > 0 => Standing::SilentEnd,
        Verdict::Failed if n.outcome.cause.is_some_and(|c| c.echo) => Standing::Echo,
        Verdict::Failed | Verdict::Killed | Verdict::NeverStarted => Standing::Cause,
        Verdict::Exited => Standing::SilentEnd,
        Verdict::Stalled | Verdict::TimedOut => Standing::Waiting,
        Verdict::MonitorError => Standing::LostContact,
        Verdict::Ready | Verdict::Succeeded => Standing::Fine,
    }
}

/// When the node's cause was seen (else its verdict reached), on the group's clock.
fn when(n: &NodeEnd) -> Duration {
    let own = match n.outcome.cause {
        Some(c) => c.at,
        None => Duration::from_secs_f64(n.outcome.elapsed_s.max(0.0)),
    };
    n.launched_at + own
}

/// Whether this node's verdict alone makes the group fail (the caller then gives the other
/// nodes a moment to say theirs, and stops the rest). `server`: the group serves (`--until
/// ready`), and its nodes past node 0 are watched to their end.
pub fn fails_the_group(n: &NodeEnd, server: bool) -> bool {
    standing(n, server) != Standing::Fine
}

/// The group's one verdict from every node's (`nodes` in node-rank order, each with a verdict:
/// the caller stops a node that has none and passes its verdict with `stopped_by_group`).
/// `group_id` names the run; the verdict keeps the deciding node's line, rank, reason (with the
/// node named first) and log. `server` as for [`fails_the_group`].
pub fn group_verdict(group_id: &str, nodes: &[NodeEnd], server: bool) -> Outcome {
    // A node the group stopped while it was silent, its ranks' places read since its last
    // progress, was waiting as much as one that said so: its places count, though its verdict
    // (the stop's echo) does not.
    let across = outside_across(nodes, |n| match standing(n, server) {
        Standing::Waiting => true,
        Standing::StoppedByGroup => !n.outcome.placed.is_empty(),
        _ => false,
    });
    let named = match &across {
        Across::Named { node, .. } => Some(*node),
        _ => None,
    };
    let deciding = match named.filter(|&i| standing(&nodes[i], server) == Standing::Waiting) {
        Some(i) => i,
        None => (0..nodes.len())
            .min_by_key(|&i| {
                let n = &nodes[i];
                let s = standing(n, server);
                // Among nodes that waited, one whose stacks named a rank outside the collective
                // (unless the group's places show more than one outside).
                let unnamed = s == Standing::Waiting
                    && (n.outcome.rank.is_none() || matches!(across, Across::Ambiguous(_)));
                (s, unnamed, when(n), n.node_rank)
            })
            .expect("a group has at least one node"),
    };
    let fine = standing(&nodes[deciding], server) == Standing::Fine;
    // A fine group speaks through node 0 (its server, its address).
    let speaker = if fine { &nodes[0] } else { &nodes[deciding] };
    let mut o = speaker.outcome.clone();
    o.run_id = group_id.to_string();
    o.elapsed_s = round_ms(
        nodes
            .iter()
            .map(|n| n.launched_at.as_secs_f64() + n.outcome.elapsed_s)
            .fold(0.0, f64::max),
    );
    if fine {
        o.verdict = if nodes
            .iter()
            .all(|n| n.outcome.verdict == Verdict::Succeeded)
        {
            Verdict::Succeeded
        } else {
            Verdict::Ready
        };
        o.node = None;
    } else {
        if o.verdict == Verdict::Succeeded {
            o.verdict = Verdict::Exited;
        }
        o.node = Some(speaker.node.clone());
        o.reason = format!(
            "node {} ({}): {}",
            speaker.node_rank, speaker.node, speaker.outcome.reason
        );
        match across {
            Across::Named {
                node,
                rank,
                evidence,
            } => {
                // The rank's node, also when the verdict is another's (a node stopped silent).
                o.node = Some(nodes[node].node.clone());
                if o.rank != Some(rank) || node != deciding {
                    o.reason.push_str(&format!(
                        "; rank {rank} is not inside a collective while its peers on other \
                         nodes wait in one ({evidence})"
                    ));
                }
                o.rank = Some(rank);
            }
            Across::Ambiguous(words) => {
                o.rank = None;
                o.reason.push_str(&format!("; no rank is named: {words}"));
            }
            Across::Unknown => {}
        }
    }
    o.server_running = nodes.iter().all(|n| n.outcome.server_running);
    o.nodes = Some(nodes.iter().map(report).collect());
    o
}

/// The node as the JSON verdict's `nodes` lists it.
pub fn report(n: &NodeEnd) -> NodeReport {
    NodeReport {
        node_rank: n.node_rank,
        node: n.node.clone(),
        pid: n.outcome.pid,
        exit: n.outcome.exit,
        phase: n.outcome.phase.clone(),
        log: n.outcome.log.clone(),
        timeline: n
            .outcome
            .timeline
            .iter()
            .map(|p| PhaseAt {
                phase: p.phase.clone(),
                at_s: round_ms(n.launched_at.as_secs_f64() + p.at_s),
            })
            .collect(),
        // The shell's to say: it made the stop.
        teardown: None,
    }
}

fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

pub mod settle;

#[cfg(test)]
mod tests;
