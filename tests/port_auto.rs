//! `run --port auto` and `stop --json` through the real binary: firedup picks a free port, the
//! command gets it in place of `{port}` and as `FIREDUP_PORT`, the port is probed, the verdict
//! carries `url` and `port`; `stop --json` says what the teardown found (the processes, the
//! port, the GPU).

use crate::common;

use common::Env;

/// `firedup run --json --port auto --timeout 60s [FLAGS] -- COMMAND`; `args` are the flags, `--`
/// and the command.
fn run_auto(env: &Env, args: &[&str]) -> common::Run {
    let mut all = vec!["run", "--json", "--port", "auto", "--timeout", "60s"];
    all.extend_from_slice(args);
    env.firedup(&all)
}

/// A server that listens on its first argument and says which port `FIREDUP_PORT` gave it.
const SERVER: &str =
    "echo \"env port $FIREDUP_PORT\"; exec python3 -m http.server \"$0\" --bind 127.0.0.1";

#[test]
fn a_server_on_an_auto_port_is_ready_there_and_a_json_stop_finds_the_port_free() {
    let env = Env::new();
    let run = run_auto(&env, &["--name", "web", "--", "sh", "-c", SERVER, "{port}"]);
    assert_eq!(run.verdict(), "ready", "{}", run.explain());
    let port = run.json["port"].as_u64().expect("a port") as u16;
    assert_eq!(run.json["url"], format!("http://127.0.0.1:{port}"));
    assert_eq!(run.json["schema"], 1);
    assert_eq!(run.json["name"], "web");
    // The port probe decided, on the port the command was given.
    let probe = &run.json["probes"][0];
    assert_eq!(probe["kind"], "port", "{}", run.explain());
    assert_eq!(probe["target"], format!("127.0.0.1:{port}"));
    let log = common::file_text(std::path::Path::new(run.json["log"].as_str().unwrap()));
    assert!(log.contains(&format!("env port {port}")), "{log}");
    let pid = run.json["pid"].as_u64().expect("a pid");

    let stop = env.fd("stop").json().opt("grace", "5s").arg("web").output();
    assert_eq!(stop.code, 0, "{}", stop.explain());
    let s = &stop.json;
    assert_eq!(s["run_id"], run.json["run_id"], "{}", stop.explain());
    assert_eq!(s["clean"], true);
    assert_eq!(s["survivors"], serde_json::json!([]));
    assert!(
        s["stopped"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p.as_u64() == Some(pid))),
        "{s}"
    );
    assert_eq!(s["port"], port);
    assert_eq!(s["port_free"], true, "{s}");
    assert_eq!(s["port_holders"], serde_json::json!([]));
    assert!(!common::alive(pid));
    // The port is free indeed: it can be bound again.
    std::net::TcpListener::bind(("127.0.0.1", port)).expect("the port is free after the stop");
}

#[test]
fn every_placeholder_is_filled_and_a_failure_still_says_the_port() {
    let env = Env::new();
    let run = run_auto(
        &env,
        &[
            "--",
            "sh",
            "-c",
            "echo \"args $0 $1, env $FIREDUP_PORT\"; exit 3",
            "{port}",
            "--port={port}",
        ],
    );
    assert_eq!(run.verdict(), "exited", "{}", run.explain());
    assert_eq!(run.code, 3);
    let port = run.json["port"]
        .as_u64()
        .expect("the port is known also when it failed");
    let want = format!("args {port} --port={port}, env {port}");
    assert_eq!(run.json["line"]["text"], want, "{}", run.explain());
}

#[test]
fn a_command_without_a_placeholder_is_told_to_use_firedup_port() {
    let env = Env::new();
    let script = "echo \"env $FIREDUP_PORT\"; exec python3 -m http.server --bind 127.0.0.1 \"$FIREDUP_PORT\"";
    let run = run_auto(&env, &["--", "sh", "-c", script]);
    assert!(
        run.stderr
            .contains("COMMAND has no {port} argument; the server must listen on $FIREDUP_PORT"),
        "{}",
        run.explain()
    );
    assert_eq!(run.verdict(), "ready", "{}", run.explain());
    let stop = env
        .fd("stop")
        .json()
        .opt("grace", "5s")
        .arg(run.run_id())
        .output();
    assert_eq!(stop.json["port_free"], true, "{}", stop.explain());
}

#[test]
fn a_fixed_port_is_in_the_verdict_and_placeholders_are_left_alone_without_auto() {
    let env = Env::new();
    let port = common::free_port();
    let run = env
        .run()
        .json()
        .opt("port", port.to_string())
        .timeout("60s")
        .command(&["sh", "-c", "echo \"arg $0\"; exit 3", "{port}"])
        .output();
    assert_eq!(run.verdict(), "exited", "{}", run.explain());
    assert_eq!(run.json["port"], port);
    assert_eq!(run.json["line"]["text"], "arg {port}");
}

#[test]
fn port_auto_is_refused_where_it_cannot_mean_this_machine() {
    let env = Env::new();
    let table: [(&[&str], &str); 3] = [
        (
            &["watch", "--port", "auto", "--log", "x.log"],
            "--port auto is for `firedup run`",
        ),
        (
            &["run", "--port", "auto", "--slurm", "--", "true"],
            "--port auto does not go with --slurm",
        ),
        (
            &["run", "--port", "eighty", "--", "true"],
            "'eighty' is not a port",
        ),
    ];
    for (args, says) in table {
        let run = env.firedup(args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.explain());
        assert!(run.stderr.contains(says), "{args:?}: {}", run.explain());
    }
}

#[test]
fn a_json_stop_of_a_run_with_no_known_port_says_null() {
    let env = Env::new();
    let run = env
        .run()
        .json()
        .ready_line("up")
        .timeout("60s")
        .shell("echo up; exec sleep 300")
        .output();
    assert_eq!(run.verdict(), "ready", "{}", run.explain());
    assert_eq!(run.json["url"], serde_json::Value::Null);
    let stop = env
        .fd("stop")
        .json()
        .opt("grace", "5s")
        .arg(run.run_id())
        .output();
    assert_eq!(stop.code, 0, "{}", stop.explain());
    assert_eq!(stop.json["clean"], true, "{}", stop.explain());
    assert_eq!(stop.json["port"], serde_json::Value::Null);
    assert_eq!(stop.json["port_free"], serde_json::Value::Null);
    assert_eq!(stop.json["stopped"].as_array().map(Vec::len), Some(1));
}

#[test]
fn a_json_stop_says_who_still_holds_the_port() {
    let env = Env::new();
    // Someone else (this test) listens on the port the run's command names. Ready by the redis
    // profile's ready line alone (--no-probe); the port comes from the command's own --port.
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port().to_string();
    let run = env
        .run()
        .json()
        .opt("profile", "redis")
        .flag("no-probe")
        .timeout("60s")
        .command(&[
            "sh",
            "-c",
            "echo 'Ready to accept connections'; exec sleep 300",
            "sh",
            "--port",
            &port,
        ])
        .output();
    assert_eq!(run.verdict(), "ready", "{}", run.explain());
    assert_eq!(run.json["port"].to_string(), port);

    let stop = env
        .fd("stop")
        .json()
        .opt("grace", "5s")
        .arg(run.run_id())
        .output();
    let s = &stop.json;
    // The run's processes are gone; the port is not free, and the stop says who holds it.
    assert_eq!(stop.code, 0, "{}", stop.explain());
    assert_eq!(s["clean"], true, "{s}");
    assert_eq!(s["port"].to_string(), port);
    assert_eq!(s["port_free"], false, "{s}");
    assert_eq!(
        s["port_holders"],
        serde_json::json!([std::process::id()]),
        "{s}"
    );
    drop(holder);
}

#[test]
fn a_server_that_ignores_sigterm_is_killed_and_the_json_stop_says_it_escalated() {
    let env = Env::new();
    let run = env
        .run()
        .json()
        .ready_line("up")
        .timeout("60s")
        .shell("trap '' TERM; echo up; while :; do sleep 1; done")
        .output();
    assert_eq!(run.verdict(), "ready", "{}", run.explain());
    let stop = env
        .fd("stop")
        .json()
        .opt("grace", "500ms")
        .arg(run.run_id())
        .output();
    assert_eq!(stop.code, 0, "{}", stop.explain());
    assert_eq!(stop.json["escalated"], true, "{}", stop.explain());
    assert_eq!(stop.json["clean"], true);
    assert_eq!(stop.json["survivors"], serde_json::json!([]));
}

#[test]
fn a_profiles_health_probe_asks_on_the_auto_port() {
    let env = Env::new();
    // The scripted vLLM: /health answers 503 for a second, then 200 (whether a 503 was seen
    // depends on how fast it starts: not asserted).
    let vllm = env.fake_vllm();
    let run = run_auto(
        &env,
        &[
            "--",
            &vllm,
            "serve",
            "fake-model",
            "--port",
            "{port}",
            "--health-after",
            "1.0",
        ],
    );
    assert_eq!(run.verdict(), "ready", "{}", run.explain());
    let port = run.json["port"].as_u64().expect("a port");
    let http = run.json["probes"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["kind"] == "http"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        http["target"],
        format!("http://127.0.0.1:{port}/health"),
        "{}",
        run.explain()
    );
    assert!(http["ready_s"].is_number(), "{}", run.explain());
    let stop = env
        .fd("stop")
        .json()
        .opt("grace", "5s")
        .arg(run.run_id())
        .output();
    assert_eq!(stop.json["clean"], true, "{}", stop.explain());
}

#[test]
fn a_json_stop_says_whether_the_gpu_memory_was_released() {
    // A stand-in nvidia-smi: 20480 MiB for the pid in $FAKE_GPU_PIDFILE while it lives, or, with
    // $FAKE_GPU_STUCK, for ever (a driver that never releases it).
    let env = Env::new();
    let bin = env.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let smi = bin.join("nvidia-smi");
    std::fs::write(
        &smi,
        "#!/bin/sh\n[ -s \"$FAKE_GPU_PIDFILE\" ] || exit 0\npid=$(cat \"$FAKE_GPU_PIDFILE\")\n\
         if [ -n \"$FAKE_GPU_STUCK\" ] || kill -0 \"$pid\" 2>/dev/null; then echo \"$pid, 20480\"; fi\nexit 0\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    // (stuck, gpu_after_mib, gpu_released)
    let table = [("", 0, true), ("1", 20480, false)];
    for (i, (stuck, after, released)) in table.into_iter().enumerate() {
        let pidfile = env.path(&format!("gpu-{i}.pid")).display().to_string();
        let vars = [
            ("PATH", path.as_str()),
            ("FAKE_GPU_PIDFILE", pidfile.as_str()),
            ("FAKE_GPU_STUCK", stuck),
        ];
        let script = format!("echo $$ > {pidfile}; echo serving; exec sleep 300");
        let run = env.cmd_json(
            &[
                "run",
                "--json",
                "--ready-line",
                "serving",
                "--timeout",
                "60s",
                "--",
                "sh",
                "-c",
                &script,
            ],
            &vars,
        );
        assert_eq!(run.verdict(), "ready", "{}", run.explain());
        let stop = env.cmd_json(&["stop", "--json", "--grace", "2s", run.run_id()], &vars);
        let s = &stop.json;
        assert_eq!(s["clean"], true, "stuck={stuck:?}: {}", stop.explain());
        assert_eq!(s["gpu_after_mib"], after, "stuck={stuck:?}: {s}");
        assert_eq!(s["gpu_released"], released, "stuck={stuck:?}: {s}");
    }
}
