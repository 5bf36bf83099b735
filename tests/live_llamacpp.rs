//! A real llama.cpp `llama-server` (CPU build) through the real binary: each way it becomes ready
//! or breaks, asserted on the JSON verdict (verdict, signature, decisive line) that a person
//! reading its log would name (docs/contract.md), and afterwards that no process carrying the
//! run's `FIREDUP_RUN_ID` is left and its port is free.
//!
//! Inputs: `FIREDUP_TEST_LLAMA_SERVER` (the binary, built by
//! `tests/live_servers/build_llama_server.sh`) and `FIREDUP_TEST_TINY_GGUF` (a tiny random-weight
//! Llama, `tests/live_servers/make_tiny_gguf.py`); `.ci/run` makes both. Without them every test
//! says "not run" and passes, unless `FIREDUP_TEST_REQUIRE_SERVERS` requires their group, when
//! they fail.
//!
//! The tiny model loads in well under a second, too fast to catch "mid-load" by timing: those
//! cases give the server a FIFO as its model, so it waits in its model loader (as on a slow
//! network filesystem) for as long as the case needs. Every wait is bounded (the firedup process
//! is killed past `BOUND`, a hang) and nothing asserts how fast anything was.
//!
//! `FIREDUP_TEST_LLAMA_RECORD=DIR` copies each case's log to `DIR/CASE.log` (the work directory
//! written as `/work`, the model's as `/models`) with its exit in `DIR/CASE.exit` and the verdict
//! in `DIR/CASE.verdict`: the fixtures that `tests/replay_llamacpp.rs` replays without the
//! server. The harness (inputs, cases, bounded runs, what is left) is `tests/common/llama.rs`.

use crate::common;
use common::llama::{
    Case, assert_verdict, complete_one_token, fifo, finish, host_could_map, llama, probe,
    with_context,
};

use std::process::Stdio;

/// `FIREDUP_TEST_REQUIRE_SERVERS` names every real-server group or some (tests/common/server_groups.rs).
#[test]
fn the_setting_names_every_group_or_some() {
    let cases = [
        (None, "vllm", false),
        (Some("1"), "vllm", true),
        (Some("0"), "vllm", false),
        (Some(""), "vllm", false),
        (Some("vllm,llamacpp"), "llamacpp", true),
        (Some("vllm llamacpp"), "llama-cpp-python", false),
        (Some("llama-cpp-python"), "llamacpp", false),
    ];
    for (setting, group, want) in cases {
        assert_eq!(
            common::server_groups::required_by(setting, group),
            want,
            "{setting:?} {group}"
        );
    }
}

// ------------------------------------------------------------------------------ ready and stop

#[test]
fn ready_by_its_health_answer_and_stop_leaves_nothing() {
    let Some(l) = llama() else { return };
    let c = Case::new("ready");
    let r = c.run(&["--timeout", "120s"], &c.server_args(&l, &l.gguf, &[]));
    assert_verdict(&r, 0, "ready", None, "");
    let health = probe(&r, "http");
    assert!(
        health["target"]
            .as_str()
            .is_some_and(|t| t.ends_with(&format!("127.0.0.1:{}/health", c.port))),
        "{}",
        r.explain()
    );
    assert!(health["ready_s"].as_f64().is_some(), "{}", r.explain());
    // The log says the server listens, and firedup waited for that: the line is in the log
    // before the verdict.
    assert!(
        common::file_text(&c.log).contains("listening on http"),
        "{}",
        common::file_text(&c.log)
    );
    assert_eq!(r.json["port"], c.port, "{}", r.explain());
    c.stop_cleanly(&r);
}

#[test]
fn ready_request_completes_a_token_and_reports_the_gap() {
    let Some(l) = llama() else { return };
    let c = Case::new("ready_request_human");
    let mut cmd = c.env.cmd();
    // The human output (no --json) names the gap; the JSON is checked through a second run.
    cmd.args(["run", "--ready-request", "--timeout", "120s", "--log"])
        .arg(&c.log)
        .arg("--")
        .args(c.server_args(&l, &l.gguf, &[]))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let human = finish(cmd.spawn().unwrap());
    assert_eq!(human.code, 0, "{}", human.explain());
    let said = format!("{}{}", human.stdout, human.stderr);
    assert!(said.contains("READY"), "{}", human.explain());
    assert!(
        said.contains("request") && said.contains("after health"),
        "the human output names the health-to-request gap\n{}",
        human.explain()
    );
    let id = said
        .lines()
        .find_map(|l| l.split("firedup stop ").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_default()
        .to_string();
    let s = c.firedup(&["stop", &id]);
    assert_eq!(s.code, 0, "{}", s.explain());

    let c2 = Case::new("ready_request");
    let r = c2.run(
        &["--ready-request", "--timeout", "120s"],
        &c2.server_args(&l, &l.gguf, &[]),
    );
    assert_verdict(&r, 0, "ready", None, "");
    let request = probe(&r, "request");
    assert!(request["ready_s"].as_f64().is_some(), "{}", r.explain());
    let gap = r.json["request_gap_s"].as_f64();
    assert!(gap.is_some_and(|g| g >= 0.0), "{}", r.explain());
    c2.firedup(&["stop", r.run_id()]);
    c.assert_nothing_left();
    c2.assert_nothing_left();
}

// ------------------------------------------------------------------------ failures at start-up

#[test]
fn port_taken_by_another_http_server_is_port_in_use() {
    let Some(l) = llama() else { return };
    let c = Case::new("port_in_use");
    let mut other = c.occupy_port_with_http_server();
    let r = c.run(&["--timeout", "120s"], &c.server_args(&l, &l.gguf, &[]));
    let _ = other.kill();
    let _ = other.wait();
    assert_verdict(
        &r,
        1,
        "failed",
        Some("port_in_use"),
        "couldn't bind HTTP server socket",
    );
    c.assert_nothing_left();
}

#[test]
fn a_bad_flag_is_config_error() {
    let Some(l) = llama() else { return };
    let c = Case::new("bad_flag");
    let r = c.run(
        &["--timeout", "120s"],
        &c.server_args(&l, &l.gguf, &["--no-such-flag"]),
    );
    assert_verdict(&r, 1, "failed", Some("config_error"), "--no-such-flag");
    c.assert_nothing_left();
}

#[test]
fn a_missing_model_is_model_not_found() {
    let Some(l) = llama() else { return };
    let c = Case::new("missing_model");
    let missing = c.env.path("no-such-model.gguf").display().to_string();
    let r = c.run(&["--timeout", "120s"], &c.server_args(&l, &missing, &[]));
    assert_verdict(
        &r,
        1,
        "failed",
        Some("model_not_found"),
        "no-such-model.gguf",
    );
    c.assert_nothing_left();
}

#[test]
fn a_truncated_gguf_is_model_load_failed() {
    let Some(l) = llama() else { return };
    let c = Case::new("truncated_gguf");
    let bytes = std::fs::read(&l.gguf).unwrap();
    let cut = c.env.path("truncated.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let r = c.run(
        &["--timeout", "120s"],
        &c.server_args(&l, cut.to_str().unwrap(), &[]),
    );
    assert_verdict(&r, 1, "failed", Some("model_load_failed"), "");
    assert_eq!(r.json["phase"], "load_model", "{}", r.explain());
    c.assert_nothing_left();
}

#[test]
fn a_garbage_file_as_model_is_model_load_failed() {
    let Some(l) = llama() else { return };
    let c = Case::new("garbage_model");
    let junk = c.env.path("garbage.gguf");
    let text: String = (0..20_000).map(|i| format!("not a model {i}\n")).collect();
    std::fs::write(&junk, text).unwrap();
    let r = c.run(
        &["--timeout", "120s"],
        &c.server_args(&l, junk.to_str().unwrap(), &[]),
    );
    assert_verdict(&r, 1, "failed", Some("model_load_failed"), "");
    c.assert_nothing_left();
}

/// A KV cache of 64 GiB (`-c` 64 Mi tokens, 1 KiB each for this model) on a host with less: the
/// allocation fails in the server (no OOM killer: the kernel refuses a mapping that big). Not run
/// where it could succeed and be touched (memory and swap near 64 GiB, or overcommit always on).
#[test]
fn a_context_too_big_for_host_memory_is_host_oom() {
    let Some(l) = llama() else { return };
    if host_could_map(64) {
        eprintln!("note: this host could map a 64 GiB KV cache: not run");
        return;
    }
    let c = Case::new("context_too_big");
    let args = with_context(c.server_args(&l, &l.gguf, &[]), 64 << 20);
    let r = c.run(&["--timeout", "120s"], &args);
    assert_verdict(&r, 1, "failed", Some("host_oom"), "insufficient memory");
    assert_eq!(r.json["phase"], "load_model", "{}", r.explain());
    c.assert_nothing_left();
}

/// A 1 GiB KV cache (`-c` 1 Mi tokens) in a 128 MiB memory cgroup: the mapping succeeds, clearing
/// it touches the pages, and the kernel's OOM killer ends the server; the cgroup's OOM counter is
/// the evidence. firedup itself joins the cgroup first, so the server starts inside it.
#[test]
fn a_memory_cgroup_too_small_is_killed_oom_killed() {
    let Some(l) = llama() else { return };
    let c = Case::new("cgroup_oom");
    let args = with_context(c.server_args(&l, &l.gguf, &[]), 1 << 20);
    c.assert_oom_killed_in_cgroup(128 << 20, &args);
}

// ------------------------------------------------------------------------------------ signals

#[test]
fn sigkill_mid_load_is_killed_sigkill() {
    let Some(l) = llama() else { return };
    let c = Case::new("sigkill_mid_load");
    let model = fifo(&c);
    let child = c.spawn(&["--timeout", "120s"], &c.server_args(&l, &model, &[]));
    c.wait_for_log("loading model");
    let r = c.kill_server(child, c.server_pid(), libc::SIGKILL, "sigkill");
    assert_eq!(r.json["phase"], "load_model", "{}", r.explain());
    c.assert_nothing_left();
}

#[test]
fn sigsegv_mid_load_is_killed_segfault() {
    let Some(l) = llama() else { return };
    let c = Case::new("sigsegv_mid_load");
    let model = fifo(&c);
    let child = c.spawn(&["--timeout", "120s"], &c.server_args(&l, &model, &[]));
    c.wait_for_log("loading model");
    c.kill_server(child, c.server_pid(), libc::SIGSEGV, "segfault");
    c.assert_nothing_left();
}

/// Ready, then killed inside `--hold`: the crash is the verdict.
fn killed_after_ready(name: &'static str, sig: i32, want: &str) {
    let Some(l) = llama() else { return };
    let c = Case::new(name);
    let child = c.spawn(
        &["--timeout", "120s", "--hold", "120s"],
        &c.server_args(&l, &l.gguf, &[]),
    );
    c.wait_for_log("listening on http");
    // Serving: a completion answers (so the kill comes after ready, whatever firedup saw).
    complete_one_token(c.port);
    c.kill_server(child, c.server_pid(), sig, want);
    c.assert_nothing_left();
}

#[test]
fn sigkill_after_ready_is_killed_sigkill() {
    killed_after_ready("sigkill_after_ready", libc::SIGKILL, "sigkill");
}

#[test]
fn sigsegv_after_ready_is_killed_segfault() {
    killed_after_ready("sigsegv_after_ready", libc::SIGSEGV, "segfault");
}

/// SIGSTOP while it loads (waiting on its model): no line, no CPU time, so `stalled` after the
/// stall window; firedup's teardown ends the stopped server (SIGCONT with its SIGTERM).
#[test]
fn sigstop_mid_load_is_stalled() {
    let Some(l) = llama() else { return };
    let c = Case::new("sigstop_mid_load");
    let model = fifo(&c);
    let child = c.spawn(
        &["--timeout", "120s", "--stall", "3s"],
        &c.server_args(&l, &model, &[]),
    );
    c.wait_for_log("loading model");
    let r = c.stop_server_and_assert_stalled(child, c.server_pid());
    assert_eq!(r.json["phase"], "load_model", "{}", r.explain());
}

/// Ctrl-C to `firedup run` while the server loads: the server is stopped and the teardown
/// verified, one line says so, exit 130, and the history says `interrupted`.
#[test]
fn ctrl_c_of_firedup_tears_the_server_down() {
    let Some(l) = llama() else { return };
    let c = Case::new("ctrl_c");
    let model = fifo(&c);
    let child = c.spawn(&["--timeout", "120s"], &c.server_args(&l, &model, &[]));
    c.wait_for_log("loading model");
    let _ = c.server_pid();
    c.interrupt_and_assert_torn_down(child);
}

// ------------------------------------------------------------------------------------- attach

/// A llama-server started with nohup, outside firedup: `firedup watch --log` finds the writer,
/// its profile and its port from its command line, and says `ready` by its /health.
#[test]
fn watch_log_of_a_nohup_server_is_ready() {
    let Some(l) = llama() else { return };
    let c = Case::new("watch_nohup");
    let server = c.start_with_nohup(&c.server_args(&l, &l.gguf, &[]));
    let r = c.watch_log();
    assert_verdict(&r, 0, "ready", None, "");
    assert_eq!(r.json["pid"], server.0, "{}", r.explain());
    assert_eq!(r.json["port"], c.port, "{}", r.explain());
    let health = probe(&r, "http");
    assert!(
        health["target"]
            .as_str()
            .is_some_and(|t| t.contains(&format!(":{}/health", c.port))),
        "{}",
        r.explain()
    );
    drop(server);
}
