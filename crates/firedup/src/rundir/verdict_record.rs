//! `verdict.json`: the verdict the launching firedup reached (the whole verdict object: its
//! timeline, `ready_s`, probes, elapsed time), written when it reached it. A later `firedup watch
//! RUN_ID` of the ended run reports these as recorded (see [`crate::reattach`]): read again at
//! the end, the log's lines all come at once and the probes find nothing listening.

use super::{Flush, RunDir, read_json, write_json_flushed};
use crate::error::Result;
use crate::verdict::Outcome;

/// The file's name in the run directory.
const VERDICT_FILE: &str = "verdict.json";

impl RunDir {
    /// Reads `verdict.json`; `None` when no verdict was recorded (firedup died before it, or an
    /// older firedup launched the run).
    pub fn verdict(&self) -> Option<Outcome> {
        read_json(&self.path.join(VERDICT_FILE)).ok()
    }

    /// Records the run's verdict, once: the first verdict reached is the run's (a later watch
    /// of the same run reports how it ended, and does not rewrite it). Written between the
    /// verdict and `run`'s exit, so not flushed to the disk first (issue 28: 2 to 15 ms of the
    /// ready latency under load): the rename makes it whole for every reader, and one lost to a
    /// power loss reads as no verdict recorded, which [`RunDir::verdict`] already answers.
    pub fn record_verdict(&self, outcome: &Outcome) -> Result<()> {
        if self.path.join(VERDICT_FILE).exists() {
            return Ok(());
        }
        write_json_flushed(
            &self.path.join(VERDICT_FILE),
            outcome,
            Flush::LeftToTheKernel,
        )
    }
}
