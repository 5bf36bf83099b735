//! A fourth set recorded for real on an NVIDIA H100 (PyTorch 2.11, CUDA 13.0, NCCL 2.28.9;
//! `tests/fixtures/gpu4/record.sh` made them, `versions.txt` says on what, `live.txt` what firedup
//! said live on the same machine), replayed through `firedup run` on a machine without a GPU with
//! the ending the shell saw. Issue 30, what one GPU allows: an NCCL rank whose bootstrap finds no
//! network interface (`NCCL_SOCKET_IFNAME` naming none), an NCCL rank out of GPU memory at its
//! first collective, and a healthy NCCL start with `NCCL_DEBUG=INFO` (its INFO lines and the
//! `destroy_process_group` warning are no failure).

use crate::common::gpu_recordings::{self, GpuCase};

/// Each case: the ending `replay.sh` gives it (the shell's, as `.code` records it, or the signal).
const CASES: &[GpuCase] = &[
    GpuCase {
        name: "torchrun_nccl_bad_ifname",
        ending: "1",
        verdict: "failed",
        signature: Some("nccl_error"),
        line: "DistBackendError: NCCL error in:",
        rank: Some(0),
    },
    GpuCase {
        name: "torchrun_nccl_rank_oom",
        ending: "1",
        verdict: "failed",
        signature: Some("cuda_oom"),
        line: "torch.AcceleratorError: CUDA error: out of memory",
        rank: Some(0),
    },
    GpuCase {
        name: "torchrun_nccl_ok_debug",
        ending: "0",
        verdict: "succeeded",
        signature: None,
        line: "",
        rank: None,
    },
];

#[test]
fn fourth_recorded_set_names_signature_decisive_line_and_rank() {
    gpu_recordings::replay_all("gpu4", CASES);
}
