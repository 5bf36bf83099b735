//! How a log file shared by several runs (appended to by one launch after another, or named by
//! a hard link) is divided between them.
//!
//! Contract: a run's part of its log file (identified by device and inode, never by path)
//! begins at the size the file had when it was launched (`meta.json`'s `log_start`; byte 0
//! without one) and ends at the first of: the file's size when the run ended (its command and
//! whatever it left running, a daemon included: the supervisor's last child), recorded by the
//! supervisor in `log_end.json`, and the start of the next launch into the same file. A
//! file some live run is writing to is never given to another launch
//! ([`RunDir::live_run_writing`]).

use serde::{Deserialize, Serialize};

use super::RunDir;
use crate::error::Result;
use crate::launched_log::FileId;

/// The size of the run's log file when the run ended (`log_end.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEnd {
    /// The log file (its identity, as opened by the supervisor).
    pub file: FileId,
    /// Bytes the file held then.
    pub size: u64,
}

impl RunDir {
    /// The recorded end of the run's part of its log, when its command has ended.
    pub fn log_end(&self) -> Option<LogEnd> {
        super::read_json(&self.path.join("log_end.json")).ok()
    }

    /// Writes `log_end.json` atomically.
    pub fn write_log_end(&self, rec: &LogEnd) -> Result<()> {
        super::write_json(&self.path.join("log_end.json"), rec)
    }

    /// Where the run's part of the log file `file` ends, when that is known: the size at its
    /// command's end, or the start of a later launch into the same file, whichever comes first.
    pub fn log_part_end(&self, file: &FileId) -> Option<u64> {
        let started = self.meta().ok()?.started_at;
        let at_exit = self.log_end().filter(|e| e.file.is(file)).map(|e| e.size);
        let next_launch = RunDir::list()
            .into_iter()
            .filter(|r| r.id != self.id)
            .filter_map(|r| r.meta().ok())
            .filter(|m| m.started_at >= started)
            .filter_map(|m| {
                let s = m.log_start?;
                let same =
                    (s.dev, s.ino) == (file.dev, file.ino) && m.log_file.is_none_or(|f| f.is(file));
                same.then_some(s.offset)
            })
            .min();
        first_end(at_exit, next_launch)
    }

    /// A live run (not this one) whose log is the file `file`, as launched.
    pub fn live_run_writing(file: &FileId) -> Option<RunDir> {
        RunDir::list().into_iter().find(|r| {
            r.exit().is_none()
                && r.meta()
                    .is_ok_and(|m| m.log_file.is_some_and(|f| f.is(file)))
                && r.is_live()
        })
    }
}

/// The earlier of two ends, either of which may be unknown.
fn first_end(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_first_end_wins() {
        // (size at exit, next launch's start) -> end
        for (a, b, end) in [
            (Some(10), Some(7), Some(7)),
            (Some(5), Some(7), Some(5)),
            (None, Some(7), Some(7)),
            (Some(5), None, Some(5)),
            (None, None, None),
        ] {
            assert_eq!(super::first_end(a, b), end);
        }
    }
}
