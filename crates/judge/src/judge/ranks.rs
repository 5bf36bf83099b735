//! Ranks of a multi-process launch (torchrun, tensor-parallel servers, TGI shards, `srun` tasks):
//! how each rank ended, as its launcher reported it in the log (`launcher_report.rs`: torchrun's
//! `failed (exitcode: -9) local_rank: 1 (pid: ...)` and its failure summary, TGI, vLLM, sglang,
//! srun) or as the shell saw it live (a process of the run with `RANK`/`LOCAL_RANK`/`SLURM_PROCID`
//! in its environment); whether the launcher itself was sent a signal; which rank was outside a
//! collective while its peers waited in one; and which Python tracebacks end in an echo (their
//! `Traceback (most recent call last):` header names no cause either).
//!
//! Only lines the classifier found to be echoes (every launcher report is one) and the few lines
//! of a launcher's summary block are read for reports, so a healthy log costs one check a line.

use std::time::Duration;

use super::launcher_report::{Report, report};
use crate::classify::{LineClass, Strength};
use crate::verdict::{ExitInfo, LineRef, Signature};

/// How many lines a launcher's summary block may span (torchrun prints about 8 a failure).
const SUMMARY_LINES: u16 = 400;
/// How many lines after sglang's "scheduler is dead" its `Exit code: N` may come.
const EXIT_CODE_LINES: u16 = 3;
/// Open tracebacks remembered at once (one per rank that is printing one).
const MAX_OPEN_TRACEBACKS: usize = 256;

/// Where a rank's ending was learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EndingSource {
    /// The shell saw the process end.
    Live,
    /// A launcher's line reported it (the first failure, or a shard, worker or task that ended).
    Launcher,
    /// torchrun's list of the failures other than the first (mostly the SIGTERMs it sent).
    OtherFailure,
}

/// How one rank ended.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RankEnding {
    /// The rank.
    pub(super) rank: u32,
    /// Its exit code or signal.
    pub(super) exit: Option<ExitInfo>,
    /// The launcher's line that reported it (None when seen live).
    pub(super) line: Option<LineRef>,
    /// When it was learned.
    pub(super) at: Duration,
    /// Where it was learned.
    pub(super) source: EndingSource,
    /// A vLLM engine core's report learned it (see [`Report::EngineCoreEnded`]).
    pub(super) engine_core: bool,
}

impl RankEnding {
    /// It exited 0: not a failure by itself (it is one only when its peers still needed it).
    pub(super) fn clean(&self) -> bool {
        self.exit.is_some_and(|e| e.code == Some(0))
    }
}

/// The launcher itself was sent a signal.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct LauncherSignal {
    pub(super) signal: i32,
    pub(super) line: LineRef,
    pub(super) at: Duration,
}

/// A launcher's summary block being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    /// torchrun's summary, before its lists.
    Head,
    /// torchrun's list of the other failures.
    Others,
    /// torchrun's root cause.
    Root,
    /// The lines after an ending whose exit follows (sglang's `Exit code: N`).
    ExitFollows,
}

/// What reading a line found that the judge must act on.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct RankNote {
    /// This line (an echo) ended a traceback whose header is at this line number (printed by
    /// the same rank): that header is an echo's too, and names no cause.
    pub(super) echo_traceback_header: Option<u64>,
    /// This line reported a task ended by the OOM killer (srun's `Out Of Memory`).
    pub(super) oom: bool,
}

/// What is known of the ranks.
#[derive(Debug, Default)]
pub(super) struct Ranks {
    /// Endings, in the order they were learned.
    pub(super) endings: Vec<RankEnding>,
    /// A rank seen outside a collective while its peers waited in one, with the evidence.
    pub(super) outside_collective: Option<(u32, String)>,
    /// Where each rank was at the last look at their stacks, and when it was taken.
    pub(super) placed: Option<(Duration, Vec<crate::rank_place::RankPlace>)>,
    /// The launcher was sent a signal (torchrun's "Received 15 death signal").
    pub(super) launcher_signal: Option<LauncherSignal>,
    /// The summary block being read, the rank its last `rank :` line named, lines left.
    block: Option<(Block, Option<u32>, u16)>,
    /// The node each srun task ran on, as srun's report named it (task, node).
    task_nodes: Vec<(u32, String)>,
    /// A TGI shard's signal, whose rank comes on the next "Shard N crashed".
    shard_signal: Option<i32>,
    /// Traceback headers whose exception line has not come yet: (rank, line number).
    open_tracebacks: Vec<(Option<u32>, u64)>,
    /// The lines read as a launcher's report (the last [`MAX_REPORT_LINES`]): what they say is
    /// the launcher's, even where a prefix tags them with a rank (TGI's shard spans do).
    report_lines: Vec<u64>,
}

/// How many report lines are remembered.
const MAX_REPORT_LINES: usize = 64;
/// Most srun tasks whose node is remembered.
const MAX_TASK_NODES: usize = 4096;

impl Ranks {
    /// Whether line `number` was read as a launcher's report.
    pub(super) fn is_report_line(&self, number: u64) -> bool {
        self.report_lines.contains(&number)
    }

    /// Line `number` (normalised `text`, `original` as read, printed by `rank` if a prefix said
    /// so), which the classifier found to mean `class`.
    pub(super) fn on_line(
        &mut self,
        at: Duration,
        number: u64,
        rank: Option<u32>,
        text: &str,
        original: &str,
        class: &LineClass,
    ) -> RankNote {
        let mut note = RankNote::default();
        let echo = class.hits.iter().any(|h| h.strength == Strength::Echo);
        if !class.hits.is_empty() {
            note.echo_traceback_header = self.follow_traceback(number, rank, text, class, echo);
        }
        if !echo && self.block.is_none() {
            return note;
        }
        if let Some((_, _, left)) = &mut self.block {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.block = None;
            }
        }
        if echo && text.contains("ChildFailedError") {
            self.block = Some((Block::Head, None, SUMMARY_LINES));
        }
        if let Some((node, tasks)) = super::srun_nodes::srun_task_nodes(text) {
            for t in tasks {
                if self.task_nodes.len() < MAX_TASK_NODES && self.node_of(t).is_none() {
                    self.task_nodes.push((t, node.clone()));
                }
            }
        }
        let Some(r) = report(text, self.block.is_some()) else {
            return note;
        };
        if self.report_lines.len() == MAX_REPORT_LINES {
            self.report_lines.remove(0);
        }
        self.report_lines.push(number);
        // A rank the line's prefix named (TGI's `rank=N` span) is the shard the report is of.
        let r = match (r, rank) {
            (Report::ShardSignal(s), Some(rank)) => Report::Ended {
                rank,
                exit: Some(ExitInfo::signal(s, false)),
            },
            (r, _) => r,
        };
        let line = || LineRef {
            number,
            text: original.to_string(),
        };
        match r {
            Report::Ended { rank, exit } => {
                let exit = exit.or_else(|| self.shard_signal.take().map(sig));
                self.learn(rank, exit, Some(line()), at, EndingSource::Launcher);
                if exit.is_none() {
                    self.block = Some((Block::ExitFollows, Some(rank), EXIT_CODE_LINES + 1));
                }
            }
            Report::EngineCoreEnded { rank, exit } => {
                self.learn_engine_core(rank, exit, line(), at);
            }
            Report::OutOfMemory { rank } => {
                let exit = Some(ExitInfo::signal(9, false));
                self.learn(rank, exit, Some(line()), at, EndingSource::Launcher);
                note.oom = true;
            }
            Report::LauncherSignal(signal) => {
                if self.launcher_signal.is_none() {
                    self.launcher_signal = Some(LauncherSignal {
                        signal,
                        line: line(),
                        at,
                    });
                }
            }
            Report::ShardSignal(s) => self.shard_signal = Some(s),
            Report::OtherFailures => self.enter(Block::Others),
            Report::RootCause => self.enter(Block::Root),
            Report::SummaryRank(r) => {
                if let Some((_, rank, _)) = &mut self.block {
                    *rank = Some(r);
                }
            }
            Report::ExitOfLast(exit) => {
                if let Some((block, Some(rank), _)) = self.block {
                    let source = match block {
                        Block::Others => EndingSource::OtherFailure,
                        _ => EndingSource::Launcher,
                    };
                    self.learn(rank, Some(exit), Some(line()), at, source);
                    if block == Block::ExitFollows {
                        self.block = None;
                    }
                }
            }
            Report::SummaryEnd => {
                if matches!(self.block, Some((Block::Root, _, _))) {
                    self.block = None;
                }
            }
        }
        note
    }

    /// The shell saw rank `rank` end with `exit`.
    pub(super) fn on_rank_ended(&mut self, at: Duration, rank: u32, exit: Option<ExitInfo>) {
        self.learn(rank, exit, None, at, EndingSource::Live);
    }

    /// The first rank that failed (not a clean exit, not one of torchrun's other failures).
    pub(super) fn first_failed(&self) -> Option<&RankEnding> {
        self.endings
            .iter()
            .find(|e| e.source != EndingSource::OtherFailure && !e.clean())
    }

    /// The first rank other than `except` that exited 0.
    pub(super) fn first_clean(&self, except: Option<u32>) -> Option<&RankEnding> {
        self.endings
            .iter()
            .find(|e| e.clean() && Some(e.rank) != except)
    }

    /// The node srun reported task `rank` on, if it did.
    pub(super) fn node_of(&self, rank: u32) -> Option<&str> {
        self.task_nodes
            .iter()
            .find(|(t, _)| *t == rank)
            .map(|(_, n)| n.as_str())
    }

    /// The ending of `rank`, if known.
    pub(super) fn ending_of(&self, rank: u32) -> Option<&RankEnding> {
        self.endings.iter().find(|e| e.rank == rank)
    }

    /// Whether anything is known of the ranks' endings or the launcher's.
    pub(super) fn any_ending(&self) -> bool {
        !self.endings.is_empty() || self.launcher_signal.is_some()
    }

    /// A rank's ending: the first report of a rank counts; a later one only adds its exit and
    /// the launcher's line (a rank seen ending live, then reported by its launcher).
    fn learn(
        &mut self,
        rank: u32,
        exit: Option<ExitInfo>,
        line: Option<LineRef>,
        at: Duration,
        source: EndingSource,
    ) {
        if let Some(e) = self.endings.iter_mut().find(|e| e.rank == rank) {
            // A vLLM engine core's report of its own index never fills in what a worker's left
            // unknown (learn_engine_core), and a worker's never fills in an engine core's. A
            // launcher's report that a rank's status was lost is about one process; a rank can
            // have two (vLLM's engine core and its worker are both rank 0, and the engine core
            // exits 1 once its OOM-killed worker is gone, seen live within the settle window
            // under load): an exit code seen live after it may be the other's, and only a signal
            // seen live (which ends the very process it hits) completes it.
            let other_process = e.source == EndingSource::Launcher
                && source == EndingSource::Live
                && exit.is_some_and(|x| x.effective_signal().is_none());
            if e.exit.is_none()
                && (!e.engine_core || source == EndingSource::Live)
                && !other_process
            {
                e.exit = exit;
            }
            if e.line.is_none() {
                e.line = line;
            }
            return;
        }
        self.endings.push(RankEnding {
            rank,
            exit,
            line,
            at,
            source,
            engine_core: false,
        });
    }

    /// A vLLM engine core ended (`rank`: its data-parallel index): the rank's ending where none
    /// is known; an engine core's report without a status completed by a later one with it (the
    /// front end's `Failed core proc(s)` after `engine core exited unexpectedly`). Where a
    /// worker of that number ended first, the engine core's end is that worker's consequence
    /// (it exits 1 once its worker is gone), and the worker's status, known or lost, stands; an
    /// ending seen live first gets the report as its line.
    fn learn_engine_core(
        &mut self,
        rank: u32,
        exit: Option<ExitInfo>,
        line: LineRef,
        at: Duration,
    ) {
        match self.endings.iter_mut().find(|e| e.rank == rank) {
            Some(e) if e.engine_core => {
                if e.exit.is_none() {
                    e.exit = exit;
                }
            }
            // Seen live first (the engine core itself, or a worker of that number), or a worker's
            // report: the report is the ending's line where it has none, its status not the
            // worker's.
            Some(e) => {
                if e.line.is_none() {
                    e.line = Some(line);
                }
            }
            None => self.endings.push(RankEnding {
                rank,
                exit,
                line: Some(line),
                at,
                source: EndingSource::Launcher,
                engine_core: true,
            }),
        }
    }

    /// Enters a part of torchrun's summary (also when its head line was not seen).
    fn enter(&mut self, block: Block) {
        let left = self.block.map(|(_, _, l)| l).unwrap_or(SUMMARY_LINES);
        self.block = Some((block, None, left));
    }

    /// Follows Python tracebacks per rank: a header opens one, an exception line ends it. When
    /// an echo ends it, the header's line number is returned.
    fn follow_traceback(
        &mut self,
        number: u64,
        rank: Option<u32>,
        text: &str,
        class: &LineClass,
        echo: bool,
    ) -> Option<u64> {
        let open = self.open_tracebacks.iter().position(|(r, _)| *r == rank);
        let header = !echo
            && class.hits.iter().any(|h| {
                h.signature == Some(Signature::PythonException) && h.strength == Strength::Evidence
            })
            && text.contains("Traceback (most recent call last)");
        if header {
            if let Some(i) = open {
                self.open_tracebacks.swap_remove(i);
            }
            if self.open_tracebacks.len() < MAX_OPEN_TRACEBACKS {
                self.open_tracebacks.push((rank, number));
            }
            return None;
        }
        let (_, line) = self.open_tracebacks.swap_remove(open?);
        echo.then_some(line)
    }
}

/// An end by signal `s`.
fn sig(s: i32) -> ExitInfo {
    ExitInfo::signal(s, false)
}

/// The rank a `[rankN]:` prefix (PyTorch's, on each line a rank prints) names: a fallback for
/// when the normaliser did not say.
pub(super) fn prefix_rank(text: &str) -> Option<u32> {
    let rest = text.strip_prefix("[rank")?;
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    if end == 0 || !rest[end..].starts_with("]:") {
        return None;
    }
    rest[..end].parse().ok()
}

/// The rank a failure line names as its printer in its own words, when no prefix said: a
/// TensorRT-LLM logger's `[RANK N]` tag (`[TRT-LLM] [RANK 0] [E] ...`, wherever the time and
/// tool tags before it leave it) or "... on rank N" ("Failed to initialize executor on rank 0",
/// "NCCL communicator was aborted on rank 1"). Not torch's "[Rank 0]: Rank 1 failed to pass
/// monitoredBarrier", which names the printer and the rank at fault.
pub(super) fn message_rank(text: &str) -> Option<u32> {
    let number_after = |marker: &str, close: Option<char>| {
        let at = text.find(marker)? + marker.len();
        let rest = &text[at..];
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let closed = match close {
            Some(c) => rest[end..].starts_with(c),
            None => !rest[end..].starts_with(|c: char| c.is_alphanumeric()),
        };
        if end == 0 || end > 6 || !closed {
            return None;
        }
        rest[..end].parse().ok()
    };
    number_after("[RANK ", Some(']'))
        .or_else(|| number_after(" on rank ", None))
        .or_else(|| number_after(" on Rank ", None))
}
