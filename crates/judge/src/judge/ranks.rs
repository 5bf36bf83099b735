//! Ranks of a multi-process launch (torchrun, tensor-parallel servers, TGI shards, `srun` tasks):
//! how each rank ended, as its launcher reported it in the log (torchrun's `failed (exitcode: -9)
//! local_rank: 1 (pid: ...)` and its `Root Cause` block) or as the shell saw it live (a process of
//! the run with `RANK`/`LOCAL_RANK`/`SLURM_PROCID` in its environment), and which rank was outside
//! a collective while its peers waited in one.

use std::time::Duration;

use crate::verdict::{ExitInfo, LineRef};

/// How one rank ended.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RankEnding {
    /// The rank.
    pub(super) rank: u32,
    /// Its exit code or signal.
    pub(super) exit: Option<ExitInfo>,
    /// The launcher's line that reported it (None when seen live).
    pub(super) line: Option<LineRef>,
    /// When it was learned.
    pub(super) at: Duration,
}

/// What is known of the ranks.
#[derive(Debug, Default)]
pub(super) struct Ranks {
    /// Endings, in the order they were learned.
    pub(super) endings: Vec<RankEnding>,
    /// A rank seen outside a collective while its peers waited in one, with the evidence.
    pub(super) outside_collective: Option<(u32, String)>,
}

impl Ranks {
    /// Line `number` (normalised `text`, printed by `rank` if a prefix said so), read for a
    /// launcher's report of a rank's ending.
    pub(super) fn on_line(
        &mut self,
        _at: Duration,
        _number: u64,
        _rank: Option<u32>,
        _text: &str,
        _original: &str,
    ) {
    }

    /// The shell saw rank `rank` end with `exit`.
    pub(super) fn on_rank_ended(&mut self, at: Duration, rank: u32, exit: Option<ExitInfo>) {
        if !self.endings.iter().any(|e| e.rank == rank) {
            self.endings.push(RankEnding {
                rank,
                exit,
                line: None,
                at,
            });
        }
    }
}
