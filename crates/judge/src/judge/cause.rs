//! Which line evidence names the cause of a failure. Every distinct failure hit is kept with the
//! first line that showed it; when the watch ends badly, the most specific hit wins (a named
//! signature over a `--fail-line`, the catalog's precedence order, fatal over evidence), and its
//! first line is the decisive line. The hits of one traceback chain compete as one failure.

use std::time::Duration;

use super::Judge;
use super::output::Event;
use crate::classify::{Hit, Strength};
use crate::verdict::{ExitInfo, LineRef, Signature};

/// One failure hit and the first line that showed it.
#[derive(Debug, Clone)]
pub(super) struct Evidence {
    pub(super) hit: Hit,
    pub(super) line: LineRef,
    pub(super) at: Duration,
    /// The rank that printed it, when a prefix or the launcher said.
    pub(super) rank: Option<u32>,
    /// The traceback chain it belongs to, if any (see `traceback.rs`).
    pub(super) chain: Option<u32>,
}

/// A `failed` verdict whose cause is line evidence.
#[derive(Debug, Clone)]
pub(super) struct LineFailure {
    /// The evidence that names the cause (its line is the decisive line).
    pub(super) cause: Evidence,
    /// A signature the exit adds (a signal's), reported among the secondary ones.
    pub(super) also: Option<Signature>,
    pub(super) reason: String,
    pub(super) exit: Option<ExitInfo>,
}

impl Judge {
    /// The earliest failure evidence seen that is no echo (a fatal line, a traceback's line),
    /// while there is no verdict yet: a verdict still to come may be dated by it (a multi-node
    /// group waits for this node when that is before another node's cause, see
    /// `crate::group::settle`). Any other verdict is dated when it is reached.
    pub fn pending_cause(&self) -> Option<Duration> {
        if self.verdict().is_some() {
            return None;
        }
        self.evidence
            .iter()
            .filter(|e| e.hit.strength != Strength::Echo)
            .map(|e| e.at)
            .min()
    }

    /// The line evidence that names the cause: the most specific hit. With `fatal_only`, evidence
    /// lines (a bare traceback) do not count alone.
    ///
    /// Evidence only counts up to the first fatal line: what comes on or before it can be the
    /// cause ("could not access the configuration file: Permission denied"), what comes after is a
    /// consequence (a launcher's own traceback after its worker was killed). Except in the
    /// winner's own traceback chain, and on its own line: that is one failure, so all its hits
    /// compete, and the most specific wins whatever its strength (a fatal `compile_error` wrapper
    /// does not beat the `graph_capture` or `disk_full` it wraps). Another chain (another rank's
    /// traceback) does not join in.
    pub(super) fn line_cause(&self, fatal_only: bool) -> Option<Evidence> {
        let first_fatal = self
            .evidence
            .iter()
            .filter(|e| e.hit.strength == Strength::Fatal)
            .map(|e| e.line.number)
            .min();
        let counts_alone = |e: &Evidence| {
            e.hit.strength == Strength::Fatal
                || (!fatal_only && first_fatal.is_none_or(|n| e.line.number <= n))
        };
        let winner = self.most_specific(counts_alone)?;
        let (chain, line) = (winner.chain, winner.line.number);
        let best = self
            .most_specific(|e| {
                counts_alone(e) || e.line.number == line || (chain.is_some() && e.chain == chain)
            })
            .unwrap_or(winner);
        // The decisive line is the first line that showed the winning cause (a server often logs
        // the cause, "could not bind ...: Address already in use", before its fatal summary line).
        let first = self
            .evidence
            .iter()
            .filter(|e| e.hit.signature == best.hit.signature)
            .min_by_key(|e| e.line.number)?;
        let shown = self.exception_announced_by(first).unwrap_or(first);
        Some(Evidence {
            hit: best.hit,
            line: shown.line.clone(),
            at: shown.at,
            rank: shown.rank,
            chain: shown.chain,
        })
    }

    /// A generic Python failure announced by a line of its own ("WorkerProc failed to start.",
    /// "EngineCore failed to start.": `logger.exception`, whose traceback follows) is shown by the
    /// exception line of that traceback, which says what failed ("KeyError: 'model.layers.0...'"),
    /// however many frames (vLLM: 25 to 60 lines) come between: the first exception line the same
    /// rank printed after `announcer`, within the settle window. Not for an announcer that is
    /// itself a traceback header ("Scheduler hit an exception: Traceback ..."): it names what
    /// failed.
    pub(super) fn exception_announced_by(&self, announcer: &Evidence) -> Option<&Evidence> {
        const HEADER: &str = "Traceback (most recent call last)";
        let python = Some(Signature::PythonException);
        if announcer.hit.signature != python
            || announcer.hit.strength != Strength::Fatal
            || announcer.line.text.contains(HEADER)
        {
            return None;
        }
        self.evidence
            .iter()
            .filter(|e| {
                e.hit.signature == python
                    && e.hit.strength == Strength::Evidence
                    && e.rank == announcer.rank
                    && e.line.number > announcer.line.number
                    && e.at.saturating_sub(announcer.at) <= self.cfg.fail_settle
                    && !e.line.text.contains(HEADER)
            })
            .min_by_key(|e| e.line.number)
    }

    /// The most specific of the hits that `count`, the first of equals.
    fn most_specific(&self, count: impl Fn(&Evidence) -> bool) -> Option<&Evidence> {
        let mut best: Option<&Evidence> = None;
        for e in self.evidence.iter().filter(|e| count(e)) {
            if best.is_none_or(|b| rank(&e.hit) < rank(&b.hit)) {
                best = Some(e);
            }
        }
        best
    }

    /// Line `line`, read at `at`, is the exception line of the traceback whose header was line
    /// `header`: the python_exception evidence a bare `Traceback (most recent call last):` showed
    /// is shown by the exception line (what a person reads as the error), so it becomes its first
    /// line. A fatal hit on the header stays there: it names what failed ("Scheduler hit an
    /// exception: Traceback ...", "Initialization failed. warmup error: Traceback ..."), as
    /// "EngineCore failed to start." does on a line of its own.
    pub(super) fn exception_line_shown(&mut self, header: u64, line: LineRef, at: Duration) {
        for e in &mut self.evidence {
            if e.line.number == header
                && e.hit.signature == Some(Signature::PythonException)
                && e.hit.strength == Strength::Evidence
            {
                e.line = line.clone();
                e.at = at;
            }
        }
    }

    /// Line `line`, read at `at`, is the exception raised while the one before it in its chain
    /// (`chain`, printed by `rank`) was being handled ("During handling of the above exception, another
    /// exception occurred"): it is the chain's error, so the generic python_exception evidence
    /// the chain showed is shown by it. A specific cause anywhere in the chain still wins by
    /// precedence.
    pub(super) fn handled_exception_replaced(
        &mut self,
        chain: Option<u32>,
        rank: Option<u32>,
        line: LineRef,
        at: Duration,
    ) {
        if chain.is_none() {
            return;
        }
        for e in &mut self.evidence {
            if e.chain == chain
                && e.rank == rank
                && e.hit.signature == Some(Signature::PythonException)
                && e.hit.strength == Strength::Evidence
            {
                e.line = line.clone();
                e.at = at;
            }
        }
    }

    /// "failed with SIGNATURE: hint (line N); THEN".
    pub(super) fn failure_reason(&self, ev: &Evidence, then: &str) -> String {
        let what = match ev.hit.signature {
            Some(s) => format!("{s}: {}", s.hint_for_line(&ev.line.text)),
            None => "a line matching --fail-line".to_string(),
        };
        format!("failed with {what} (line {}); {then}", ev.line.number)
    }

    /// The end of the settle window: `failed` by the most specific cause, the process still
    /// running.
    pub(super) fn decide_failure(
        &mut self,
        at: Duration,
        exit: Option<ExitInfo>,
        events: &mut Vec<Event>,
    ) {
        if let Some(cause) = self.line_cause(true).or_else(|| self.line_cause(false)) {
            let reason = self.failure_reason(&cause, "the process is still running");
            self.decide_failed(
                at,
                LineFailure {
                    cause,
                    also: None,
                    reason,
                    exit,
                },
                events,
            );
        }
    }
}

/// Sort key of a hit: named signatures first, in precedence order, fatal before evidence;
/// echoes after them, and last a line that only confirms how a process ended (`terminate called
/// after throwing`, `Segmentation fault`): when the exit was no such signal, that line is what
/// the real cause (even an echo, a watchdog's collective timeout) led to.
fn rank(hit: &Hit) -> (bool, (bool, bool, Option<Signature>, bool)) {
    let ending_line =
        hit.signature.is_some_and(|s| s.is_signal_class()) && hit.strength != Strength::Fatal;
    (ending_line, hit.precedence())
}
