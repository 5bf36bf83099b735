//! Probes through the real binary: a scripted HTTP server whose /health answers 503 and then 200
//! with the real request lagging further, auto-detection deriving the port from the command line,
//! firedup's own probe faults, someone else on the port, sd_notify, GPU memory from a stand-in
//! nvidia-smi, per-phase budgets, and `firedup profiles`.

use crate::common;

use std::net::TcpListener;
use std::path::PathBuf;

use common::{Env, fixture, free_port};

fn probe<'a>(json: &'a serde_json::Value, kind: &str) -> &'a serde_json::Value {
    json["probes"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["kind"] == kind))
        .unwrap_or(&serde_json::Value::Null)
}

/// Issue 15: the llamacpp profile is ready by llama-server's own /health (503 "Loading model",
/// then 200), whatever its log says: a `llama-server` whose log never shows a ready line the
/// profile knows is `ready` once /health answers 200 (before: `stalled`/`timed_out` waiting for
/// the line).
#[test]
fn llama_server_is_ready_by_its_health_answer_without_a_ready_line() {
    let env = Env::new();
    let server = env.script(
        "llama-server",
        &format!(
            "exec python3 {} \"$@\"",
            fixture("servers/fake_llm_server.py")
        ),
    );
    let port = free_port().to_string();
    let r = env
        .run()
        .json()
        .timeout("30s")
        .command(&[&server, "--port", &port, "--health-after", "1.0"])
        .output();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    let http = probe(&r.json, "http");
    assert_eq!(http["target"], format!("http://127.0.0.1:{port}/health"));
    let h = http["ready_s"].as_f64().expect("health ready time");
    assert!(h >= 1.0, "ready before /health answered 200: {h}");
    assert!(
        r.json["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("http"),
        "{}",
        r.json["reason"]
    );
}

/// Issue 15: llama-cpp-python's server has no /health; its profile probes /v1/models, and a
/// 1-token request with `--ready-request`.
#[test]
fn llama_cpp_python_is_probed_at_a_route_it_has() {
    let env = Env::new();
    let port = free_port().to_string();
    let server = fixture("servers/fake_llm_server.py");
    let r = env
        .run()
        .json()
        .opt("profile", "llama-cpp-python")
        .flag("ready-request")
        .timeout("30s")
        .command(&["python3", &server, "--port", &port, "--uvicorn-line"])
        .output();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    let http = probe(&r.json, "http");
    assert_eq!(http["target"], format!("http://127.0.0.1:{port}/v1/models"));
    assert!(
        http["last"]
            .as_str()
            .unwrap_or_default()
            .contains("HTTP 200"),
        "{}",
        r.explain()
    );
    assert!(probe(&r.json, "request")["ready_s"].as_f64().is_some());
    let line = r.json["line"]["text"].as_str().unwrap_or_default();
    assert!(line.contains("Uvicorn running on"), "{line}");
}

#[test]
fn health_503_then_200_and_a_lagging_real_request_detected_from_the_command_line() {
    let env = Env::new();
    let vllm = env.fake_vllm();
    let port = free_port().to_string();
    let r = env
        .run()
        .json()
        .timeout("30s")
        .flag("ready-request")
        .opt("then", "echo \"$FIREDUP_URL\" > then-url.txt")
        .command(&[
            &vllm,
            "serve",
            "fake-model",
            "--port",
            &port,
            "--health-after",
            "1.0",
            "--request-after",
            "2.5",
        ])
        .output();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    // The profile came from the command line, and so did the port.
    assert!(
        r.stderr.contains("http: HTTP 503"),
        "the 503 phase was not shown:\n{}",
        r.stderr
    );
    let http = probe(&r.json, "http");
    let request = probe(&r.json, "request");
    assert_eq!(
        http["target"],
        format!("http://127.0.0.1:{port}/health"),
        "{}",
        r.explain()
    );
    let h = http["ready_s"].as_f64().expect("health ready time");
    let q = request["ready_s"].as_f64().expect("request ready time");
    assert!(h >= 1.0, "health counted ready before it answered 200: {h}");
    assert!(
        q >= 2.5,
        "request counted ready before it returned a token: {q}"
    );
    let gap = r.json["request_gap_s"].as_f64().expect("request_gap_s");
    assert!((gap - (q - h)).abs() < 0.01 && gap >= 1.0, "gap {gap}");
    assert!(
        request["last"].as_str().unwrap().contains("fake-model"),
        "{}",
        r.explain()
    );
    assert!(r.json["elapsed_s"].as_f64().unwrap() >= 2.5);
    // --then saw the server's address; it stopped the server afterwards.
    assert_eq!(
        common::file_text(&env.path("then-url.txt")).trim(),
        format!("http://127.0.0.1:{port}")
    );
    assert_eq!(r.json["then"]["exit_code"], 0);
}

#[test]
fn the_real_request_sends_the_servers_own_api_key_and_never_shows_it() {
    let env = Env::new();
    let vllm = env.fake_vllm();
    let port = free_port().to_string();
    let r = env
        .run()
        .json()
        .timeout("20s")
        .flag("ready-request")
        .opt("then", "true")
        .command(&[
            &vllm,
            "serve",
            "m",
            "--port",
            &port,
            "--api-key",
            "sk-firedup-test-key",
        ])
        .output();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert!(probe(&r.json, "request")["ready_s"].as_f64().is_some());
    assert!(
        !r.stdout.contains("sk-firedup-test-key") && !r.stderr.contains("sk-firedup-test-key"),
        "{}",
        r.explain()
    );
}

#[test]
fn log_says_ready_but_health_never_does_is_not_ready() {
    let env = Env::new();
    let vllm = env.fake_vllm();
    let port = free_port().to_string();
    let r = env
        .run()
        .json()
        .timeout("3s")
        .command(&[
            &vllm,
            "serve",
            "m",
            "--port",
            &port,
            "--health-after",
            "600",
        ])
        .output();
    assert_eq!((r.code, r.verdict()), (124, "timed_out"), "{}", r.explain());
    assert!(
        r.json["reason"].as_str().unwrap().contains(&format!(
            "still waiting for: http http://127.0.0.1:{port}/health (HTTP 503"
        )),
        "{}",
        r.explain()
    );
}

#[test]
fn no_probe_judges_by_the_log_alone() {
    let env = Env::new();
    let vllm = env.fake_vllm();
    let port = free_port().to_string();
    let r = env
        .run()
        .json()
        .flag("no-probe")
        .timeout("10s")
        .opt("then", "true")
        .command(&[
            &vllm,
            "serve",
            "m",
            "--port",
            &port,
            "--health-after",
            "600",
        ])
        .output();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert_eq!(r.json["probes"], serde_json::json!([]), "{}", r.explain());
}

#[test]
fn an_unresolvable_health_host_is_a_monitor_error_within_seconds() {
    let env = Env::new();
    let r = env
        .run()
        .json()
        .ready_line("never printed")
        .opt("http", "http://no-such-host.invalid:8000/health")
        .timeout("60s")
        .command(&["sleep", "60"])
        .output();
    assert_eq!(
        (r.code, r.verdict()),
        (7, "monitor_error"),
        "{}",
        r.explain()
    );
    let reason = r.json["reason"].as_str().unwrap();
    assert!(
        reason.contains("http probe") && reason.contains("cannot resolve host"),
        "{reason}"
    );
    // firedup's own probe failed, not the server: it is left running (issue 11, case 10), and
    // `firedup stop RUN_ID` ends it.
    assert_eq!(
        r.json["server_running"], true,
        "the server was stopped on firedup's own fault"
    );
    let run_id = r.json["run_id"].as_str().unwrap();
    assert_eq!(env.fd("stop").arg(run_id).output().code, 0);
}

#[test]
fn someone_else_on_the_port_is_reported_not_taken_as_ready() {
    let env = Env::new();
    // The test itself holds the port: it is not part of the watched tree.
    let squatter = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = squatter.local_addr().unwrap().port().to_string();
    let r = env
        .run()
        .json()
        .opt("port", &port)
        .timeout("3s")
        .command(&["sleep", "30"])
        .output();
    assert_eq!((r.code, r.verdict()), (124, "timed_out"), "{}", r.explain());
    let me = format!("answered by pid {}", std::process::id());
    assert!(
        r.json["reason"].as_str().unwrap().contains(&me),
        "{}",
        r.explain()
    );
    assert!(
        r.stderr.contains(&me),
        "not shown while waiting:\n{}",
        r.stderr
    );
    drop(squatter);
}

#[test]
fn sd_notify_ready_status_and_extended_timeout() {
    let env = Env::new();
    let server = env.path("notifier.py");
    std::fs::write(
        &server,
        r#"import os, socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
addr = os.environ["NOTIFY_SOCKET"]
s.sendto(b"STATUS=loading weights", addr)
s.sendto(b"EXTEND_TIMEOUT_USEC=30000000", addr)
time.sleep(4.5)
s.sendto(b"READY=1\nSTATUS=serving", addr)
time.sleep(30)
"#,
    )
    .unwrap();
    let r = env
        .run()
        .json()
        .flag("notify")
        .arg(
            // Long enough for python3 to start and send EXTEND on a loaded machine; READY comes
            // after it).arg(so only the extension can make this `ready`.
            "--timeout",
        )
        .arg("3s")
        .opt("then", "true")
        .command(&["python3", server.to_str().unwrap()])
        .output();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    let n = probe(&r.json, "notify");
    assert!(n["ready_s"].as_f64().unwrap() >= 4.5, "{}", r.explain());
    assert_eq!(n["last"], "READY=1", "{}", r.explain());
    assert!(
        r.json["reason"]
            .as_str()
            .unwrap()
            .contains("notify NOTIFY_SOCKET"),
        "{}",
        r.explain()
    );
}

/// A stand-in `nvidia-smi` that reports, for the pid the server wrote into `gpu.txt`, the memory
/// written there, while that process is alive.
fn stand_in_nvidia_smi(env: &Env) -> PathBuf {
    let bin = env.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let gpu = env.path("gpu.txt");
    let smi = bin.join("nvidia-smi");
    std::fs::write(
        &smi,
        format!(
            "#!/bin/sh\n[ -f {g} ] || exit 0\nread pid mib < {g}\nkill -0 \"$pid\" 2>/dev/null && echo \"$pid, $mib\"\nexit 0\n",
            g = gpu.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn growing_gpu_memory_is_progress_and_is_reported_with_teardown() {
    let env = Env::new();
    let bin = stand_in_nvidia_smi(&env);
    let gpu = env.path("gpu.txt");
    // Quiet for 7 s (no log line, no CPU) while its GPU memory grows; the stall window is 5 s
    // (GPU memory is sampled every 2 s: room for a late sample on a loaded machine).
    let server = env.script(
        "loader.sh",
        &format!(
            "echo loading\nfor m in 1000 8000 16000 30000 42000 52000 60000; do echo \"$$ $m\" > {g}; sleep 1; done\necho READY\nsleep 30",
            g = gpu.display()
        ),
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let r = env.cmd_json(
        &[
            "run",
            "--json",
            "--ready-line",
            "READY",
            "--stall",
            "5s",
            "--then",
            "true",
            "--",
            &server,
        ],
        &[("PATH", &path)],
    );
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    let g = &r.json["gpu"];
    assert!(g["peak_mib"].as_u64().unwrap() >= 42000, "{}", r.explain());
    assert_eq!(g["after_teardown_mib"], 0, "{}", r.explain());
    // The same quiet load without GPU growth stalls.
    let flat = env.script(
        "flat.sh",
        &format!(
            "echo loading\necho \"$$ 1000\" > {g}\nsleep 30",
            g = gpu.display()
        ),
    );
    let r = env.cmd_json(
        &[
            "run",
            "--json",
            "--ready-line",
            "READY",
            "--stall",
            "3s",
            "--",
            &flat,
        ],
        &[("PATH", &path)],
    );
    assert_eq!((r.code, r.verdict()), (6, "stalled"), "{}", r.explain());
    assert!(
        r.json["reason"]
            .as_str()
            .unwrap()
            .contains("GPU memory growth"),
        "{}",
        r.explain()
    );
}

#[test]
fn a_phase_budget_bounds_one_phase_and_names_it() {
    let env = Env::new();
    let server = env.script(
        "sgl.sh",
        "echo '[2025-03-01 10:00:00 TP0] Load weight begin. avail mem=78.50 GB'\necho '[2025-03-01 10:00:01 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=20.1 GB'\nsleep 30",
    );
    let r = env
        .run()
        .json()
        .opt("profile", "sglang")
        .flag("no-probe")
        .opt("phase-timeout", "capture_cuda_graph=1500ms")
        .command(&[&server])
        .output();
    assert_eq!((r.code, r.verdict()), (124, "timed_out"), "{}", r.explain());
    assert_eq!(r.json["phase"], "capture_cuda_graph");
    assert!(
        r.json["reason"]
            .as_str()
            .unwrap()
            .contains("phase capture_cuda_graph: it ran past its budget of 1.5s"),
        "{}",
        r.explain()
    );
    // A phase the profile does not have is a usage error that lists the ones it has.
    let r = env
        .run()
        .opt("profile", "sglang")
        .opt("phase-timeout", "compile=1m")
        .command(&["true"])
        .output();
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.contains("no phase 'compile'") && r.stderr.contains("capture_cuda_graph"),
        "{}",
        r.stderr
    );
}

#[test]
fn profiles_list_show_check_and_user_overrides() {
    let env = Env::new();
    let r = env.fd("profiles").output();
    assert_eq!(r.code, 0, "{}", r.explain());
    for name in [
        "sglang",
        "vllm",
        "tgi",
        "llamacpp",
        "llama-cpp-python",
        "ollama",
        "triton",
        "pytorch",
        "postgres",
        "redis",
        "generic",
    ] {
        assert!(
            r.stdout.lines().any(|l| l.starts_with(name)),
            "{name} missing:\n{}",
            r.stdout
        );
    }
    let r = env.fd("profiles").arg("show").arg("sglang").output();
    assert!(
        r.stdout.contains("fired up and ready to roll"),
        "{}",
        r.stdout
    );

    let good = env.path("mine.toml");
    std::fs::write(
        &good,
        "name = \"mysrv\"\ndescription = \"my server\"\ndetect = ['(^|/)mysrv(\\s|$)']\nready = ['serving on']\n\n[[phase]]\nname = \"warm\"\npattern = 'warming'\n",
    )
    .unwrap();
    let r = env
        .fd("profiles")
        .arg("check")
        .arg(good.to_str().unwrap())
        .output();
    assert_eq!(r.code, 0, "{}", r.explain());
    assert!(r.stdout.contains("ok: profile mysrv"), "{}", r.stdout);

    let bad = env.path("bad.toml");
    std::fs::write(
        &bad,
        "name = \"b\"\ndescription = \"d\"\nready = ['(unclosed']\n",
    )
    .unwrap();
    let r = env
        .fd("profiles")
        .arg("check")
        .arg(bad.to_str().unwrap())
        .output();
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.contains(&format!(
            "{}:3: field ready[0]: invalid regex",
            bad.display()
        )),
        "{}",
        r.stderr
    );

    // A user profile in the config dir is detected from the command line and used.
    let conf = env.path("conf");
    std::fs::create_dir_all(conf.join("firedup/profiles")).unwrap();
    std::fs::copy(&good, conf.join("firedup/profiles/mysrv.toml")).unwrap();
    // It outlives the confirmation window after its ready line (a server that exits within it
    // was not ready), then ends on its own.
    let srv = env.script("mysrv", "echo warming\necho 'serving on :9'\nsleep 2");
    let r = env.cmd_json(
        &["run", "--json", "--", &srv],
        &[("XDG_CONFIG_HOME", conf.to_str().unwrap())],
    );
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    let phases: Vec<&str> = r.json["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["warm", "ready"], "{}", r.explain());
    let r = env.cmd_json(
        &["profiles"],
        &[("XDG_CONFIG_HOME", conf.to_str().unwrap())],
    );
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("mysrv") && l.contains("file")),
        "{}",
        r.stdout
    );
}
