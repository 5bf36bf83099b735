//! Root cause, round 3 (issue 26): logs written in the real formats of the servers and launchers
//! (each line's wording taken from the source that prints it, named beside it), fed line by line
//! on simulated time, then the process's exit. Each case: verdict, signature, rank, decisive line.
//! One test per class of miss, each a table.

use std::time::Duration;

use super::*;
use crate::classify::{Classifier, ClassifierSpec, ReadyLine, builtin_catalog};
use crate::verdict::{ExitInfo, Signature, Verdict};

fn classifier(ready: &[&str]) -> Classifier {
    Classifier::new(&ClassifierSpec {
        signatures: builtin_catalog().signatures,
        ready_lines: ready.iter().map(|r| ReadyLine::new(r).unwrap()).collect(),
        ..ClassifierSpec::default()
    })
    .unwrap()
}

/// A case: `log` fed in `mode`, then `exit`; what it must end with.
struct Case {
    name: &'static str,
    mode: Mode,
    log: &'static str,
    exit: Option<ExitInfo>,
    verdict: Verdict,
    signature: Option<Signature>,
    rank: Option<u32>,
    line: Option<u64>,
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

const JOB: Mode = Mode::UntilExit;
const SERVER: Mode = Mode::UntilReady;

/// Feeds `log` (one line a millisecond) under `ready` lines, then `exit` (None: the process is
/// still running: the settle window, or the ready line, decides, or nothing does yet).
fn judge_log(mode: Mode, ready: &[&str], log: &str, exit: Option<ExitInfo>) -> Option<Judgement> {
    let mut cfg = JudgeConfig::new(mode, "/tmp/fresh.log", classifier(ready));
    cfg.stall = Some(Duration::from_secs(3600));
    let mut j = Judge::new(cfg);
    j.observe(Duration::ZERO, Observation::Started { pid: 42 });
    let mut at = 0;
    for (i, text) in log.lines().enumerate() {
        at += 1;
        j.observe(
            Duration::from_millis(at),
            Observation::Line {
                number: i as u64 + 1,
                text: text.to_string(),
            },
        );
    }
    match exit {
        Some(_) => j.observe(Duration::from_millis(at + 1), Observation::Exited(exit)),
        None => j.observe(Duration::from_secs(600), Observation::Tick),
    };
    j.verdict().cloned()
}

fn check_all(cases: &[Case]) {
    let mut wrong = Vec::new();
    for c in cases {
        let got = judge_log(c.mode, &[], c.log, c.exit).expect("an exit decides");
        let line = got.line.as_ref().map(|l| l.number);
        let have = (got.verdict, got.signature, got.rank, line);
        let want = (c.verdict, c.signature, c.rank, c.line);
        if have != want {
            wrong.push(format!(
                "{}: got {have:?}, want {want:?}: {}",
                c.name, got.reason
            ));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

use Signature::*;
use Verdict::{Failed, Killed, Ready};

/// Class 1: a fatal line that names the rank that printed it in a prefix or in its own words.
#[test]
fn a_fatal_line_names_the_rank_that_printed_it() {
    check_all(&[
        Case {
            name: "torch excepthook prefix [rank2]:",
            mode: JOB,
            log: "[rank2]: Traceback (most recent call last):\n\
                  [rank2]:   File \"/w/train.py\", line 9, in <module>\n\
                  [rank2]:     x = torch.empty(1 << 40, device=\"cuda\")\n\
                  [rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 TiB. GPU 2 has a total capacity of 79.19 GiB of which 78.60 GiB is free.",
            exit: code(1),
            verdict: Failed,
            signature: Some(CudaOom),
            rank: Some(2),
            line: Some(4),
        },
        // tensorrt_llm/logger.py: `[{time}] [TRT-LLM] [RANK {rank}] [{level}] {msg}`.
        Case {
            name: "TRT-LLM [RANK 1] prefix",
            mode: SERVER,
            log: "[12/01/2025-10:00:00] [TRT-LLM] [RANK 1] [I] Loading weights\n\
                  [12/01/2025-10:00:01] [TRT-LLM] [RANK 1] [E] Failed to initialize executor on rank 1: [TensorRT-LLM][ERROR] CUDA runtime error in cudaMalloc(&ptr, n): out of memory (/src/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:99)",
            exit: code(1),
            verdict: Failed,
            signature: Some(CudaOom),
            rank: Some(1),
            line: Some(2),
        },
        // The rank in the words of the message, no prefix.
        Case {
            name: "on rank N",
            mode: SERVER,
            log: "[TensorRT-LLM][ERROR] Executor worker failed on rank 3: CUDA error: an illegal memory access was encountered",
            exit: code(1),
            verdict: Failed,
            signature: Some(CudaError),
            rank: Some(3),
            line: Some(1),
        },
        Case {
            name: "bare [RANK N] inside the message",
            mode: SERVER,
            log: "[TRT-LLM][E] [RANK 0] RuntimeError: CUDA error: an illegal memory access was encountered",
            exit: code(1),
            verdict: Failed,
            signature: Some(CudaError),
            rank: Some(0),
            line: Some(1),
        },
        // vllm/v1/executor/multiproc_executor.py names workers `VllmWorker rank=N`.
        Case {
            name: "vLLM (VllmWorker rank=4 pid=907)",
            mode: SERVER,
            log: "(VllmWorker rank=4 pid=907) ERROR 12-01 10:00:00 [multiproc_executor.py:546] WorkerProc hit an exception.\n\
                  (VllmWorker rank=4 pid=907) ERROR 12-01 10:00:00 [multiproc_executor.py:546] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 4 has a total capacity of 79.19 GiB of which 1.02 GiB is free.",
            exit: code(1),
            verdict: Failed,
            signature: Some(CudaOom),
            rank: Some(4),
            line: Some(2),
        },
        // sglang's record header `[time TP1] `; its traceback follows bare.
        Case {
            name: "sglang TP1",
            mode: SERVER,
            log: "[2025-12-01 10:00:00 TP1] Scheduler hit an exception: Traceback (most recent call last):\n  File \"/sgl/scheduler.py\", line 2300, in run_scheduler_process\n    scheduler.event_loop_overlap()\nRuntimeError: CUDA error: an illegal memory access was encountered",
            exit: code(1),
            verdict: Failed,
            signature: Some(CudaError),
            rank: Some(1),
            line: Some(4),
        },
    ]);
}

/// torchrun's report of a worker that failed and its summary whose root cause names local rank 1
/// (torch/distributed/elastic/multiprocessing/api.py and errors/__init__.py), after rank 0
/// printed the cause: both ranks on one GPU.
const DUPLICATE_GPU: &str = "[rank0]: Traceback (most recent call last):
[rank0]:   File \"/w/train.py\", line 12, in <module>
[rank0]:     dist.barrier()
[rank0]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5
[rank0]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
[rank0]: Last error:
[rank0]: Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 1000
W1201 10:00:01.000000 140 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 101 closing signal SIGTERM
E1201 10:00:01.000000 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 1 (pid: 102) of binary: /usr/bin/python3
Traceback (most recent call last):
  File \"/usr/bin/torchrun\", line 8, in <module>
    sys.exit(main())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2025-12-01_10:00:01
  host      : node1
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 102)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================";

/// The same summary with no cause printed by any rank.
const SILENT_RANK: &str = "step 1
W1201 10:00:01.000000 140 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 101 closing signal SIGTERM
E1201 10:00:01.000000 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 1 (pid: 102) of binary: /usr/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 102)
============================================================";

/// Class 2: a rank's printed cause beats a launcher's summary that names another rank.
#[test]
fn a_printed_cause_beats_a_launcher_summary_that_names_another_rank() {
    check_all(&[
        Case {
            name: "duplicate GPU printed by rank 0, torchrun names rank 1",
            mode: JOB,
            log: DUPLICATE_GPU,
            exit: code(1),
            verdict: Failed,
            signature: Some(NcclError),
            rank: Some(0),
            line: Some(4),
        },
        Case {
            name: "no rank printed a cause: the launcher's rank exited",
            mode: JOB,
            log: SILENT_RANK,
            exit: code(1),
            verdict: Failed,
            signature: Some(RankExited),
            rank: Some(1),
            line: Some(3),
        },
    ]);
}

/// Class 3: the cause a wrapper's message holds decides, not the wrapper.
#[test]
fn the_inner_cause_beats_its_wrapper() {
    check_all(&[
        // torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp: the watchdog's exception, then
        // std::terminate's `what():`.
        Case {
            name: "NCCL watchdog terminated with a CUDA error",
            mode: JOB,
            log: "[rank0]:[E1201 10:00:00.000000000 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered
terminate called after throwing an instance of 'c10::DistBackendError'
  what():  [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered",
            exit: signal(6),
            verdict: Failed,
            signature: Some(CudaError),
            rank: Some(0),
            line: Some(1),
        },
        // vllm/v1/executor/multiproc_executor.py: `Worker failed with error '{e}', please check
        // the stack trace above for the root cause`.
        Case {
            name: "vLLM Worker failed with error",
            mode: SERVER,
            log: "(EngineCore_DP0 pid=300) ERROR 12-01 10:00:00 [core.py:710] EngineCore failed to start.
(EngineCore_DP0 pid=300) ERROR 12-01 10:00:00 [core.py:710] Traceback (most recent call last):
(EngineCore_DP0 pid=300) ERROR 12-01 10:00:00 [core.py:710]   File \"/vllm/v1/executor/multiproc_executor.py\", line 264, in collective_rpc
(EngineCore_DP0 pid=300) ERROR 12-01 10:00:00 [core.py:710]     raise RuntimeError(
(EngineCore_DP0 pid=300) ERROR 12-01 10:00:00 [core.py:710] RuntimeError: Worker failed with error 'NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)', please check the stack trace above for the root cause",
            exit: code(1),
            verdict: Failed,
            signature: Some(NcclError),
            rank: None,
            line: Some(5),
        },
        Case {
            name: "vLLM Worker failed with a CUDA error",
            mode: SERVER,
            log: "(EngineCore_DP0 pid=300) ERROR 12-01 10:00:00 [core.py:710] RuntimeError: Worker failed with error 'CUDA error: an illegal memory access was encountered
(EngineCore_DP0 pid=300) ERROR 12-01 10:00:00 [core.py:710] Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
(EngineCore_DP0 pid=300) ERROR 12-01 10:00:00 [core.py:710] ', please check the stack trace above for the root cause",
            exit: code(1),
            verdict: Failed,
            signature: Some(CudaError),
            rank: None,
            line: Some(1),
        },
    ]);
}

/// Class 4: wordings of the servers' own sources that were not recognised.
#[test]
fn more_wordings_of_known_failures_are_recognised() {
    let one = |name, line: &'static str, signature| Case {
        name,
        mode: SERVER,
        log: line,
        exit: code(1),
        verdict: Failed,
        signature: Some(signature),
        rank: None,
        line: Some(1),
    };
    check_all(&[
        // The NCCL user guide's examples (and programs that copy them): `printf("Failed, NCCL
        // error %s:%d '%s'\n", ...)`, `"Failed: Cuda error %s:%d '%s'\n"`; nccl-tests' common.h.
        one(
            "NCCL error file:line 'text'",
            "Failed, NCCL error test.cu:45 'unhandled cuda error (run with NCCL_DEBUG=INFO for details)'",
            NcclError,
        ),
        one(
            "nccl-tests Test NCCL failure",
            "node1: Test NCCL failure common.cu:1005 'unhandled system error / '",
            NcclError,
        ),
        one(
            "Failed: Cuda error file:line 'out of memory'",
            "Failed: Cuda error test.cu:30 'out of memory'",
            CudaOom,
        ),
        // lmdeploy turbomind's check_cuda_error: `[TM][ERROR] CUDA runtime error: {msg} {file}:{line}`.
        one(
            "CUDA runtime error: out of memory",
            "RuntimeError: [TM][ERROR] CUDA runtime error: out of memory /lmdeploy/src/turbomind/utils/allocator.h:231",
            CudaOom,
        ),
        one(
            "CUDA runtime error: illegal memory access",
            "RuntimeError: [TM][ERROR] CUDA runtime error: an illegal memory access was encountered /lmdeploy/src/turbomind/kernels/gemm.cu:120",
            CudaError,
        ),
        // vllm/executor/ray_utils.py.
        one(
            "Current node has no GPU available",
            "ValueError: Current node has no GPU available. current_node_resource={'CPU': 8.0, 'node:10.0.0.1': 1.0}. vLLM engine cannot start without GPU. Make sure you have at least one GPU available in a node current_node_id='abc' current_ip='10.0.0.1'.",
            GpuUnavailable,
        ),
        one(
            "no GPU available",
            "RuntimeError: no GPU available for this worker",
            GpuUnavailable,
        ),
        // llama_cpp/llama.py: `raise ValueError(f"Model path does not exist: {model_path}")`.
        one(
            "llama-cpp-python Model path does not exist",
            "ValueError: Model path does not exist: /models/missing.gguf",
            ModelNotFound,
        ),
    ]);
}

/// Class 5: in a chain, "During handling of the above exception" makes the last exception the
/// error; "The above exception was the direct cause" keeps the first as the cause.
#[test]
fn an_exception_chain_is_read_by_its_marker() {
    check_all(&[
        // importlib while a StopIteration was handled (CPython's own words and layout).
        Case {
            name: "during handling: the last exception",
            mode: SERVER,
            log: "Traceback (most recent call last):
  File \"/venv/lib/python3.12/site-packages/vllm/plugins/__init__.py\", line 30, in load_plugins_by_group
    plugin = next(iter(discovered))
StopIteration

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File \"/venv/bin/vllm\", line 5, in <module>
    from vllm.entrypoints.cli.main import main
KeyError: 'vllm.platforms'",
            exit: code(1),
            verdict: Failed,
            signature: Some(PythonException),
            rank: None,
            line: Some(11),
        },
        Case {
            name: "direct cause: the first exception",
            mode: SERVER,
            log: "Traceback (most recent call last):
  File \"/srv/app.py\", line 10, in load
    return json.loads(text)
KeyError: 'model_type'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File \"/srv/app.py\", line 20, in <module>
    raise RuntimeError(\"could not read the config\") from e
RuntimeError: could not read the config",
            exit: code(1),
            verdict: Failed,
            signature: Some(PythonException),
            rank: None,
            line: Some(4),
        },
    ]);
}

/// Class 6: a torchrun summary cut before its root-cause entry: its list of the other failures
/// (a peer's SIGKILL) is not the run's own signal.
#[test]
fn a_cut_launcher_summary_does_not_lend_a_peer_s_signal_to_the_run() {
    check_all(&[Case {
        name: "summary cut after the other failures",
        mode: JOB,
        log: "step 10
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2025-12-01_10:00:01
  host      : node1
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 102)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 102",
        exit: code(1),
        verdict: Failed,
        signature: Some(RankExited),
        rank: None,
        line: Some(11),
    }]);
    // A real torchrun run (tests/fixtures/torchrun/sigkill.log: rank 1 SIGKILLed, rank 0's gloo
    // echo, rank 0 then SIGTERMed by torchrun) as a log that kept neither torchrun's
    // `failed (exitcode: -9) local_rank: 1` line nor its summary's root-cause entry: rank 0's
    // SIGTERM, listed among the other failures, is not the run's end.
    let real = include_str!("../../../../tests/fixtures/torchrun/sigkill.log");
    let cut: String = real
        .lines()
        .take(46)
        .filter(|l| !l.contains("failed (exitcode:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let got = judge_log(JOB, &[], &cut, code(1)).expect("an exit decides");
    assert_eq!(
        (got.verdict, got.signature, got.rank),
        (Failed, Some(RankExited), None),
        "{}",
        got.reason
    );
    assert!(
        got.reason.contains("rank 0 ended with signal 15")
            && got.reason.contains("root-cause entry is missing"),
        "{}",
        got.reason
    );
}

/// Class 7: the server's own access log answering `GET /health` with 200 is proof it is up,
/// under the built-in vLLM profile's ready lines; a 503 is not.
#[test]
fn a_health_answer_in_the_access_log_is_ready() {
    let cases = [
        (
            "vllm",
            "(APIServer pid=1) INFO 12-01 10:00:00 [api_server.py:1880] Starting vLLM API server 0 on http://0.0.0.0:8000\n\
             (APIServer pid=1) INFO:     127.0.0.1:40000 - \"GET /health HTTP/1.1\" 200 OK",
            true,
        ),
        (
            "vllm",
            "(APIServer pid=1) INFO:     127.0.0.1:40000 - \"GET /health HTTP/1.1\" 503 Service Unavailable",
            false,
        ),
    ];
    for (profile, log, ready) in cases {
        let p = crate::profile::by_name(profile).unwrap();
        let lines: Vec<&str> = p.ready.iter().map(String::as_str).collect();
        let got = judge_log(SERVER, &lines, log, None);
        let verdict = got.as_ref().map(|g| g.verdict);
        assert_eq!(verdict, ready.then_some(Ready), "{profile}: {log}: {got:?}");
        if let Some(g) = got {
            assert_eq!(g.line.map(|l| l.number), Some(log.lines().count() as u64));
        }
    }
}

/// The per-thread line of a kernel's device-side assert (aten/src/ATen/native/cuda/*.cu via
/// CUDA_KERNEL_ASSERT: `file:line: function: block: [x,y,z], thread: [x,y,z] Assertion `cond`
/// failed.`), printed many times, then the process killing itself.
const DEVICE_ASSERT: &str = "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [3,0,0], thread: [96,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.
/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [3,0,0], thread: [97,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.
/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [3,0,0], thread: [98,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.";

/// Class 8: what the real H100 runs showed.
#[test]
fn what_the_h100_runs_showed_is_recognised() {
    check_all(&[
        Case {
            name: "device-side assert per-thread lines, then SIGKILL",
            mode: SERVER,
            log: DEVICE_ASSERT,
            exit: signal(9),
            verdict: Failed,
            signature: Some(CudaError),
            rank: None,
            line: Some(1),
        },
        Case {
            name: "device-side assert, a cuBLAS error later",
            mode: JOB,
            log: "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [3,0,0], thread: [96,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.
/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [3,0,0], thread: [97,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.
Traceback (most recent call last):
  File \"/w/job.py\", line 30, in <module>
    y = x @ w
RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, compute_type, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`",
            exit: code(1),
            verdict: Failed,
            signature: Some(CudaError),
            rank: None,
            line: Some(1),
        },
        // torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp.
        Case {
            name: "no GPUs found",
            mode: JOB,
            log: "[rank0]: ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
            exit: code(1),
            verdict: Failed,
            signature: Some(GpuUnavailable),
            rank: Some(0),
            line: Some(1),
        },
        // cudaErrorStubLibrary (34): "CUDA driver is a stub library".
        Case {
            name: "stub libcuda",
            mode: JOB,
            log: "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 34: CUDA driver is a stub library",
            exit: code(1),
            verdict: Failed,
            signature: Some(GpuUnavailable),
            rank: None,
            line: Some(1),
        },
        Case {
            name: "stub libcuda, CUDA error",
            mode: JOB,
            log: "torch.AcceleratorError: CUDA error: CUDA driver is a stub library",
            exit: code(1),
            verdict: Failed,
            signature: Some(GpuUnavailable),
            rank: None,
            line: Some(1),
        },
        // Rank 1 asserted and died; rank 0's gloo pair then lost its peer; torchrun reported
        // rank 0 first (both within a second).
        Case {
            name: "a rank that left early is the cause, its peer's closed connection the echo",
            mode: JOB,
            log: "[rank1]: /pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [3,0,0], thread: [96,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.
[rank0]: Traceback (most recent call last):
[rank0]:   File \"/w/train.py\", line 20, in <module>
[rank0]:     dist.all_reduce(t)
[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:10895
E1201 10:00:01.000000 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 101) of binary: /usr/bin/python3",
            exit: code(1),
            verdict: Failed,
            signature: Some(CudaError),
            rank: Some(1),
            line: Some(1),
        },
    ]);
    let _ = Killed;
}
