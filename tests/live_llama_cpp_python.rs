//! llama-cpp-python's own server (`python -m llama_cpp.server`, FastAPI on uvicorn, no `/health`)
//! for real, through the real binary (issue 15): each way it becomes ready or breaks, asserted on
//! the JSON verdict (verdict, signature, decisive line) that a person reading its log would name
//! (docs/contract.md), and afterwards that no process carrying the run's `FIREDUP_RUN_ID` is left
//! and its port is free.
//!
//! Inputs: `FIREDUP_TEST_LLAMA_CPP_PYTHON` (a venv's python that imports `llama_cpp.server`, made
//! by `tests/live_servers/install_llama_cpp_python.sh` on the llama.cpp libraries that
//! `build_llama_server.sh` built) and `FIREDUP_TEST_TINY_GGUF` (`make_tiny_gguf.py`); `.ci/run`
//! makes both. Without them every test says "not run" and passes, unless
//! `FIREDUP_TEST_REQUIRE_SERVERS` requires their group, when they fail.
//!
//! The tiny model loads in well under a second, too fast to catch "mid-load" by timing: that case
//! gives the server a FIFO as its model, so it waits opening it (the kernel's `wait_for_partner`)
//! for as long as the case needs. Every wait is bounded (past `BOUND`, a hang) and nothing asserts
//! how fast anything was.
//!
//! `FIREDUP_TEST_LLAMA_RECORD=DIR` records each case's log, exit and verdict (see
//! `tests/common/llama.rs`): the fixtures in `tests/fixtures/servers/llama-cpp-python-real/` that
//! `tests/replay_llama_cpp_python.rs` replays without the server.

use crate::common;
use common::llama::{
    BOUND, Case, assert_verdict, complete_one_token, fifo, host_could_map, probe, refuses,
    with_context,
};
use common::llama_cpp_python::{llama_cpp_python, server_args};

use std::time::{Duration, Instant};

// ------------------------------------------------------------------------------ ready and stop

#[test]
fn ready_on_uvicorns_line_and_its_model_list_and_stop_leaves_nothing() {
    let Some(l) = llama_cpp_python() else { return };
    let c = Case::new("ready");
    let r = c.run(&["--timeout", "120s"], &server_args(&c, &l, &l.gguf, &[]));
    assert_verdict(
        &r,
        0,
        "ready",
        None,
        &format!("Uvicorn running on http://127.0.0.1:{}", c.port),
    );
    let http = probe(&r, "http");
    assert_eq!(
        http["target"],
        format!("http://127.0.0.1:{}/v1/models", c.port),
        "{}",
        r.explain()
    );
    assert!(http["ready_s"].as_f64().is_some(), "{}", r.explain());
    assert_eq!(r.json["port"], c.port, "{}", r.explain());
    c.stop_cleanly(&r);
}

/// `--port auto` puts a free port in place of `{port}`; `--ready-request` asks the model list and
/// one real completion token.
#[test]
fn ready_request_completes_a_token_on_an_auto_port() {
    let Some(l) = llama_cpp_python() else { return };
    let c = Case::new("ready_request");
    let mut args = server_args(&c, &l, &l.gguf, &[]);
    let at = args.iter().position(|a| a == "--port").unwrap();
    args[at + 1] = "{port}".into();
    let r = c.run(
        &["--ready-request", "--port", "auto", "--timeout", "120s"],
        &args,
    );
    assert_verdict(&r, 0, "ready", None, "Uvicorn running on http://127.0.0.1:");
    let port = r.json["port"].as_u64().expect("the picked port") as u16;
    assert!(
        common::file_text(&c.log).contains(&format!("Uvicorn running on http://127.0.0.1:{port}")),
        "{}",
        r.explain()
    );
    let request = probe(&r, "request");
    assert!(request["ready_s"].as_f64().is_some(), "{}", r.explain());
    assert!(
        request["last"]
            .as_str()
            .is_some_and(|d| d.contains("returned a token")),
        "{}",
        r.explain()
    );
    let s = c.firedup(&["stop", "--json", r.run_id()]);
    assert_eq!(s.code, 0, "{}", s.explain());
    c.assert_nothing_left();
    assert!(refuses(port), "port {port} still accepts");
}

// ------------------------------------------------------------------------ failures at start-up

#[test]
fn a_missing_model_is_model_not_found() {
    let Some(l) = llama_cpp_python() else { return };
    let c = Case::new("missing_model");
    let missing = c.env.path("no-such-model.gguf").display().to_string();
    let r = c.run(&["--timeout", "120s"], &server_args(&c, &l, &missing, &[]));
    assert_verdict(
        &r,
        1,
        "failed",
        Some("model_not_found"),
        "ValueError: Model path does not exist: ",
    );
    assert!(
        r.json["line"]["text"]
            .as_str()
            .unwrap()
            .contains("no-such-model.gguf")
    );
    c.assert_nothing_left();
}

/// The server given `bytes` as its model file: `model_load_failed` on the line with `decisive`.
fn a_broken_model_is_model_load_failed(name: &'static str, bytes: &[u8], decisive: &str) {
    let Some(l) = llama_cpp_python() else { return };
    let c = Case::new(name);
    let model = c.env.path("model.gguf");
    std::fs::write(&model, bytes).unwrap();
    let r = c.run(
        &["--timeout", "120s"],
        &server_args(&c, &l, model.to_str().unwrap(), &[]),
    );
    assert_verdict(&r, 1, "failed", Some("model_load_failed"), decisive);
    c.assert_nothing_left();
}

/// Not a GGUF at all: the vendored llama.cpp's reader names the cause on its first line; the
/// loader's "failed to load model" and Python's ValueError follow.
#[test]
fn a_garbage_file_as_model_is_model_load_failed_at_its_first_line() {
    let text: String = (0..20_000).map(|i| format!("not a model {i}\n")).collect();
    a_broken_model_is_model_load_failed(
        "garbage_model",
        text.as_bytes(),
        "gguf_init_from_reader: invalid magic characters: 'not ', expected 'GGUF'",
    );
}

#[test]
fn a_truncated_gguf_is_model_load_failed() {
    let Some(l) = llama_cpp_python() else { return };
    let bytes = std::fs::read(&l.gguf).unwrap();
    a_broken_model_is_model_load_failed(
        "truncated_gguf",
        &bytes[..bytes.len() / 2],
        "data is not within the file bounds, model is corrupted or incomplete",
    );
}

#[test]
fn a_bad_flag_is_config_error() {
    let Some(l) = llama_cpp_python() else { return };
    let c = Case::new("bad_flag");
    let r = c.run(
        &["--timeout", "120s"],
        &server_args(&c, &l, &l.gguf, &["--no-such-flag"]),
    );
    assert_verdict(
        &r,
        1,
        "failed",
        Some("config_error"),
        "error: unrecognized arguments: --no-such-flag",
    );
    c.assert_nothing_left();
}

/// Another HTTP server on the port, with the probe on: its answers (404 on /v1/models, from a
/// process outside the run) must not decide; the server loads its model, then uvicorn's bind
/// fails.
#[test]
fn port_taken_by_another_http_server_is_port_in_use() {
    let Some(l) = llama_cpp_python() else { return };
    let c = Case::new("port_in_use");
    let mut other = c.occupy_port_with_http_server();
    let r = c.run(&["--timeout", "120s"], &server_args(&c, &l, &l.gguf, &[]));
    let _ = other.kill();
    let _ = other.wait();
    assert_verdict(
        &r,
        1,
        "failed",
        Some("port_in_use"),
        &format!(
            "[Errno 98] error while attempting to bind on address ('127.0.0.1', {}): address already in use",
            c.port
        ),
    );
    c.assert_nothing_left();
}

// ------------------------------------------------------------------------------------- memory

/// A 64 GiB KV cache (`--n_ctx` 64 Mi tokens, 1 KiB each for this model) on a host with less:
/// ggml's allocation fails ("insufficient memory"), then llama-cpp-python raises "Failed to create
/// llama_context": `host_oom` on ggml's line, not the Python exception after it. Not run where
/// the mapping could succeed.
#[test]
fn a_context_too_big_for_host_memory_is_host_oom() {
    let Some(l) = llama_cpp_python() else { return };
    if host_could_map(64) {
        eprintln!("note: this host could map a 64 GiB KV cache: not run");
        return;
    }
    let c = Case::new("context_too_big");
    let args = with_context(server_args(&c, &l, &l.gguf, &[]), 64 << 20);
    let r = c.run(&["--timeout", "120s"], &args);
    assert_verdict(&r, 1, "failed", Some("host_oom"), "insufficient memory");
    c.assert_nothing_left();
}

/// A 1 GiB KV cache (`--n_ctx` 1 Mi tokens) in a 128 MiB memory cgroup that firedup joins first:
/// the mapping succeeds, clearing it touches the pages, and the kernel's OOM killer ends the
/// server; the cgroup's counter is the evidence.
#[test]
fn a_memory_cgroup_too_small_is_killed_oom_killed() {
    let Some(l) = llama_cpp_python() else { return };
    let c = Case::new("cgroup_oom");
    let args = with_context(server_args(&c, &l, &l.gguf, &[]), 1 << 20);
    c.assert_oom_killed_in_cgroup(128 << 20, &args);
}

// ------------------------------------------------------------------------------------ signals

/// SIGKILL while it waits opening its model (a FIFO nobody writes): nothing in the log yet.
#[test]
fn sigkill_mid_load_is_killed_sigkill() {
    let Some(l) = llama_cpp_python() else { return };
    let c = Case::new("sigkill_mid_load");
    let model = fifo(&c);
    let child = c.spawn(&["--timeout", "120s"], &server_args(&c, &l, &model, &[]));
    let pid = c.server_pid();
    wait_opening_a_fifo(pid);
    c.kill_server(child, pid, libc::SIGKILL, "sigkill");
    c.assert_nothing_left();
}

/// Ready (a completion answered), then SIGKILLed inside `--hold`: the kill is the verdict.
#[test]
fn sigkill_after_ready_is_killed_sigkill() {
    let Some(l) = llama_cpp_python() else { return };
    let c = Case::new("sigkill_after_ready");
    let events = c.events();
    let child = c.spawn(
        &[
            "--timeout",
            "120s",
            "--hold",
            "120s",
            "--events",
            events.to_str().unwrap(),
        ],
        &server_args(&c, &l, &l.gguf, &[]),
    );
    c.wait_for_log("Uvicorn running on");
    complete_one_token(c.port);
    c.wait_until_firedup_saw_ready();
    let r = c.kill_server(child, c.server_pid(), libc::SIGKILL, "sigkill");
    assert_eq!(r.json["phase"], "ready", "{}", r.explain());
    c.assert_nothing_left();
}

/// SIGSEGV while it waits opening its model: its own crash, `segfault`.
#[test]
fn sigsegv_mid_load_is_killed_segfault() {
    let Some(l) = llama_cpp_python() else { return };
    let c = Case::new("sigsegv_mid_load");
    let model = fifo(&c);
    let child = c.spawn(&["--timeout", "120s"], &server_args(&c, &l, &model, &[]));
    let pid = c.server_pid();
    wait_opening_a_fifo(pid);
    c.kill_server(child, pid, libc::SIGSEGV, "segfault");
    c.assert_nothing_left();
}

/// SIGSTOP while it waits opening its model: no line and no CPU time, so `stalled` after the
/// stall window; the teardown ends the stopped server (SIGCONT with its SIGTERM).
#[test]
fn sigstop_mid_load_is_stalled() {
    let Some(l) = llama_cpp_python() else { return };
    let c = Case::new("sigstop_mid_load");
    let model = fifo(&c);
    let child = c.spawn(
        &["--timeout", "120s", "--stall", "3s"],
        &server_args(&c, &l, &model, &[]),
    );
    let pid = c.server_pid();
    wait_opening_a_fifo(pid);
    c.stop_server_and_assert_stalled(child, pid);
}

/// Ctrl-C to `firedup run` while the server waits for its model: the server is stopped and the
/// teardown verified, exit 130, and the history says `interrupted`.
#[test]
fn ctrl_c_of_firedup_tears_the_server_down() {
    let Some(l) = llama_cpp_python() else { return };
    let c = Case::new("ctrl_c");
    let model = fifo(&c);
    let child = c.spawn(&["--timeout", "120s"], &server_args(&c, &l, &model, &[]));
    wait_opening_a_fifo(c.server_pid());
    c.interrupt_and_assert_torn_down(child);
}

/// Ready (a completion answered), then SIGSEGV inside `--hold`: the crash is the verdict.
#[test]
fn sigsegv_after_ready_is_killed_segfault() {
    let Some(l) = llama_cpp_python() else { return };
    let c = Case::new("sigsegv_after_ready");
    let events = c.events();
    let child = c.spawn(
        &[
            "--timeout",
            "120s",
            "--hold",
            "120s",
            "--events",
            events.to_str().unwrap(),
        ],
        &server_args(&c, &l, &l.gguf, &[]),
    );
    c.wait_for_log("Uvicorn running on");
    complete_one_token(c.port);
    c.wait_until_firedup_saw_ready();
    let r = c.kill_server(child, c.server_pid(), libc::SIGSEGV, "segfault");
    assert_eq!(r.json["phase"], "ready", "{}", r.explain());
    c.assert_nothing_left();
}

// ------------------------------------------------------------------------------------- attach

/// Started with nohup, outside firedup: `firedup watch --log` finds the writer, its profile and
/// port from its command line, and says `ready` on uvicorn's line and the model list.
#[test]
fn watch_log_of_a_nohup_server_is_ready() {
    let Some(l) = llama_cpp_python() else { return };
    let c = Case::new("watch_nohup");
    let server = c.start_with_nohup(&server_args(&c, &l, &l.gguf, &[]));
    let r = c.watch_log();
    assert_verdict(&r, 0, "ready", None, "Uvicorn running on http://127.0.0.1:");
    assert_eq!(r.json["pid"], server.0, "{}", r.explain());
    assert_eq!(r.json["port"], c.port, "{}", r.explain());
    assert_eq!(
        probe(&r, "http")["target"],
        format!("http://127.0.0.1:{}/v1/models", c.port),
        "{}",
        r.explain()
    );
    drop(server);
}

/// Waits (bounded) until `pid` is blocked opening a FIFO (the kernel's `wait_for_partner`; or,
/// where wchan is hidden, in openat(2), syscall 257 on x86-64).
fn wait_opening_a_fifo(pid: u32) {
    let deadline = Instant::now() + BOUND;
    loop {
        let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
        let syscall = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        if wchan == "wait_for_partner" || (wchan == "0" && syscall.starts_with("257 ")) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{pid} never waited opening its model ({wchan:?}, {syscall:?})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
