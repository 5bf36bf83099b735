//! The root cause of a multi-process launch that ended (CONTRACT: the multi-process rule): the
//! first rank to fail, with the cause it printed or the signal or exit it ended with; the other
//! ranks' collective errors, the SIGTERMs the launcher sent and its own summary are echoes.
//!
//! In order, once the process ended (not with 0) and a rank's ending or the launcher's own signal
//! is known (`ranks.rs`):
//! 1. a cause (not an echo, not a signal's line) printed by the first rank that failed (by any
//!    rank when that rank's own error was an echo of a peer's end: a launcher may list a healthy
//!    rank first), or by no rank in particular before the launcher reported that ending, is
//!    `failed` with that cause; lines printed after the launcher was sent a signal are its
//!    consequences, and a traceback chain that ends in a report of a rank's ending is that
//!    report (not a cause);
//! 2. the launcher sent a signal before any rank failed: `killed` with that signal's signature;
//! 3. the first rank that failed printed only a collective error (its peer ended or stalled
//!    first): `failed` with that echo's signature, naming the rank that was outside the
//!    collective or that exited 0 under it, when known;
//! 4. the first rank that failed ended by a signal: `killed`, with the signal's signature;
//! 5. it exited (even with 0) while its peers still needed it: `failed` with `rank_exited`.
//!
//! The first rank that failed is the first whose failure was learned, except that a rank stopped
//! by SIGTERM (SIGINT, SIGHUP) moments before another rank's failure was learned is that failure's
//! consequence. A rank whose status was lost (its parent reaped it first: vLLM's "exit code:
//! None") in a run where the OOM killer killed a process ended by the OOM killer's SIGKILL.
//!
//! `exit` is the root-cause rank's exit where it is known, else the process's.

use std::time::Duration;

use super::Judge;
use super::cause::{Evidence, LineFailure};
use super::decide::Decision;
use super::output::Event;
use super::ranks::{EndingSource, RankEnding};
use crate::classify::{Hit, Strength};
use crate::mode::Mode;
use crate::verdict::{ExitInfo, Signature, Verdict, signal_name};

/// How soon after a rank stopped by SIGTERM (SIGINT, SIGHUP) another rank's failure may be
/// learned and still be the first failure: a launcher stops the other ranks within moments of
/// reaping a dead one, and one watcher thread may run later than another on a loaded machine;
/// a launcher's grace before it SIGKILLs a rank that ignored the SIGTERM is longer (torchrun's is
/// 30 s).
const STOPPED_AFTER_PEER: Duration = Duration::from_secs(2);

/// The signature of an end by signal `sig` (`oom`: the kernel's OOM killer was seen).
pub(super) fn signal_signature(sig: i32, oom: bool) -> Option<Signature> {
    match sig {
        9 if oom => Some(Signature::OomKilled),
        9 => Some(Signature::Sigkill),
        11 => Some(Signature::Segfault),
        4 => Some(Signature::IllegalInstruction),
        6 => Some(Signature::Abort),
        1 | 2 | 15 => Some(Signature::Terminated),
        _ => None,
    }
}

impl Judge {
    /// Decides by the ranks (see the module doc): when the process ended with `exit`, or at the
    /// end of the settle window (`exit` None); `launcher` says in words how the launcher stands.
    /// False when nothing is known of the ranks and the ordinary rules apply.
    pub(super) fn decide_by_ranks(
        &mut self,
        at: Duration,
        exit: Option<ExitInfo>,
        launcher: &str,
        events: &mut Vec<Event>,
    ) -> bool {
        // A server that exits 0 after its launcher reported that a rank died (vLLM's front end
        // shuts down cleanly once its engine core is gone) ended by that rank's failure: a server
        // never ends well. A job's exit 0 stands (torchrun restarts a failed worker group and
        // can still succeed).
        let clean_exit = exit.is_some_and(|e| e.code == Some(0));
        let server_lost_a_rank =
            self.cfg.mode == Mode::UntilReady && self.first_failed_rank().is_some();
        if !self.ranks.any_ending() || (clean_exit && !server_lost_a_rank) {
            return false;
        }
        let failed = self.first_failed_rank();
        // The first rank to fail is the one whose failure the log shows first (a fatal line or a
        // traceback's exception line that is no echo): the log orders the ranks' prints finer than
        // a launcher does (torchrun stamps failures in whole seconds and names the lowest rank of
        // those within one). Without one, the first rank the launcher reported failed, unless its
        // own error was an echo (a peer ended first): then any rank's printed cause may be it.
        // A rank that printed a cause is the root even when no launcher reported its own end
        // (torchrun names the first process that exited, which can be a peer that rank's error
        // took down: two ranks on one GPU, the NCCL error printed by rank 0, "local_rank: 1"
        // reported): its ending is then not known, and the process's exit stands for it.
        let printed_first = self.first_printed_failure_rank().map(|r| {
            self.ranks.ending_of(r).cloned().unwrap_or(RankEnding {
                rank: r,
                exit: None,
                line: None,
                at,
                source: EndingSource::Launcher,
                engine_core: false,
            })
        });
        let reported = failed.as_ref().filter(|f| self.echo_of(f.rank).is_none());
        let root = printed_first.as_ref().or(reported);
        let signal = self.ranks.launcher_signal.clone();
        // The launcher was signalled before any rank failed: the ranks' endings are its doing.
        let signalled_first = signal
            .as_ref()
            .filter(|s| failed.as_ref().is_none_or(|f| s.at <= f.at));
        if let Some(cause) = self.rank_cause(root, failed.as_ref()) {
            let rank = cause.rank.or(root.map(|f| f.rank));
            let ending = rank.and_then(|r| self.ranks.ending_of(r)).cloned();
            let rank_exit = ending.as_ref().and_then(|e| e.exit).or(exit);
            let then = match (rank, &ending) {
                (Some(r), Some(e)) => format!("rank {r} then ended with {}", describe(e.exit)),
                (Some(r), None) => format!("on rank {r}"),
                (None, _) => "on no rank in particular".to_string(),
            };
            let reason = self.failure_reason(&cause, &format!("{then}; {launcher}"));
            let also = rank_exit
                .and_then(|e| e.effective_signal())
                .and_then(|s| signal_signature(s, self.oom.is_some()));
            let f = LineFailure {
                cause: Evidence { rank, ..cause },
                also,
                reason,
                exit: rank_exit,
            };
            self.decide_failed(at, f, events);
            return true;
        }
        if let Some(s) = signalled_first {
            let reason = format!(
                "killed: the launcher was sent {} (line {}) and shut its workers down; {launcher}",
                signal_name(s.signal),
                s.line.number,
            );
            let d = Decision::new(Verdict::Killed, reason)
                .signatures(signal_signature(s.signal, false), Vec::new())
                .line(Some(s.line.clone()))
                .exit(exit);
            self.decide(at, d, events);
            return true;
        }
        if let Some(f) = failed.or_else(|| self.ranks.first_clean(None).cloned()) {
            if let Some(echo) = self.echo_of(f.rank) {
                self.decide_echo_of_peer(at, &f, echo, exit, launcher, events);
            } else {
                self.decide_rank_ending(at, &f, exit, launcher, events);
            }
            return true;
        }
        self.decide_cut_summary(at, exit, launcher, events)
    }

    /// Only torchrun's list of the other failures is known (its summary was cut before the
    /// root-cause entry, and no rank printed a cause): those are the ranks the launcher stopped
    /// or lost after the first failure, so none of their signals is the run's own. `failed`
    /// with `rank_exited`, no rank, saying which ranks ended how and that the root-cause entry
    /// is missing.
    fn decide_cut_summary(
        &mut self,
        at: Duration,
        exit: Option<ExitInfo>,
        launcher: &str,
        events: &mut Vec<Event>,
    ) -> bool {
        let others: Vec<&RankEnding> = self
            .ranks
            .endings
            .iter()
            .filter(|e| e.source == EndingSource::OtherFailure)
            .collect();
        let Some(last) = others.iter().rev().find_map(|e| e.line.clone()) else {
            return false;
        };
        let listed: Vec<String> = others
            .iter()
            .map(|e| format!("rank {} ended with {}", e.rank, describe(e.exit)))
            .collect();
        let s = Signature::RankExited;
        let reason = format!(
            "failed with {s}: the launcher's failure summary lists {} among the failures other than the first (line {}), and its root-cause entry is missing (the summary was cut): which rank failed first, and how, is not known: {}; {launcher}",
            listed.join(", "),
            last.number,
            s.hint()
        );
        let d = Decision::new(Verdict::Failed, reason)
            .signatures(Some(s), Vec::new())
            .line(Some(last))
            .exit(exit);
        self.decide(at, d, events);
        true
    }

    /// The cause the root-cause rank printed: the most specific evidence that is not an echo nor
    /// a signal's line, printed by `root` (any rank when it is not known), or by no rank in
    /// particular before the launcher reported the first failure (`failed`); never a line after
    /// the launcher was sent a signal.
    fn rank_cause(
        &self,
        root: Option<&RankEnding>,
        failed: Option<&RankEnding>,
    ) -> Option<Evidence> {
        let signal_line = self.ranks.launcher_signal.as_ref().map(|s| s.line.number);
        // A traceback chain whose exception reports a rank's ending is that report: the
        // exceptions chained before it are how the launcher noticed (sglang 0.5's EOFError from a
        // dead scheduler's pipe, then "Rank 0 scheduler died during initialization (exit code:
        // -9)").
        let reporting_chains: Vec<u32> = self
            .evidence
            .iter()
            .filter(|e| self.ranks.is_report_line(e.line.number))
            .filter_map(|e| e.chain)
            .collect();
        let counts = |e: &&Evidence| {
            if e.hit.strength == Strength::Echo
                || e.hit.signature.is_some_and(|s| s.is_signal_class())
                || signal_line.is_some_and(|l| e.line.number > l)
                || e.chain.is_some_and(|c| reporting_chains.contains(&c))
            {
                return false;
            }
            match (e.rank, root, failed) {
                (Some(r), Some(root), _) => r == root.rank,
                (Some(_), None, _) => true,
                (None, _, Some(f)) => match &f.line {
                    Some(l) => e.line.number < l.number,
                    None => e.at <= f.at,
                },
                (None, _, None) => true,
            }
        };
        let best = self
            .evidence
            .iter()
            .filter(counts)
            .min_by_key(|e| e.hit.precedence())?;
        let first = self
            .evidence
            .iter()
            .filter(counts)
            .find(|e| e.hit.signature == best.hit.signature)?;
        // A generic failure announced on its own line is shown by its exception line (cause.rs).
        let shown = self.exception_announced_by(first).unwrap_or(first);
        Some(Evidence {
            hit: best.hit,
            ..shown.clone()
        })
    }

    /// The rank whose failure the log shows first: the earliest fatal line or traceback line
    /// with a cause (not an echo, not a signal's line) that a rank printed.
    fn first_printed_failure_rank(&self) -> Option<u32> {
        self.evidence
            .iter()
            .filter(|e| {
                e.rank.is_some()
                    && e.hit.strength != Strength::Echo
                    && !e.hit.signature.is_some_and(|s| s.is_signal_class())
                    && (e.hit.strength == Strength::Fatal || e.chain.is_some())
            })
            .min_by_key(|e| e.line.number)
            .and_then(|e| e.rank)
    }

    /// The first rank that failed: the first failed ending learned, unless that rank was
    /// stopped (SIGTERM, SIGINT, SIGHUP: most often its launcher's doing once another rank
    /// died) and a rank that failed otherwise (another signal, an exit code, or a lost status
    /// where the OOM killer was seen) and printed no echo was learned within
    /// [`STOPPED_AFTER_PEER`]: the order of two endings that close is only the order in which
    /// firedup's watchers ran (the launcher reaps the dead rank and stops the other at once).
    fn first_failed_rank(&self) -> Option<RankEnding> {
        let first = self.ranks.first_failed()?;
        let stopped = |e: &RankEnding| {
            e.exit
                .and_then(|x| x.effective_signal())
                .is_some_and(|s| matches!(s, 1 | 2 | 15))
        };
        if !stopped(first) {
            return Some(first.clone());
        }
        let failed_otherwise = |e: &&RankEnding| {
            e.source != EndingSource::OtherFailure
                && !e.clean()
                && !stopped(e)
                && (e.exit.is_some() || self.oom.is_some())
                && e.at <= first.at + STOPPED_AFTER_PEER
                && self.echo_of(e.rank).is_none()
        };
        let root = self.ranks.endings.iter().find(failed_otherwise);
        Some(root.unwrap_or(first).clone())
    }

    /// The most specific echo that `rank` printed (a collective error: its peer went first).
    fn echo_of(&self, rank: u32) -> Option<Evidence> {
        self.evidence
            .iter()
            .filter(|e| {
                e.rank == Some(rank)
                    && e.hit.strength == Strength::Echo
                    && !self.ranks.is_report_line(e.line.number)
            })
            .min_by_key(|e| e.hit.precedence())
            .cloned()
    }

    /// The first failed rank `f` only echoed a peer's failure: `failed` with the echo, naming
    /// the peer when it is known (outside the collective, or exited 0 under it).
    fn decide_echo_of_peer(
        &mut self,
        at: Duration,
        f: &RankEnding,
        echo: Evidence,
        exit: Option<ExitInfo>,
        launcher: &str,
        events: &mut Vec<Event>,
    ) {
        let outside = self.ranks.outside_collective.clone();
        let clean = self.ranks.first_clean(Some(f.rank)).cloned();
        let (peer, peer_exit, signature, how) = match (&outside, &clean) {
            (Some((r, ev)), _) => (
                Some(*r),
                self.ranks.ending_of(*r).and_then(|e| e.exit),
                echo.hit.signature,
                format!("rank {r} was not inside the collective ({ev})"),
            ),
            (None, Some(c)) => (
                Some(c.rank),
                c.exit,
                Some(Signature::RankExited),
                format!("rank {} had exited 0 under it", c.rank),
            ),
            (None, None) => (
                None,
                None,
                echo.hit.signature,
                "no rank printed a cause".to_string(),
            ),
        };
        let hit = Hit {
            signature,
            strength: Strength::Echo,
        };
        let name = signature.map(|s| format!("{s}: {}", s.hint()));
        let reason = format!(
            "failed with {} (line {}): rank {} failed in a collective after its peer went first, and {how}; {launcher}",
            name.unwrap_or_default(),
            echo.line.number,
            f.rank,
        );
        let f = LineFailure {
            cause: Evidence {
                hit,
                rank: peer,
                ..echo
            },
            also: None,
            reason,
            exit: peer_exit.or(exit),
        };
        self.decide_failed(at, f, events);
    }

    /// The first failed rank `f` printed no cause: `killed` by its signal, or `failed` with
    /// `rank_exited` for its exit.
    fn decide_rank_ending(
        &mut self,
        at: Duration,
        f: &RankEnding,
        exit: Option<ExitInfo>,
        launcher: &str,
        events: &mut Vec<Event>,
    ) {
        let seen = match (&f.line, f.source) {
            (Some(l), EndingSource::Live) => {
                format!(
                    "as seen live (its launcher reported the end at line {})",
                    l.number
                )
            }
            (Some(l), _) => format!("as the launcher reported (line {})", l.number),
            (None, _) => "as seen live".to_string(),
        };
        let line = f.line.clone().or_else(|| self.last_line.clone());
        // A rank whose status nobody could read (vLLM's "exit code: None": its parent reaped it
        // first) in a run where the OOM killer killed a process: the OOM killer kills by
        // SIGKILL, and a process it killed ends at once; that end is this rank's.
        let (rank_status, lost) = match (f.exit, &self.oom) {
            (None, Some(_)) => (Some(ExitInfo::signal(9, false)), true),
            (status, _) => (status, false),
        };
        let rank_exit = rank_status.or(exit);
        if let Some(sig) = rank_status.and_then(|e| e.effective_signal()) {
            let signature = signal_signature(sig, self.oom.is_some());
            let how = match (&self.oom, signature) {
                (Some(o), _) if lost => format!(
                    "ended with an unknown status {seen} (its parent reaped it first), and the OOM killer, which kills by SIGKILL, killed a process of the run ({o})"
                ),
                (Some(o), Some(Signature::OomKilled)) => {
                    format!(
                        "was killed by {} {seen} (OOM killer: {o})",
                        signal_name(sig)
                    )
                }
                _ => format!("was killed by {} {seen}", signal_name(sig)),
            };
            let reason = format!(
                "killed: rank {} {how}, and no rank printed a cause before it{}; {launcher}",
                f.rank,
                signature
                    .map(|s| format!(": {}", s.hint()))
                    .unwrap_or_default()
            );
            let d = Decision::new(Verdict::Killed, reason)
                .signatures(signature, Vec::new())
                .line(line)
                .exit(rank_exit)
                .rank(Some(f.rank));
            self.decide(at, d, events);
            return;
        }
        let s = Signature::RankExited;
        let reason = format!(
            "failed with {s}: rank {} ended with {} {seen} while its peers still needed it, and printed no cause: {}; {launcher}",
            f.rank,
            describe(f.exit),
            s.hint()
        );
        let d = Decision::new(Verdict::Failed, reason)
            .signatures(Some(s), Vec::new())
            .line(line)
            .exit(rank_exit)
            .rank(Some(f.rank));
        self.decide(at, d, events);
    }
}

/// `exit code 1`, `signal 9 (SIGKILL)`, or `an unknown status`.
fn describe(exit: Option<ExitInfo>) -> String {
    exit.map(|e| e.describe())
        .unwrap_or_else(|| "an unknown status".into())
}
