//! The logs of a real sglang 0.5.23 on the CPU (`tests/fixtures/servers/sglang-real/`, recorded
//! from the runs of `tests/live_sglang.rs`' cases) replayed through the real binary without the
//! server: `firedup run --profile sglang --no-probe` must name the verdict, signature, decisive
//! line and phase that the live run named (`tests/common/recorded_logs.rs`).
//!
//! A scheduler SIGKILLed shows in the log alone: while loading, engine.py's `Rank 0 scheduler died
//! during initialization (exit code: -9)` (after the EOFError of its pipe); once serving, the
//! watchdog's `Subprocess scheduler_0 (pid=N) crashed with exit code -9`. Both are rank 0's SIGKILL.

use crate::common;
use common::recorded_logs::{Case, Recordings};

const CASES: &[Case] = &[
    Case {
        name: "ready_request",
        extra: &[],
        verdict: "ready",
        signature: None,
        line: "The server is fired up and ready to roll!",
        phase: Some("ready"),
        timeline: &["load_weights", "kv_cache", "warmup", "ready"],
    },
    Case {
        name: "bad_flag",
        extra: &[],
        verdict: "failed",
        signature: Some("config_error"),
        line: "sglang serve: error: unrecognized arguments: --no-such-flag",
        phase: None,
        timeline: &[],
    },
    Case {
        name: "missing_model",
        extra: &[],
        verdict: "failed",
        signature: Some("model_not_found"),
        line: "HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/work/no-such-model'",
        phase: None,
        timeline: &[],
    },
    Case {
        // Without `--device cpu` on a machine with no GPU.
        name: "no_accelerator",
        extra: &[],
        verdict: "failed",
        signature: Some("gpu_unavailable"),
        line: "RuntimeError: No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is available.",
        phase: None,
        timeline: &[],
    },
    Case {
        // The port answered by Python's http.server: uvicorn's bind fails after the load.
        name: "port_in_use",
        extra: &[],
        verdict: "failed",
        signature: Some("port_in_use"),
        line: "[Errno 98] error while attempting to bind on address ('127.0.0.1', 31133): address already in use",
        phase: Some("warmup"),
        timeline: &[],
    },
    Case {
        name: "scheduler_sigkill_loading",
        extra: &[],
        verdict: "killed",
        signature: Some("sigkill"),
        line: "RuntimeError: Rank 0 scheduler died during initialization (exit code: -9).",
        phase: None,
        timeline: &[],
    },
    Case {
        name: "scheduler_sigkill_after_ready",
        extra: &["--hold", "5s"],
        verdict: "killed",
        signature: Some("sigkill"),
        line: "Subprocess scheduler_0 (pid=3532) crashed with exit code -9.",
        phase: Some("ready"),
        timeline: &[],
    },
];

const RECORDINGS: Recordings = Recordings {
    dir: "sglang-real",
    profile: "sglang",
    cases: CASES,
};

#[test]
fn real_sglang_logs_replayed_reach_the_live_verdicts() {
    RECORDINGS.replay_all();
}

#[test]
fn every_recorded_log_has_a_case() {
    RECORDINGS.every_log_has_a_case("tests/replay_sglang.rs");
}
