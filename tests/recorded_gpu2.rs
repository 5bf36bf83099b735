//! A second set of failures recorded for real on an NVIDIA H200 (PyTorch 2.11, CUDA 13.0, Triton
//! 3.6; `tests/fixtures/gpu2/record.sh` made them, `versions.txt` says on what), replayed through
//! `firedup run` on a machine without a GPU with the exit status the shell saw: the verdict, the
//! signature, the decisive line and, for the 2-rank torchrun runs, the rank must be what a person
//! reading the log would name. The torchrun logs are the hard part: the healthy rank 0 prints a
//! gloo "Connection closed by peer" traceback after rank 1 failed, and torchrun's own
//! `ChildFailedError` traceback and summary come last; those are echoes.

use crate::common;
use common::Env;

/// (log, signature, the decisive line's text contains, rank)
const CASES: &[(&str, &str, &str, Option<u64>)] = &[
    (
        "dynamo_fullgraph",
        "compile_error",
        "torch._dynamo.exc.Unsupported: Failed to trace builtin operator",
        None,
    ),
    (
        "fork_reinit",
        "cuda_error",
        "RuntimeError: Cannot re-initialize CUDA in forked subprocess",
        None,
    ),
    (
        "host_oom_numpy",
        "host_oom",
        "_ArrayMemoryError: Unable to allocate 512. TiB",
        None,
    ),
    (
        "host_oom_torch",
        "host_oom",
        "DefaultCPUAllocator: can't allocate memory",
        None,
    ),
    (
        "illegal_address",
        "cuda_error",
        "CUDA error: an illegal memory access was encountered",
        None,
    ),
    (
        "inductor_cache_full",
        "disk_full",
        "InductorError: OSError: [Errno 28] No space left on device",
        None,
    ),
    (
        "inductor_cache_notadir",
        "python_exception",
        "NotADirectoryError: [Errno 20] Not a directory",
        None,
    ),
    (
        "inductor_oom",
        "cuda_oom",
        "torch.OutOfMemoryError: CUDA out of memory",
        None,
    ),
    (
        "triton_compile",
        "compile_error",
        "triton.compiler.errors.CompilationError",
        None,
    ),
    (
        "torchrun_nccl_duplicate_gpu",
        "nccl_error",
        "[rank1]: torch.distributed.DistBackendError: NCCL error",
        Some(1),
    ),
    (
        "torchrun_rank1_compile_error",
        "compile_error",
        "[rank1]: torch._dynamo.exc.Unsupported",
        Some(1),
    ),
    (
        "torchrun_rank1_cuda_oom",
        "cuda_oom",
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory",
        Some(1),
    ),
    (
        "torchrun_rank1_device_assert",
        "cuda_error",
        // The kernel's per-thread assertion (printed unprefixed, before rank 1's traceback) is
        // the cause; "device-side assert triggered" is how the next CUDA call reported it.
        "block: [0,0,0], thread: [0,0,0] Assertion `",
        Some(1),
    ),
];

#[test]
fn second_recorded_set_names_signature_decisive_line_and_rank() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gpu2");
    let env = Env::new();
    let mut wrong = Vec::new();
    for (name, signature, decisive, rank) in CASES {
        let log = format!("{dir}/{name}.log");
        let code = std::fs::read_to_string(format!("{dir}/{name}.code")).unwrap();
        let r = env.replay(&log, code.trim());
        let line = r.json["line"]["text"].as_str().unwrap_or("").to_string();
        let got = (
            r.verdict().to_string(),
            r.signature().map(str::to_string),
            line.contains(decisive),
            r.json["rank"].as_u64(),
        );
        let want = (
            "failed".to_string(),
            Some(signature.to_string()),
            true,
            *rank,
        );
        if got != want {
            wrong.push(format!(
                "{name}: got {} {:?} rank {:?} on line {:?}; want {signature} rank {rank:?} on a line with {decisive:?}",
                got.0, got.1, got.3, line
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
