//! `verdict.json`: the verdict the launching firedup reached (the whole verdict object: its
//! timeline, `ready_s`, probes, elapsed time), written when it reached it. A later `firedup watch
//! RUN_ID` of the ended run reports these as recorded (see [`crate::reattach`]): read again at
//! the end, the log's lines all come at once and the probes find nothing listening.

use std::fs;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Flush, RunDir, read_json, write_json_file};
use crate::error::{Context, Result};
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
    /// ready latency under load): the link into place makes it whole for every reader, and one
    /// lost to a power loss reads as no verdict recorded, which [`RunDir::verdict`] already
    /// answers.
    pub fn record_verdict(&self, outcome: &Outcome) -> Result<()> {
        let path = self.path.join(VERDICT_FILE);
        if path.exists() {
            return Ok(());
        }
        // Written whole under a name of this writer's own, then linked into place: a link fails
        // where the name exists, so of two writers at once (a `run` and a `watch` of the same
        // run) the first verdict stays; a rename would let the later one replace it.
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let n = WRITES.fetch_add(1, Ordering::Relaxed);
        let tmp = self
            .path
            .join(format!("{VERDICT_FILE}.{}.{n}.tmp", std::process::id()));
        write_json_file(&tmp, outcome, Flush::LeftToTheKernel)?;
        let placed = match fs::hard_link(&tmp, &path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
            // A file system without hard links: renamed, as before (the later writer wins there).
            Err(_) => fs::rename(&tmp, &path),
        };
        let _ = fs::remove_file(&tmp);
        placed.with_context(|| format!("cannot write {}", path.display()))
    }
}
