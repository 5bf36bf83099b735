//! The rank outside a collective, named across a group's nodes (pure). Each node says where its
//! ranks were when they had all been silent a while ([`crate::rank_place`]); a node with one rank
//! has nothing of its own to compare against, so the group compares them all: when every node
//! only waited, every node's places are known, and exactly one rank of the whole group is
//! outside a collective while every other is inside one, that rank (and its node) is named.
//!
//! Nobody is named otherwise: a node that did not only wait (it failed, was lost, was stopped by
//! the group), a node whose stacks were not read, a rank whose place is not known, one rank
//! number on two nodes (not global ranks), no rank outside. Two or more ranks outside is said as
//! such, so that no node's own naming of one of them stands for the group's (a wrong rank is worse
//! than none).

use crate::rank_place::Place;

use super::NodeEnd;

/// What the nodes' rank places say together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Across {
    /// One rank outside, every other inside: its node (index in the group), the rank, and the
    /// evidence in words.
    Named {
        node: usize,
        rank: u32,
        evidence: String,
    },
    /// Every node only waited and more than one rank was outside a collective: in words.
    Ambiguous(String),
    /// Nothing to say.
    Unknown,
}

/// How many peers the evidence names; the rest are counted.
const SHOWN: usize = 4;

/// The places of `nodes` compared (see the module doc); `waited`: whether a node only waited
/// (`stalled`, `timed_out`).
pub(super) fn outside_across(nodes: &[NodeEnd], waited: impl Fn(&NodeEnd) -> bool) -> Across {
    if nodes.len() < 2 || !nodes.iter().all(waited) {
        return Across::Unknown;
    }
    // (node index, rank, place) over the whole group.
    let placed: Vec<(usize, u32, &Place)> = nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.outcome.placed.iter().map(move |p| (i, p.rank, &p.place)))
        .collect();
    let on = |i: usize| format!("node {} ({})", nodes[i].node_rank, nodes[i].node);
    let outside: Vec<(usize, u32, &str)> = placed
        .iter()
        .filter_map(|&(i, r, p)| match p {
            Place::Outside(how) => Some((i, r, how.as_str())),
            _ => None,
        })
        .collect();
    if outside.len() >= 2 {
        let said: Vec<String> = outside
            .iter()
            .take(SHOWN)
            .map(|&(i, r, how)| format!("rank {r} {how} on {}", on(i)))
            .collect();
        return Across::Ambiguous(format!(
            "{} ranks are outside a collective ({}{})",
            outside.len(),
            said.join(", "),
            more(outside.len())
        ));
    }
    let [(node, rank, how)] = outside[..] else {
        return Across::Unknown;
    };
    let mut ranks: Vec<u32> = placed.iter().map(|&(_, r, _)| r).collect();
    ranks.sort_unstable();
    ranks.dedup();
    let every_node_read = nodes.iter().all(|n| !n.outcome.placed.is_empty());
    if !every_node_read || ranks.len() != placed.len() {
        return Across::Unknown;
    }
    let mut peers = Vec::new();
    for &(i, r, p) in &placed {
        match p {
            Place::Inside(w) => peers.push(format!("rank {r} {w} on {}", on(i))),
            Place::Outside(_) => {}
            Place::Unknown => return Across::Unknown,
        }
    }
    let shown: Vec<String> = peers.iter().take(SHOWN).cloned().collect();
    let evidence = format!(
        "rank {rank} {how} on {} while {}{}",
        on(node),
        shown.join(", "),
        more(peers.len())
    );
    Across::Named {
        node,
        rank,
        evidence,
    }
}

fn more(count: usize) -> String {
    match count.saturating_sub(SHOWN) {
        0 => String::new(),
        n => format!(" and {n} more ranks"),
    }
}
