//! Reading one log line, in order: normalise it (escape codes flattened to text, prefixes,
//! timestamps and levels taken off; the rank a prefix named), classify the normalised text, place
//! it in the traceback structure (a source line under a frame names nothing), read it for a
//! launcher's report of a rank's ending, and then apply what it means (`line.rs`). The original
//! text is what is kept and shown.

use std::time::Duration;

use super::Judge;
use super::line::LineOrigin;
use super::output::Event;
use super::ranks::prefix_rank;
use crate::classify::Strength;
use crate::normalize::normalize;

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
        // PyTorch's `[rankN]:` prefix names the rank when the normaliser did not.
        let rank = normal.rank.or_else(|| prefix_rank(&text));
        let role = self.tracebacks.on_line(rank, &normal.text);
        role.apply(&mut class);
        let note = self
            .ranks
            .on_line(at, number, rank, &normal.text, &text, &class);
        if let Some(header) = note.echo_traceback_header {
            self.forget_echo_traceback(rank, header);
        }
        let origin = LineOrigin {
            rank,
            chain: role.chain,
        };
        drop(normal);
        self.on_line(at, number, text, origin, &class, events);
        self.last_class = Some(class);
    }

    /// The traceback whose header is line `header` (printed by `rank`) ended in an echo: its
    /// header names no cause either, and leaves room for the same signature from another line.
    fn forget_echo_traceback(&mut self, rank: Option<u32>, header: u64) {
        self.evidence.retain(|e| {
            !(e.line.number == header && e.rank == rank && e.hit.strength != Strength::Fatal)
        });
    }
}
