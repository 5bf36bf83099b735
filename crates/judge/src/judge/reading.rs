//! Reading one log line, in order: normalise it (escape codes flattened to text, prefixes,
//! timestamps and levels taken off; the rank a prefix named), classify the normalised text, place
//! it in the traceback structure (a source line under a frame names nothing; an exception line takes
//! over its header's python_exception evidence), read it for a
//! launcher's report of a rank's ending, and then apply what it means (`line.rs`). The original
//! text is what is kept and shown.

use std::time::Duration;

use super::Judge;
use super::line::LineOrigin;
use super::output::Event;
use crate::normalize::normalize;
use crate::verdict::LineRef;

impl Judge {
    /// Log line `number`, as the follower read it.
    pub(super) fn read_line(
        &mut self,
        at: Duration,
        number: u64,
        text: String,
        events: &mut Vec<Event>,
    ) {
        let normal = normalize(&text);
        let mut class = self.cfg.classifier.classify(&normal.text);
        let role = self
            .tracebacks
            .on_line(number, normal.rank, &normal.text, &text, &class);
        role.apply(&mut class);
        self.ranks
            .on_line(at, number, normal.rank, &normal.text, &text);
        let origin = LineOrigin {
            rank: normal.rank,
            chain: role.chain,
        };
        drop(normal);
        // An exception line takes over the python_exception evidence of its traceback's header.
        let exception = role.exception_of.map(|header| (header, text.clone()));
        self.on_line(at, number, text, origin, &class, events);
        if let Some((header, text)) = exception {
            self.exception_line_shown(header, LineRef { number, text }, at);
        }
        self.last_class = Some(class);
    }
}
