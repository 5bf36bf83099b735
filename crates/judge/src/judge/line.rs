//! What one log line changes, in order: progress evidence (a new shape, a moving counter), the
//! phase, the context kept for the verdict, the failure evidence (the first fatal line starts the
//! settle window), the ready lines seen, and then whether the server is ready.

use std::time::Duration;

use super::Judge;
use super::cause::Evidence;
use super::output::Event;
use super::stage::{Settling, Stage};
use crate::classify::LineClass;
use crate::line_shape::shape_hash;
use crate::verdict::LineRef;

/// Where a line came from: the rank that printed it and the traceback chain it belongs to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct LineOrigin {
    /// The rank a prefix (or the launcher) named.
    pub(super) rank: Option<u32>,
    /// The traceback chain (see `traceback.rs`).
    pub(super) chain: Option<u32>,
}

/// How many line shapes are remembered before the set starts over (bounded memory on a log of
/// ever-new lines).
const MAX_SHAPES: usize = 65_536;

impl Judge {
    /// Line `number` with `text`, which the classifier found to mean `class`.
    pub(super) fn on_line(
        &mut self,
        at: Duration,
        number: u64,
        text: String,
        origin: LineOrigin,
        class: &LineClass,
        events: &mut Vec<Event>,
    ) {
        self.lines += 1;
        self.log_ever_seen = true;
        let line = LineRef { number, text };
        let shape = shape_hash(&line.text);
        self.line_progress(at, shape, class);
        if let Some(p) = class.phase {
            if let Some(name) = self.cfg.classifier.phase_names().get(p).cloned() {
                if self.phase.as_deref() != Some(name.as_str()) {
                    self.enter_phase(at, name, events);
                }
            }
        }
        if !class.noise {
            self.keep_context(&line, shape);
        }
        self.collect_evidence(at, &line, origin, class);
        // The decisive line of `ready` is the line that met the last ready condition: a
        // condition met again later (a ready pattern that also matches the server's idle line)
        // does not move it.
        for r in &class.ready {
            if let Some(seen) = self.ready_seen.get_mut(*r) {
                if !*seen {
                    *seen = true;
                    self.ready_line = Some(line.clone());
                }
            }
        }
        // Moved, not copied (a big log's every line was copied twice here: issue 28); nothing
        // above reads it, `check_ready` below may.
        if !class.noise {
            self.last_line = Some(line);
        }
        self.check_ready(at, events);
    }

    /// Progress evidence: a line of a shape not seen before, or a moving progress counter.
    fn line_progress(&mut self, at: Duration, shape: u64, class: &LineClass) {
        let new_shape = self.seen_shapes.insert(shape);
        if self.seen_shapes.len() > MAX_SHAPES {
            self.seen_shapes.clear();
        }
        let moved = class.progress.is_some() && class.progress != self.progress;
        if new_shape || moved {
            self.progressed(at);
        }
        if class.progress.is_some() {
            self.progress = class.progress;
        }
    }

    /// Keeps a meaningful line as context: after the first fatal line, the lines that follow it
    /// (up to the context size); before, the last lines.
    fn keep_context(&mut self, line: &LineRef, shape: u64) {
        let size = self.cfg.context_lines;
        if let Stage::Settling(s) = &mut self.stage {
            if s.after.len() < size {
                s.after.push(line.clone());
            }
            return;
        }
        // A progress bar redrawn many times is one line of context: keep its latest state.
        // Otherwise the oldest line goes once `size + 1` are kept. The line that goes lends its
        // buffer to the copy of the new one (no allocation a line once the context is full).
        let gone = if self.before_last_shape == Some(shape) && !self.before.is_empty() {
            self.before.pop_back()
        } else if self.before.len() > size {
            self.before.pop_front()
        } else {
            None
        };
        let kept = match gone {
            Some(mut old) => {
                old.number = line.number;
                old.text.clone_from(&line.text);
                old
            }
            None => line.clone(),
        };
        self.before.push_back(kept);
        self.before_last_shape = Some(shape);
    }

    /// Records each new failure hit of the line; the first fatal line starts the settle window.
    fn collect_evidence(
        &mut self,
        at: Duration,
        line: &LineRef,
        origin: LineOrigin,
        class: &LineClass,
    ) {
        for hit in &class.hits {
            // One entry per hit and rank: a healthy rank's echo does not hide the same
            // signature printed later by the rank that failed.
            if !self
                .evidence
                .iter()
                .any(|e| e.hit == *hit && e.rank == origin.rank)
            {
                self.evidence.push(Evidence {
                    hit: *hit,
                    line: line.clone(),
                    at,
                    rank: origin.rank,
                    chain: origin.chain,
                });
            }
        }
        if class.is_fatal() && self.stage.settling().is_none() {
            self.stage = Stage::Settling(Settling {
                first_fatal_at: at,
                ready_at: self.stage.ready_at(),
                decisive_context: self.before.iter().map(|l| l.text.clone()).collect(),
                after: Vec::new(),
            });
        }
    }
}
