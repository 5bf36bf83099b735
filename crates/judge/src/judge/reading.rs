//! Reading one log line, in order: normalise it (escape codes flattened to text, prefixes,
//! timestamps and levels taken off; the rank a prefix named), classify the normalised text, place
//! it in the traceback structure (a source line under a frame names nothing; an exception line
//! takes over its header's python_exception evidence), read it for a
//! launcher's report of a rank's ending (and whether a traceback ended in an echo), join it to
//! the line before when the two are one hard-wrapped message (`wrapped.rs`), and then apply what
//! it means (`line.rs`). The original text is what is kept and shown.
//!
//! A line that holds two ranks' prints (`[rank0]: foo[rank1]: RuntimeError: ...`) is read part by
//! part, each with its own rank, and applied once; each failure hit keeps the rank (and chain) of
//! the part that showed it.

use std::time::Duration;

use super::Judge;
use super::inner_cause::keep_inner_cause;
use super::line::LineOrigin;
use super::output::Event;
use super::quoted::calm_hits;
use super::ranks::{message_rank, prefix_rank};
use super::traceback::{LineRole, is_raise_statement};
use crate::classify::{Hit, LineClass, Strength};
use crate::normalize::{next_rank_print, normalize};
use crate::verdict::LineRef;

/// At most this many parts are read from one line (bounded work on a pathological line).
const MAX_PARTS: usize = 16;

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
        if next_rank_print(&normal.text).is_some() {
            drop(normal);
            self.read_interleaved(at, number, text, events);
            return;
        }
        // PyTorch's `[rankN]:` prefix names the rank when the normaliser did not. A bare line
        // (neither a rank prefix nor a record header) inside a traceback that a rank's record
        // opened continues it: sglang's `[time TP1] ` heads only a record's first line, its
        // traceback follows bare.
        let rank = match normal.rank.or_else(|| prefix_rank(&text)) {
            Some(r) => Some(r),
            None if !normal.record
                && self.record_rank.is_some()
                && self.tracebacks.is_open(self.record_rank) =>
            {
                self.record_rank
            }
            None => None,
        };
        if rank.is_some() || normal.record {
            self.record_rank = rank;
        }
        let (mut class, origin, role) =
            self.read_part(at, number, &normal.text, rank, normal.calm, &text);
        let joined = self
            .wraps
            .join(&self.cfg.classifier, &normal, &class, role.source);
        self.wraps.hold(number, &text, &normal, &class, role.source);
        drop(normal);
        let Some(joined) = joined else {
            // An exception line takes over the python_exception evidence of its traceback's header.
            let exception = role.exception_of.map(|header| (header, text.clone()));
            self.on_line(at, number, text, origin, &class, events);
            if let Some((header, text)) = exception {
                let line = LineRef { number, text };
                if role.handled_before {
                    self.handled_exception_replaced(origin.chain, origin.rank, line.clone(), at);
                }
                self.exception_line_shown(header, line, at);
            }
            self.last_class = Some(class);
            return;
        };
        // A failure only the two halves together show: evidence at the first half's line.
        class.hits.extend(joined.hits.iter().copied());
        sort_hits(&mut class.hits);
        let first_new = self.evidence.len();
        self.on_line(at, number, text, origin, &class, events);
        for e in &mut self.evidence[first_new..] {
            if joined.hits.contains(&e.hit) {
                e.line = joined.line.clone();
                e.rank = joined.rank;
            }
        }
        self.last_class = Some(class);
    }

    /// One part of line `number` (all of it, unless ranks' prints interleave on it): its class
    /// as the traceback structure reads it, where it came from, and its role in a traceback.
    /// The ranks learn from it here.
    fn read_part(
        &mut self,
        at: Duration,
        number: u64,
        part: &str,
        rank: Option<u32>,
        calm: bool,
        original: &str,
    ) -> (LineClass, LineOrigin, LineRole) {
        let mut class = self.cfg.classifier.classify(part);
        calm_hits(&self.cfg.classifier, part, calm, &mut class);
        keep_inner_cause(&self.cfg.classifier, part, &mut class);
        let mut role = self
            .tracebacks
            .on_line(number, rank, part, original, &class);
        if !class.hits.is_empty() && is_raise_statement(part) {
            role.source = true;
        }
        role.apply(&mut class);
        let note = self.ranks.on_line(at, number, rank, part, original, &class);
        if let Some(header) = note.echo_traceback_header {
            self.forget_echo_traceback(rank, header);
        }
        if note.oom {
            self.oom.get_or_insert_with(|| original.to_string());
        }
        // A failure line with no prefix may name its printer in its own words.
        let named = || {
            class
                .hits
                .iter()
                .any(|h| h.strength != Strength::Echo)
                .then(|| message_rank(part))
                .flatten()
        };
        let origin = LineOrigin {
            rank: rank.or_else(named),
            chain: role.chain,
        };
        (class, origin, role)
    }

    /// Line `number`, which holds more than one rank's print: each part is normalised, classified
    /// and placed on its own; the line is applied once, with every part's hits, its origin the
    /// part with the most specific hit; each hit's evidence then gets its own part's origin.
    fn read_interleaved(
        &mut self,
        at: Duration,
        number: u64,
        text: String,
        events: &mut Vec<Event>,
    ) {
        let mut parts: Vec<(String, Option<u32>, bool)> = Vec::new();
        let first = normalize(&text);
        let (mut rest, mut rank, mut calm) = (first.text.into_owned(), first.rank, first.calm);
        while let Some(p) = next_rank_print(&rest).filter(|_| parts.len() + 1 < MAX_PARTS) {
            parts.push((rest[..p].to_string(), rank, calm));
            let next = normalize(&rest[p..]);
            (rest, rank, calm) = (next.text.into_owned(), next.rank, next.calm);
        }
        parts.push((rest, rank, calm));
        let mut merged = LineClass {
            noise: true,
            ..LineClass::default()
        };
        let mut origins: Vec<(Vec<Hit>, LineOrigin)> = Vec::new();
        let mut exceptions = Vec::new();
        for (part, rank, calm) in &parts {
            let (class, origin, role) = self.read_part(at, number, part, *rank, *calm, &text);
            exceptions.extend(role.exception_of);
            merged.hits.extend(class.hits.iter().copied());
            merged.ready.extend(class.ready.iter().copied());
            merged.phase = class.phase.or(merged.phase);
            merged.progress = merged.progress.or(class.progress);
            merged.noise &= class.noise;
            origins.push((class.hits, origin));
        }
        sort_hits(&mut merged.hits);
        merged.ready.sort_unstable();
        merged.ready.dedup();
        let origin_of = |hit: &Hit| {
            origins
                .iter()
                .find(|(hits, _)| hits.contains(hit))
                .map(|(_, o)| *o)
        };
        let origin = merged
            .strongest()
            .and_then(|h| origin_of(&h))
            .unwrap_or(origins[0].1);
        self.wraps.release();
        let first_new = self.evidence.len();
        let shown = LineRef {
            number,
            text: text.clone(),
        };
        self.on_line(at, number, text, origin, &merged, events);
        for e in &mut self.evidence[first_new..] {
            if let Some(o) = origin_of(&e.hit) {
                e.rank = o.rank;
                e.chain = o.chain;
            }
        }
        for header in exceptions {
            self.exception_line_shown(header, shown.clone(), at);
        }
        self.last_class = Some(merged);
    }

    /// The traceback whose header is line `header` (printed by `rank`) ended in an echo: its
    /// header names no cause either, and leaves room for the same signature from another line.
    fn forget_echo_traceback(&mut self, rank: Option<u32>, header: u64) {
        self.evidence.retain(|e| {
            !(e.line.number == header && e.rank == rank && e.hit.strength != Strength::Fatal)
        });
    }
}

/// Hits most specific first, each once.
fn sort_hits(hits: &mut Vec<Hit>) {
    hits.sort_by_key(|h| h.precedence());
    hits.dedup();
}

#[cfg(test)]
mod tests;
