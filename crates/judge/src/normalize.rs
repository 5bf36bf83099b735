//! A log line as a person reads it: what the classifier matches, apart from what is displayed.
//!
//! Logs reach firedup through terminals, container runtimes, launchers and log shippers, and each
//! adds its own dress: escape codes flattened to text (`#033[2m`, `^[[0m`, a literal `\x1b[`),
//! prefixes (`vllm-1  | `, `(EngineCore_0 pid=12) `, `[rank1]: `, `srun -l`'s `1: `, `> `),
//! timestamps and levels. [`normalize`] takes them off once, in one place, before classification,
//! and says which rank the prefix named; the original text is kept for display by the caller.
//!
//! Order: escapes first (they glue onto the words the prefixes are recognised by), then the
//! prefixes (`dress.rs`). A record whose level is INFO/WARNING/DEBUG keeps its header (see
//! `dress.rs`: the catalog's anchored exception patterns must keep not matching it). Indentation
//! after a removed prefix is kept.
//!
//! Pure and per line, no allocation for a line that needs no change: the prefixes are sliced
//! off, only a line with escape text is copied.

use std::borrow::Cow;

mod dress;
mod escapes;
mod interleaved;
mod records;
mod relays;
mod scan;

pub use interleaved::next_rank_print;

/// One line, normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalLine<'a> {
    /// The text to classify: the message with its dress taken off. Indentation after a removed
    /// prefix is kept (a traceback's frames and source lines are told apart by it).
    pub text: Cow<'a, str>,
    /// The rank (or shard, worker, task) a prefix named, if any.
    pub rank: Option<u32>,
    /// Whether the line began with a logging library's record header (a timestamp or a level).
    /// A line without one, and without indentation, may be the continuation of a wrapped line.
    pub record: bool,
    /// Whether that header's level is not an error (INFO, WARNING, DEBUG, TRACE, NOTICE; glog and
    /// c10's `I`/`W`): what such a record quotes is not the server's failure (see
    /// `judge/quoted.rs`).
    pub calm: bool,
}

/// `raw` (a line already cleaned of real escape sequences and invalid UTF-8) as a person reads it.
pub fn normalize(raw: &str) -> NormalLine<'_> {
    match escapes::flatten(raw) {
        Cow::Borrowed(s) => {
            let d = dress::dress(s);
            NormalLine {
                text: Cow::Borrowed(&s[d.start..d.end]),
                rank: d.rank,
                record: d.record,
                calm: d.calm,
            }
        }
        Cow::Owned(mut s) => {
            let d = dress::dress(&s);
            s.truncate(d.end);
            s.drain(..d.start);
            NormalLine {
                text: Cow::Owned(s),
                rank: d.rank,
                record: d.record,
                calm: d.calm,
            }
        }
    }
}

#[cfg(test)]
mod tests;
