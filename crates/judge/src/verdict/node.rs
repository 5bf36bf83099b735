//! What a multi-node run's verdict says of its nodes (CONTRACT: `node`, `nodes`), and what the
//! group needs of each node's own verdict to choose between them: when its cause was seen and
//! whether that cause was only an echo of another failure.

use serde::{Deserialize, Serialize};

use super::ExitInfo;

/// One node of a multi-node run, in the JSON verdict's `nodes` (node-rank order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    /// The node's rank (its position among the hosts given).
    pub node_rank: u32,
    /// The host as given (or the scheduler's node name).
    pub node: String,
    /// The node's watched process (its supervisor's command), when known.
    pub pid: Option<u32>,
    /// How that process ended, when it did.
    pub exit: Option<ExitInfo>,
    /// The last startup phase the node reached.
    pub phase: Option<String>,
    /// The node's log (a path on that node).
    pub log: String,
    /// The phases the node reached, on the group's clock (from the group's launch, as the
    /// verdict's `elapsed_s`): additive, empty where not known.
    #[serde(default)]
    pub timeline: Vec<super::PhaseAt>,
    /// What ending the node found (additive): its stop, verified on that node as a single
    /// `--host` run's is; null where nothing was stopped (serving, kept) or not known yet.
    #[serde(default)]
    pub teardown: Option<NodeTeardown>,
}

/// A node's teardown, as its stop found it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeTeardown {
    /// Nothing of the node's run is left there; null when the stop could not be made (the
    /// node out of reach).
    pub clean: Option<bool>,
    /// What the stop found, in words.
    pub description: String,
}

/// When the line that decided a `failed` verdict was seen, and whether it was an echo (what a
/// healthy peer prints after another process failed): a group chooses the earliest cause over
/// every node, and an echo never over a cause. Not part of the JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CauseMark {
    /// When the decisive line was seen, from the node's launch.
    pub at: std::time::Duration,
    /// Whether the decisive line is an echo.
    pub echo: bool,
}

/// How a failed multi-node run's verdict came to be decided while other nodes still ran
/// (additive field `settled`, only on a group's verdict that failed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupSettled {
    /// `every_node`: every node had its own verdict; `evidence`: every node still running had
    /// read its log and checked its processes past the deciding cause with no earlier cause of
    /// its own; `bound`: the bounded wait ended first (a node that could not say so: a lost link,
    /// or one with an earlier cause of its own still settling).
    pub by: String,
    /// Seconds from the first node verdict that failed the group to the decision.
    pub after_s: f64,
    /// The same in words.
    pub description: String,
}
