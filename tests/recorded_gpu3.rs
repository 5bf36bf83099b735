//! A third set of failures recorded for real on an NVIDIA H100 (PyTorch 2.11, CUDA 13.0;
//! `tests/fixtures/gpu3/record.sh` made them, `versions.txt` says on what, `live_before.txt` what
//! firedup said live before issue 26's fixes), replayed through `firedup run` on a machine without
//! a GPU with the ending the shell saw. Issue 26, class 8: a device-side assert seen only as the
//! kernel's per-thread line is the cause (also when the process then kills itself, or when the
//! error surfaces at a later call); a process group with no GPU and a stub libcuda are
//! `gpu_unavailable`; a rank that leaves early is the cause, its peer's "Connection closed by
//! peer" the echo.

use crate::common;
use common::Env;

/// (log, how it ended for replay.sh, verdict, signature, the decisive line's text contains, rank)
const CASES: &[(&str, &str, &str, &str, &str, Option<u64>)] = &[
    (
        "assert_selfkill_server",
        "sig:KILL",
        "failed",
        "cuda_error",
        "thread: [0,0,0] Assertion `-sizes[i] <= index",
        None,
    ),
    (
        "assert_then_cublas",
        "1",
        "failed",
        "cuda_error",
        "thread: [0,0,0] Assertion `-sizes[i] <= index",
        None,
    ),
    (
        "cuda_oom_plain",
        "1",
        "failed",
        "cuda_oom",
        "torch.OutOfMemoryError: CUDA out of memory",
        None,
    ),
    (
        "stub_libcuda",
        "1",
        "failed",
        "gpu_unavailable",
        "CUDA driver is a stub library",
        None,
    ),
    (
        "torchrun_nccl_no_gpu",
        "1",
        "failed",
        "gpu_unavailable",
        "ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
        // torchrun's root-cause entry: rank 1 exited 1 first, rank 0 was then sent SIGTERM.
        Some(1),
    ),
    (
        "torchrun_rank1_leaves_early",
        "1",
        "failed",
        "rank_exited",
        "local_rank: 1",
        Some(1),
    ),
];

#[test]
fn third_recorded_set_names_signature_decisive_line_and_rank() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gpu3");
    let env = Env::new();
    let mut wrong = Vec::new();
    for (name, ending, verdict, signature, decisive, rank) in CASES {
        let r = env.replay(&format!("{dir}/{name}.log"), ending);
        let line = r.json["line"]["text"].as_str().unwrap_or("").to_string();
        let got = (
            r.verdict().to_string(),
            r.signature().map(str::to_string),
            line.contains(decisive),
            r.json["rank"].as_u64(),
        );
        let want = (
            verdict.to_string(),
            Some(signature.to_string()),
            true,
            *rank,
        );
        if got != want {
            wrong.push(format!(
                "{name}: got {} {:?} rank {:?} on line {:?}; want {verdict} {signature} rank {rank:?} on a line with {decisive:?}",
                got.0, got.1, got.3, line
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
