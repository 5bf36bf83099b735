//! Where one rank of a run was when every rank of its node had been silent for a while: inside
//! a collective (waiting for its peers), outside one (in its own code, asleep, stopped), or not
//! known. The shell reads it from the rank's stack (`crates/firedup/src/rank_stacks.rs`) and
//! tells the judge ([`crate::judge::Observation::RankPlaces`]); a multi-node run's rule
//! compares them across nodes ([`crate::group`]), where a node with one rank has nothing of its
//! own to compare against. Serializable: a remote node's agent streams them.

use serde::{Deserialize, Serialize};

/// Where a rank's main thread was, with the evidence in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Place {
    /// Inside a collective, or waiting the way a rank in one waits; how, in words (`is in
    /// all_reduce (torch/distributed/distributed_c10d.py:2806)`, `waits in futex_do_wait`).
    Inside(String),
    /// Outside any collective; how, in words (`sleeps in hrtimer_nanosleep`).
    Outside(String),
    /// Its stack could not be read, or does not tell (running, in torch code that may wait on
    /// a collective issued earlier).
    Unknown,
}

/// One rank's place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankPlace {
    /// The rank its environment (or title) named: the global rank under torchrun.
    pub rank: u32,
    /// Where it was.
    pub place: Place,
}
