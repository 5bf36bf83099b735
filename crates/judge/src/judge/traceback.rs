//! A Python traceback is a structure, not a bag of lines: the lines under a `File "...", line N,
//! in f` frame are source code (a `raise RuntimeError(...)` there is not the error), the exception
//! line after the frames is, and chained tracebacks ("The above exception was the direct cause of
//! the following exception", "During handling of the above exception, another exception
//! occurred") form one failure whose root cause is chosen over the whole chain.
//!
//! Tracked per rank, so that two ranks' interleaved tracebacks do not mix.

use crate::classify::LineClass;

/// What a line is inside (or outside) a traceback.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct LineRole {
    /// A source line shown under a frame: its hits are not failures.
    pub(super) source: bool,
    /// The chain (one failure: chained tracebacks and their exception lines) the line belongs to.
    pub(super) chain: Option<u32>,
}

impl LineRole {
    /// The line's class as the traceback structure reads it: a source line names nothing.
    pub(super) fn apply(&self, class: &mut LineClass) {
        if self.source {
            class.hits.clear();
        }
    }
}

/// The tracebacks being read, per rank.
#[derive(Debug, Default)]
pub(super) struct Tracebacks {}

impl Tracebacks {
    /// The role of the next line, `text` (normalised), printed by `rank`.
    pub(super) fn on_line(&mut self, _rank: Option<u32>, _text: &str) -> LineRole {
        LineRole::default()
    }
}
