//! Failures recorded for real on an NVIDIA H200 (PyTorch 2.11, CUDA 13.0; see
//! `tests/fixtures/gpu/record.sh` and `versions.txt`), replayed through `firedup run` on a machine
//! without a GPU: the verdict, signature and decisive line must be what a person would name.

use crate::common;
use common::Env;

#[test]
fn recorded_gpu_failures_get_their_signature_and_decisive_line() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gpu");
    let cases = [
        (
            "cuda_oom.log",
            "cuda_oom",
            "torch.OutOfMemoryError: CUDA out of memory",
        ),
        (
            "graph_capture.log",
            "graph_capture",
            "operation not permitted when stream is capturing",
        ),
        (
            "graph_capture_item.log",
            "graph_capture",
            "operation not permitted when stream is capturing",
        ),
        // The kernel's own per-thread assertion line comes first: it is the cause (issue 26);
        // "device-side assert triggered" is how the next CUDA call reported it.
        (
            "device_assert.log",
            "cuda_error",
            "block: [0,0,0], thread: [0,0,0] Assertion `",
        ),
        (
            "no_gpu.log",
            "gpu_unavailable",
            "No CUDA GPUs are available",
        ),
    ];
    let env = Env::new();
    for (file, signature, decisive) in cases {
        let path = format!("{dir}/{file}");
        let r = env.cmd_json(
            &[
                "run",
                "--json",
                "--until",
                "exit",
                "--",
                "sh",
                "-c",
                "cat \"$FIXTURE\"; exit 1",
            ],
            &[("FIXTURE", &path)],
        );
        assert_eq!(
            (r.code, r.verdict(), r.signature()),
            (1, "failed", Some(signature)),
            "{file}: {}",
            r.explain()
        );
        let line = r.json["line"]["text"].as_str().unwrap_or("");
        assert!(
            line.contains(decisive),
            "{file}: decisive line {line:?} should contain {decisive:?}"
        );
    }
}
