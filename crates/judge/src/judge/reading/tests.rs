//! Reading lines as a person reads them, through the judge on simulated time: escape text glued
//! onto a ready or failure line, prefixes of every relay and launcher, a failure hard-wrapped over
//! two lines, two ranks' prints on one line. The decisive line is always the ORIGINAL text.

use std::time::Duration;

use crate::classify::{Classifier, ClassifierSpec, ReadyLine};
use crate::judge::{Judge, JudgeConfig, Judgement, Mode, Observation};
use crate::verdict::{ExitInfo, Signature, Verdict};

fn classifier() -> Classifier {
    crate::test_classifier::classifier(&ClassifierSpec {
        signatures: crate::test_classifier::catalog().signatures.clone(),
        // vLLM's and sglang's ready lines (profiles/vllm.toml, profiles/sglang.toml).
        ready_lines: vec![ReadyLine::new(r"Application startup complete\.").unwrap()],
        ..ClassifierSpec::default()
    })
    .unwrap()
}

/// Feeds `lines` (numbered from 1) one per 10 ms, then, unless decided, the exit `exit` after
/// the settle window; the verdict.
fn judge(lines: &[&str], exit: Option<ExitInfo>) -> Judgement {
    let mut cfg = JudgeConfig::new(Mode::UntilReady, "/tmp/server.log", classifier());
    cfg.stall = None;
    cfg.timeout = Some(Duration::from_secs(600));
    let mut j = Judge::new(cfg);
    j.observe(Duration::ZERO, Observation::Started { pid: 42 });
    let mut at = Duration::ZERO;
    for (i, l) in lines.iter().enumerate() {
        at += Duration::from_millis(10);
        j.observe(
            at,
            Observation::Line {
                number: i as u64 + 1,
                text: l.to_string(),
            },
        );
    }
    // Deliver the deadlines (the settle and confirmation windows) while the process lives.
    for _ in 0..8 {
        if j.verdict().is_some() {
            break;
        }
        match j.next_deadline() {
            Some(d) if d < Duration::from_secs(60) => {
                at = at.max(d);
                j.observe(d, Observation::Tick);
            }
            _ => break,
        }
    }
    if j.verdict().is_none() {
        j.observe(at + Duration::from_millis(10), Observation::Exited(exit));
    }
    j.verdict().cloned().expect("a verdict")
}

fn failed(
    lines: &[&str],
) -> (
    Verdict,
    Option<Signature>,
    Option<(u64, String)>,
    Option<u32>,
) {
    let v = judge(lines, Some(ExitInfo::code(1)));
    (
        v.verdict,
        v.signature,
        v.line.map(|l| (l.number, l.text)),
        v.rank,
    )
}

#[test]
fn escape_text_glued_on_a_ready_line_still_makes_it_ready() {
    for line in [
        "#033[32mINFO#033[0m:     Application startup complete.",
        "^[[32mINFO^[[0m:     Application startup#033[0m complete.",
        "[32mINFO[0m:     Application startup complete.",
        "\\x1b[32mINFO\\x1b[0m:     Application startup complete.",
        "vllm-1  | \\u001b[32mINFO\\u001b[0m:     Application startup complete.",
    ] {
        let v = judge(&["starting", line], None);
        assert_eq!(v.verdict, Verdict::Ready, "{line}");
    }
}

#[test]
fn a_glued_failure_fails_with_its_signature_and_original_line() {
    let cases: &[(&str, Signature)] = &[
        (
            "#033[1;31mERROR#033[0m 03-01 10:00:00 [core.py:700] #033[1;31mValueError#033[0m: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
            Signature::CudaOom,
        ),
        (
            "^[[1;31mModuleNotFoundError^[[0m: No module named 'vllm'",
            Signature::ImportError,
        ),
        (
            "[1;31mERROR[0m:root:KeyError: 'model_type'",
            Signature::PythonException,
        ),
    ];
    for (line, sig) in cases {
        let got = failed(&["starting", line]);
        assert_eq!(
            got,
            (
                Verdict::Failed,
                Some(*sig),
                Some((2, line.to_string())),
                None
            ),
            "{line}"
        );
    }
}

#[test]
fn prefixed_lines_fail_as_bare_ones_with_the_rank_they_name() {
    let bare = "ModuleNotFoundError: No module named 'sgl_kernel'";
    for (prefix, rank) in [
        ("", None),
        ("vllm-1  | ", None),
        ("[pod/vllm-0/vllm] ", None),
        ("(EngineCore_0 pid=12) ", None),
        ("(VllmWorker rank=1 pid=34) ", Some(1)),
        ("[rank1]: ", Some(1)),
        ("3: ", Some(3)),
        ("> ", None),
        ("Mar 01 10:00:00 gpu1 vllm[123]: ", None),
        ("2025-03-01T10:00:00.123Z ", None),
        ("[2025-03-01 10:00:00 DP0 TP3 EP3] ", Some(3)),
        ("ERROR 03-01 10:00:00 [registry.py:381] ", None),
        (
            "2025-03-01T10:00:00.000000Z ERROR shard-manager: text_generation_launcher: ",
            None,
        ),
    ] {
        let line = format!("{prefix}{bare}");
        let got = failed(&["starting", &line]);
        assert_eq!(
            got,
            (
                Verdict::Failed,
                Some(Signature::ImportError),
                Some((2, line.clone())),
                rank
            ),
            "{line}"
        );
    }
    // Logged as a warning, the same text is no uncaught exception: the exit alone decides.
    let line = format!("WARNING 03-01 10:00:00 [x.py:1] Cannot use FlashInfer: {bare}");
    let v = judge(&["starting", &line], Some(ExitInfo::code(1)));
    assert_eq!(
        v.signature,
        Some(Signature::ImportError),
        "evidence, as before"
    );
    let line = "WARNING 03-01 10:00:00 [x.py:1] Caught KeyError: 'x', retrying";
    let v = judge(&["starting", line], Some(ExitInfo::code(1)));
    assert_eq!((v.verdict, v.signature), (Verdict::Exited, None));
}

#[test]
fn a_wrapped_kv_cache_message_is_cuda_oom_on_its_first_line() {
    // vLLM's check (vllm/v1/core/kv_cache_utils.py), cut by a terminal inside "cache".
    let first = "(EngineCore_0 pid=12) ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cach";
    let lines = [
        "(EngineCore_0 pid=12) INFO 03-01 10:00:00 [gpu_worker.py:276] Available KV cache memory: 9.43 GiB",
        first,
        "e memory (9.43 GiB). Based on the available memory, the estimated maximum model length is 77248. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
    ];
    let v = judge(&lines, Some(ExitInfo::code(1)));
    assert_eq!(v.verdict, Verdict::Failed);
    assert_eq!(v.signature, Some(Signature::CudaOom));
    let line = v.line.expect("a decisive line");
    assert_eq!((line.number, line.text.as_str()), (2, first));
    assert!(
        v.context
            .iter()
            .any(|c| c.starts_with("e memory (9.43 GiB)")),
        "{:?}",
        v.context
    );
}

#[test]
fn interleaved_ranks_are_read_each_with_its_own_rank() {
    let line = "[rank0]: Exception raised from recvBytes at gloo/transport/tcp/pair.cc:1[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.";
    let got = failed(&["starting", line]);
    assert_eq!(
        got,
        (
            Verdict::Failed,
            Some(Signature::CudaOom),
            Some((2, line.to_string())),
            Some(1)
        )
    );
    // The other order: the failing rank's part first.
    let line = "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.[rank0]: step 3 done";
    assert_eq!(failed(&["starting", line]).3, Some(1));
}

/// Lines a person reads past: a `raise` statement is source code even where the traceback's
/// header and indentation were lost (a paste that starts inside a traceback, a paste that dropped
/// leading spaces); a shell's 127 after the loader named the missing library is that cause; a
/// watchdog's collective timeout, even an echo, names the failure before the `terminate called`
/// line it led to.
#[test]
fn lines_a_person_reads_past() {
    use Signature::*;
    // (what, lines, exit, verdict, signature, decisive line)
    let cases: &[(&str, &[&str], ExitInfo, Verdict, Option<Signature>, u64)] = &[
        (
            "vLLM, the paste starts inside the traceback (vllm issue, docker compose)",
            &[
                "vllm-1  | ERROR 11-18 18:07:28 engine.py:366]   File \"/usr/local/lib/python3.12/dist-packages/vllm/worker/worker.py\", line 493, in raise_if_cache_size_invalid",
                "vllm-1  | ERROR 11-18 18:07:28 engine.py:366]     raise ValueError(\"No available memory for the cache blocks. \"",
                "vllm-1  | ERROR 11-18 18:07:28 engine.py:366] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
            ],
            ExitInfo::code(1),
            Verdict::Failed,
            Some(CudaOom),
            3,
        ),
        (
            "sglang, the raise pasted at column 0",
            &[
                "  File \"/usr/local/lib/python3.10/dist-packages/sglang/srt/distributed/device_communicators/pynccl_wrapper.py\", line 300, in NCCL_CHECK",
                "raise RuntimeError(f\"NCCL error: {error_str}\")",
                "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
            ],
            ExitInfo::code(1),
            Verdict::Failed,
            Some(NcclError),
            3,
        ),
        (
            "the loader's missing library, then the shell's 127",
            &[
                "/app/llama-server: error while loading shared libraries: libllama-common.so.0: cannot open shared object file: No such file or directory",
            ],
            ExitInfo::code(127),
            Verdict::Failed,
            Some(ImportError),
            1,
        ),
        (
            "a shell that did not find the command: 127 is never_started",
            &["sh: 1: llama-server: not found"],
            ExitInfo::code(127),
            Verdict::NeverStarted,
            None,
            1,
        ),
        (
            "NCCL watchdog timeout, then terminate called (sglang, exit 1)",
            &[
                "[2025-03-01 10:00:00 TP5] Scheduler hit an exception",
                "terminate called after throwing an instance of 'c10::DistBackendError'",
                "  what():  [PG 3 Rank 5] Process group watchdog thread terminated with exception: [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.",
            ],
            ExitInfo::code(1),
            Verdict::Failed,
            Some(NcclError),
            3,
        ),
    ];
    for (what, lines, exit, verdict, signature, decisive) in cases {
        let v = judge(lines, Some(*exit));
        assert_eq!(
            (v.verdict, v.signature, v.line.as_ref().map(|l| l.number)),
            (*verdict, *signature, Some(*decisive)),
            "{what}: {}",
            v.reason
        );
    }
}
