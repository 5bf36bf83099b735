//! The logs of a real llama-server (`tests/fixtures/servers/llamacpp-real/`, recorded by
//! `tests/live_llamacpp.rs`) replayed through the real binary without the server: each is
//! printed by `tests/fixtures/replay.sh`, which then ends as the server did (`CASE.exit`: its
//! exit code, a signal as a shell's 128+N, or alive), and `firedup run --profile llamacpp
//! --no-probe` must name the verdict, signature, decisive line and phase that the live run named
//! (`tests/common/recorded_logs.rs`).
//!
//! Under `--no-probe` the log's ready line decides (live, the server's /health does). A kill the
//! log cannot show the cause of stays `sigkill` here: the memory cgroup's OOM counter that makes
//! the live run `oom_killed` is not in the log.

use crate::common;
use common::recorded_logs::{Case, Recordings};

const READY_TIMELINE: &[&str] = &["load_model", "init_slots", "ready"];
/// Ready, then killed: the kill inside the hold is the verdict, as live.
const HOLD: &[&str] = &["--hold", "5s"];

const CASES: &[Case] = &[
    Case {
        name: "ready",
        extra: &[],
        verdict: "ready",
        signature: None,
        line: "srv  llama_server: listening on http://127.0.0.1:",
        phase: Some("ready"),
        timeline: READY_TIMELINE,
    },
    Case {
        name: "ready_request",
        extra: &[],
        verdict: "ready",
        signature: None,
        line: "srv  llama_server: listening on http://127.0.0.1:",
        phase: Some("ready"),
        timeline: READY_TIMELINE,
    },
    Case {
        name: "port_in_use",
        extra: &[],
        verdict: "failed",
        signature: Some("port_in_use"),
        line: "couldn't bind HTTP server socket, hostname: 127.0.0.1",
        phase: None,
        timeline: &[],
    },
    Case {
        name: "bad_flag",
        extra: &[],
        verdict: "failed",
        signature: Some("config_error"),
        line: "error: invalid argument: --no-such-flag",
        phase: None,
        timeline: &[],
    },
    Case {
        name: "missing_model",
        extra: &[],
        verdict: "failed",
        signature: Some("model_not_found"),
        line: "failed to open GGUF file '/work/no-such-model.gguf' (No such file or directory)",
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        name: "truncated_gguf",
        extra: &[],
        verdict: "failed",
        signature: Some("model_load_failed"),
        line: "data is not within the file bounds, model is corrupted or incomplete",
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        name: "garbage_model",
        extra: &[],
        verdict: "failed",
        signature: Some("model_load_failed"),
        line: "gguf_init_from_reader: invalid magic characters: 'not ', expected 'GGUF'",
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        name: "context_too_big",
        extra: &[],
        verdict: "failed",
        signature: Some("host_oom"),
        line: "ggml_aligned_malloc: insufficient memory (attempted to allocate 65536.00 MB)",
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        name: "cgroup_oom",
        extra: &[],
        verdict: "killed",
        signature: Some("sigkill"),
        line: "",
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        name: "sigkill_mid_load",
        extra: &[],
        verdict: "killed",
        signature: Some("sigkill"),
        line: "load_model: loading model '/work/model.gguf'",
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        name: "sigsegv_mid_load",
        extra: &[],
        verdict: "killed",
        signature: Some("segfault"),
        line: "load_model: loading model '/work/model.gguf'",
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        name: "sigkill_after_ready",
        extra: HOLD,
        verdict: "killed",
        signature: Some("sigkill"),
        line: "",
        phase: Some("ready"),
        timeline: &[],
    },
    Case {
        name: "sigsegv_after_ready",
        extra: HOLD,
        verdict: "killed",
        signature: Some("segfault"),
        line: "",
        phase: Some("ready"),
        timeline: &[],
    },
    Case {
        name: "sigstop_mid_load",
        extra: &["--stall", "2s"],
        verdict: "stalled",
        signature: None,
        line: "load_model: loading model '/work/model.gguf'",
        phase: Some("load_model"),
        timeline: &[],
    },
];

const RECORDINGS: Recordings = Recordings {
    dir: "llamacpp-real",
    profile: "llamacpp",
    cases: CASES,
};

#[test]
fn real_llama_server_logs_replayed_reach_the_live_verdicts() {
    RECORDINGS.replay_all();
}

#[test]
fn every_recorded_log_has_a_case() {
    RECORDINGS.every_log_has_a_case("tests/replay_llamacpp.rs");
}
