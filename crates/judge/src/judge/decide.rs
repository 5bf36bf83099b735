//! Turning a decision into the verdict: the [`Judgement`] with everything the judge knows at
//! that moment (phase, timeline, probes, GPU, context), the stage set to `Decided` and the
//! `Verdict` event. Two kinds: a [`Decision`] the caller spells out, and a failure named by the
//! line evidence ([`LineFailure`]), whose signature, secondary signatures and context come from
//! the evidence.

use std::time::Duration;

use super::Judge;
use super::cause::{Evidence, LineFailure};
use super::output::{Event, Judgement};
use super::stage::Stage;
use crate::classify::Strength;
use crate::verdict::{ExitInfo, LineRef, Signature, Verdict};

/// A verdict the caller spells out (everything but a failure named by line evidence).
#[derive(Debug, Clone)]
pub(super) struct Decision {
    pub(super) verdict: Verdict,
    pub(super) signature: Option<Signature>,
    pub(super) secondary: Vec<Signature>,
    pub(super) reason: String,
    pub(super) line: Option<LineRef>,
    pub(super) exit: Option<ExitInfo>,
    /// The rank where the root cause happened.
    pub(super) rank: Option<u32>,
}

impl Decision {
    /// `verdict` for `reason`, with no signature, decisive line or exit.
    pub(super) fn new(verdict: Verdict, reason: String) -> Decision {
        Decision {
            verdict,
            signature: None,
            secondary: Vec::new(),
            reason,
            line: None,
            exit: None,
            rank: None,
        }
    }

    /// With the rank where the root cause happened.
    pub(super) fn rank(mut self, rank: Option<u32>) -> Decision {
        self.rank = rank;
        self
    }

    /// With this decisive line.
    pub(super) fn line(mut self, line: Option<LineRef>) -> Decision {
        self.line = line;
        self
    }

    /// With how the process ended.
    pub(super) fn exit(mut self, exit: Option<ExitInfo>) -> Decision {
        self.exit = exit;
        self
    }

    /// With a signature and the other signatures seen.
    pub(super) fn signatures(
        mut self,
        signature: Option<Signature>,
        secondary: Vec<Signature>,
    ) -> Decision {
        self.signature = signature;
        self.secondary = secondary;
        self
    }
}

impl Judge {
    /// Decides `d` at `at`. A daemon followed after its launcher left is named in the reason.
    pub(super) fn decide(&mut self, at: Duration, d: Decision, events: &mut Vec<Event>) {
        let context = self.before.iter().map(|l| l.text.clone()).collect();
        let reason = match &self.followed {
            Some(f) => format!("{} ({f})", d.reason),
            None => d.reason,
        };
        let j = Judgement {
            verdict: d.verdict,
            signature: d.signature,
            secondary: d.secondary,
            reason,
            line: d.line,
            context,
            phase: self.phase.clone(),
            exit: d.exit,
            at,
            timeline: self.timeline.clone(),
            process_alive: self.alive,
            probes: self.probe_reports(),
            gpu: self.gpu.clone(),
            ready_at: self.stage.ready_at(),
            rank: d.rank,
            node: None,
            job: self.job.last.as_ref().map(Into::into),
            cause: None,
            placed: Vec::new(),
        };
        self.conclude(j, events);
    }

    /// Decides `failed` at `at` for a cause named by line evidence.
    pub(super) fn decide_failed(&mut self, at: Duration, f: LineFailure, events: &mut Vec<Event>) {
        // A cause printed while firedup stops the run for its owner's end is that stop's echo.
        if let Some((owner, _)) = self.owner_gone.filter(|(_, since)| f.cause.at >= *since) {
            self.decide_owner_gone(at, owner, f.exit, events);
            return;
        }
        // Echoes are not causes: not listed beside the cause either.
        let mut secondary: Vec<Signature> = self
            .evidence
            .iter()
            .filter(|e| e.hit.strength != Strength::Echo)
            .filter_map(|e| e.hit.signature)
            .chain(f.also)
            .filter(|s| Some(*s) != f.cause.hit.signature)
            .collect();
        secondary.sort();
        secondary.dedup();
        // Context around the decisive line: what came before it and after it.
        let mut context: Vec<String> = Vec::new();
        match self.stage.settling() {
            Some(s) => {
                context.extend(s.decisive_context.iter().cloned());
                context.extend(s.after.iter().map(|l| l.text.clone()));
            }
            None => context.extend(self.before.iter().map(|l| l.text.clone())),
        }
        // The decisive line belongs in its context, also when it came further after the first
        // fatal line than the context reaches (the exception line of a long traceback).
        if !context.contains(&f.cause.line.text) {
            context.push(f.cause.line.text.clone());
        }
        let mark = crate::verdict::CauseMark {
            at: f.cause.at,
            echo: f.cause.hit.strength == Strength::Echo,
        };
        let j = Judgement {
            cause: Some(mark),
            placed: Vec::new(),
            verdict: Verdict::Failed,
            signature: f.cause.hit.signature,
            rank: self.cause_rank(&f.cause),
            node: None,
            job: self.job.last.as_ref().map(Into::into),
            secondary,
            reason: f.reason,
            line: Some(f.cause.line),
            context,
            phase: self.phase.clone(),
            exit: f.exit,
            at,
            timeline: self.timeline.clone(),
            process_alive: self.alive,
            probes: self.probe_reports(),
            gpu: self.gpu.clone(),
            ready_at: self.stage.ready_at(),
        };
        self.conclude(j, events);
    }

    /// The rank where `cause` happened. An echo's printer is not it (its peer went first): the
    /// rank that was outside the collective, or that exited 0 under it, when known.
    fn cause_rank(&self, cause: &Evidence) -> Option<u32> {
        if cause.hit.strength != Strength::Echo {
            return cause.rank;
        }
        self.ranks
            .outside_collective
            .as_ref()
            .map(|(r, _)| *r)
            .or_else(|| self.ranks.first_clean(None).map(|e| e.rank))
    }

    /// Where each rank was at the last look at their stacks, when that look was taken since the
    /// last progress (a look taken before it shows where the ranks were then, not now); empty
    /// otherwise. A multi-node group compares these across its nodes, also of a node it stops
    /// while it is still silent ([`crate::group`]).
    pub fn places_now(&self) -> Vec<crate::rank_place::RankPlace> {
        match &self.ranks.placed {
            Some((seen, ranks)) if *seen >= self.last_progress_at => ranks.clone(),
            _ => Vec::new(),
        }
    }

    /// When the last progress evidence came (a sign of life: see `progress`), on the judge's
    /// clock.
    pub fn last_progress_at(&self) -> Duration {
        self.last_progress_at
    }

    /// The verdict is `j`: the last stage, and the last event.
    fn conclude(&mut self, mut j: Judgement, events: &mut Vec<Event>) {
        self.note_job(&mut j);
        j.placed = self.places_now();
        j.node = j
            .rank
            .and_then(|r| self.ranks.node_of(r))
            .map(str::to_string);
        events.push(Event::Verdict(Box::new(j.clone())));
        self.stage = Stage::Decided(Box::new(j));
    }
}
