//! A second set of failures recorded for real on an NVIDIA H200 (PyTorch 2.11, CUDA 13.0, Triton
//! 3.6; `tests/fixtures/gpu2/record.sh` made them, `versions.txt` says on what), replayed through
//! `firedup run` on a machine without a GPU with the exit status the shell saw: the verdict, the
//! signature, the decisive line and, for the 2-rank torchrun runs, the rank must be what a person
//! reading the log would name. The torchrun logs are the hard part: the healthy rank 0 prints a
//! gloo "Connection closed by peer" traceback after rank 1 failed, and torchrun's own
//! `ChildFailedError` traceback and summary come last; those are echoes.

use crate::common::gpu_recordings::{self, GpuCase};

/// Each case ends with the exit status the shell saw (`CASE.code`).
const CASES: &[GpuCase] = &[
    GpuCase {
        name: "dynamo_fullgraph",
        ending: "",
        verdict: "failed",
        signature: Some("compile_error"),
        line: "torch._dynamo.exc.Unsupported: Failed to trace builtin operator",
        rank: None,
    },
    GpuCase {
        name: "fork_reinit",
        ending: "",
        verdict: "failed",
        signature: Some("cuda_error"),
        line: "RuntimeError: Cannot re-initialize CUDA in forked subprocess",
        rank: None,
    },
    GpuCase {
        name: "host_oom_numpy",
        ending: "",
        verdict: "failed",
        signature: Some("host_oom"),
        line: "_ArrayMemoryError: Unable to allocate 512. TiB",
        rank: None,
    },
    GpuCase {
        name: "host_oom_torch",
        ending: "",
        verdict: "failed",
        signature: Some("host_oom"),
        line: "DefaultCPUAllocator: can't allocate memory",
        rank: None,
    },
    GpuCase {
        name: "illegal_address",
        ending: "",
        verdict: "failed",
        signature: Some("cuda_error"),
        line: "CUDA error: an illegal memory access was encountered",
        rank: None,
    },
    GpuCase {
        name: "inductor_cache_full",
        ending: "",
        verdict: "failed",
        signature: Some("disk_full"),
        line: "InductorError: OSError: [Errno 28] No space left on device",
        rank: None,
    },
    GpuCase {
        name: "inductor_cache_notadir",
        ending: "",
        verdict: "failed",
        signature: Some("python_exception"),
        line: "NotADirectoryError: [Errno 20] Not a directory",
        rank: None,
    },
    GpuCase {
        name: "inductor_oom",
        ending: "",
        verdict: "failed",
        signature: Some("cuda_oom"),
        line: "torch.OutOfMemoryError: CUDA out of memory",
        rank: None,
    },
    GpuCase {
        name: "triton_compile",
        ending: "",
        verdict: "failed",
        signature: Some("compile_error"),
        line: "triton.compiler.errors.CompilationError",
        rank: None,
    },
    GpuCase {
        name: "torchrun_nccl_duplicate_gpu",
        ending: "",
        verdict: "failed",
        signature: Some("nccl_error"),
        line: "[rank1]: torch.distributed.DistBackendError: NCCL error",
        rank: Some(1),
    },
    GpuCase {
        name: "torchrun_rank1_compile_error",
        ending: "",
        verdict: "failed",
        signature: Some("compile_error"),
        line: "[rank1]: torch._dynamo.exc.Unsupported",
        rank: Some(1),
    },
    GpuCase {
        name: "torchrun_rank1_cuda_oom",
        ending: "",
        verdict: "failed",
        signature: Some("cuda_oom"),
        line: "[rank1]: torch.OutOfMemoryError: CUDA out of memory",
        rank: Some(1),
    },
    GpuCase {
        name: "torchrun_rank1_device_assert",
        ending: "",
        verdict: "failed",
        signature: Some("cuda_error"),
        // The kernel's per-thread assertion (printed unprefixed, before rank 1's traceback) is
        // the cause; "device-side assert triggered" is how the next CUDA call reported it.
        line: "block: [0,0,0], thread: [0,0,0] Assertion `",
        rank: Some(1),
    },
];

#[test]
fn second_recorded_set_names_signature_decisive_line_and_rank() {
    gpu_recordings::replay_all("gpu2", CASES);
}
