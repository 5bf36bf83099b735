//! A third set of failures recorded for real on an NVIDIA H100 (PyTorch 2.11, CUDA 13.0;
//! `tests/fixtures/gpu3/record.sh` made them, `versions.txt` says on what, `live_before.txt` what
//! firedup said live before issue 26's fixes), replayed through `firedup run` on a machine without
//! a GPU with the ending the shell saw. Issue 26, class 8: a device-side assert seen only as the
//! kernel's per-thread line is the cause (also when the process then kills itself, or when the
//! error surfaces at a later call); a process group with no GPU and a stub libcuda are
//! `gpu_unavailable`; a rank that leaves early is the cause, its peer's "Connection closed by
//! peer" the echo.

use crate::common::gpu_recordings::{self, GpuCase};

/// Each case: the ending `replay.sh` gives it (the shell's, as `.code` records it, or the signal).
const CASES: &[GpuCase] = &[
    GpuCase {
        name: "assert_selfkill_server",
        ending: "sig:KILL",
        verdict: "failed",
        signature: Some("cuda_error"),
        line: "thread: [0,0,0] Assertion `-sizes[i] <= index",
        rank: None,
    },
    GpuCase {
        name: "assert_then_cublas",
        ending: "1",
        verdict: "failed",
        signature: Some("cuda_error"),
        line: "thread: [0,0,0] Assertion `-sizes[i] <= index",
        rank: None,
    },
    GpuCase {
        name: "cuda_oom_plain",
        ending: "1",
        verdict: "failed",
        signature: Some("cuda_oom"),
        line: "torch.OutOfMemoryError: CUDA out of memory",
        rank: None,
    },
    GpuCase {
        name: "stub_libcuda",
        ending: "1",
        verdict: "failed",
        signature: Some("gpu_unavailable"),
        line: "CUDA driver is a stub library",
        rank: None,
    },
    GpuCase {
        name: "torchrun_nccl_no_gpu",
        ending: "1",
        verdict: "failed",
        signature: Some("gpu_unavailable"),
        line: "ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
        // torchrun's root-cause entry: rank 1 exited 1 first, rank 0 was then sent SIGTERM.
        rank: Some(1),
    },
    GpuCase {
        name: "torchrun_rank1_leaves_early",
        ending: "1",
        verdict: "failed",
        signature: Some("rank_exited"),
        line: "local_rank: 1",
        rank: Some(1),
    },
];

#[test]
fn third_recorded_set_names_signature_decisive_line_and_rank() {
    gpu_recordings::replay_all("gpu3", CASES);
}
