//! The logs of llama-cpp-python 0.3.36's own server (`python -m llama_cpp.server`,
//! `tests/fixtures/servers/llama-cpp-python-real/`, recorded by `tests/live_llama_cpp_python.rs`)
//! replayed through the real binary without the server: `firedup run --profile llama-cpp-python
//! --no-probe` must name the verdict, signature, decisive line and phase that the live run named
//! (`tests/common/recorded_logs.rs`).
//!
//! Under `--no-probe` uvicorn's `Uvicorn running on` line decides (live, the /v1/models answer
//! too). The SIGKILL mid-load left an empty log (the server was waiting to open its model): the
//! replay ends the same way, with nothing to read.

use crate::common;
use common::recorded_logs::{Case, Recordings};

const READY_TIMELINE: &[&str] = &["load_model", "init_context", "starting_http", "ready"];

const CASES: &[Case] = &[
    Case {
        name: "ready",
        extra: &[],
        verdict: "ready",
        signature: None,
        line: "INFO:     Uvicorn running on http://127.0.0.1:",
        phase: Some("ready"),
        timeline: READY_TIMELINE,
    },
    Case {
        name: "ready_request",
        extra: &[],
        verdict: "ready",
        signature: None,
        line: "INFO:     Uvicorn running on http://127.0.0.1:",
        phase: Some("ready"),
        timeline: READY_TIMELINE,
    },
    Case {
        name: "bad_flag",
        extra: &[],
        verdict: "failed",
        signature: Some("config_error"),
        line: "__main__.py: error: unrecognized arguments: --no-such-flag",
        phase: None,
        timeline: &[],
    },
    Case {
        name: "missing_model",
        extra: &[],
        verdict: "failed",
        signature: Some("model_not_found"),
        line: "ValueError: Model path does not exist: /work/no-such-model.gguf",
        phase: None,
        timeline: &[],
    },
    Case {
        name: "garbage_model",
        extra: &[],
        verdict: "failed",
        signature: Some("model_load_failed"),
        line: "gguf_init_from_reader: invalid magic characters: 'not ', expected 'GGUF'",
        phase: None,
        timeline: &[],
    },
    Case {
        name: "truncated_gguf",
        extra: &[],
        verdict: "failed",
        signature: Some("model_load_failed"),
        line: "data is not within the file bounds, model is corrupted or incomplete",
        phase: None,
        timeline: &[],
    },
    Case {
        name: "port_in_use",
        extra: &[],
        verdict: "failed",
        signature: Some("port_in_use"),
        line: "[Errno 98] error while attempting to bind on address ('127.0.0.1', ",
        phase: Some("starting_http"),
        timeline: &[],
    },
    Case {
        name: "sigkill_mid_load",
        extra: &[],
        verdict: "killed",
        signature: Some("sigkill"),
        line: "",
        phase: None,
        timeline: &[],
    },
    Case {
        // Ready, then killed: the kill inside the hold is the verdict, as live.
        name: "sigkill_after_ready",
        extra: &["--hold", "5s"],
        verdict: "killed",
        signature: Some("sigkill"),
        line: "",
        phase: Some("ready"),
        timeline: &[],
    },
];

const RECORDINGS: Recordings = Recordings {
    dir: "llama-cpp-python-real",
    profile: "llama-cpp-python",
    cases: CASES,
};

#[test]
fn real_llama_cpp_python_logs_replayed_reach_the_live_verdicts() {
    RECORDINGS.replay_all();
}

#[test]
fn every_recorded_log_has_a_case() {
    RECORDINGS.every_log_has_a_case("tests/replay_llama_cpp_python.rs");
}
