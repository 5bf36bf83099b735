//! firedup over SSH against a real sshd (tests/common/sshd.rs): launch and watch on the "remote"
//! host (this machine, reached through sshd as another login), the seed case, transport faults
//! that must end in `monitor_error` at once, a killed SSH master and a frozen link that firedup
//! must survive with every log line reported exactly once, and arguments that must reach the
//! remote command exactly.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::sshd::{NetLink, Sshd, netns_or_skip};
use common::{Env, Run};

/// Runs firedup with the host's ssh config and a state dir of its own on the remote side.
fn fd(env: &Env, sshd: &Sshd, args: &[&str]) -> Run {
    let remote_state = env.path("remote-state");
    env.cmd_json(
        args,
        &[
            ("FIREDUP_SSH_CONFIG", sshd.config_path().to_str().unwrap()),
            ("FIREDUP_REMOTE_STATE_DIR", remote_state.to_str().unwrap()),
        ],
    )
}

fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn run_over_ssh_is_ready_and_stop_ps_logs_work_there() {
    let sshd = Sshd::start();
    let env = Env::new();
    let server = env.script(
        "server.sh",
        "echo 'Load weight begin'; sleep 0.3; echo 'fired up and ready to roll'; sleep 60",
    );
    let r = fd(
        &env,
        &sshd,
        &[
            "run",
            "--json",
            "--host",
            "fdtest",
            "--ready-line",
            "ready to roll",
            "--",
            &server,
        ],
    );
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert_eq!(r.json["host"], "fdtest");
    assert_eq!(r.json["server_running"], true);
    let id = r.run_id().to_string();
    let pid = r.json["pid"].as_u64().unwrap();
    assert!(common::alive(pid), "the remote server is not running");
    // The log lives on the remote side, in the remote state dir.
    assert!(
        r.json["log"]
            .as_str()
            .unwrap()
            .starts_with(env.path("remote-state").to_str().unwrap()),
        "{}",
        r.explain()
    );
    let ps = fd(&env, &sshd, &["ps", "--json", "--host", "fdtest"]);
    assert_eq!(ps.code, 0, "{}", ps.explain());
    assert!(ps.stdout.contains(&id), "{}", ps.stdout);
    // Without --host, the run is not here: the history knows where it ran and says what works.
    for command in ["stop", "logs"] {
        let here = fd(&env, &sshd, &[command, &id]);
        assert_eq!(here.code, 2, "{}", here.explain());
        assert!(
            here.stderr
                .contains(&format!("firedup {command} --host fdtest {id}")),
            "{}",
            here.explain()
        );
    }
    assert!(common::alive(pid), "a refused stop stopped the server");
    let logs = fd(&env, &sshd, &["logs", "--host", "fdtest", &id]);
    assert!(
        logs.stdout.contains("fired up and ready to roll"),
        "{}",
        logs.explain()
    );
    let stop = fd(&env, &sshd, &["stop", "--host", "fdtest", &id]);
    assert_eq!(stop.code, 0, "{}", stop.explain());
    assert!(!common::alive(pid), "still running after stop --host");
}

/// A login shell that takes seconds in its rc files (conda, environment modules on a network
/// home) delays every command's start, the agent's first heartbeat included: that is a slow
/// start, not a lost link. Before, the agent was judged by the 3 s heartbeat bound from its
/// launch: every attempt was killed mid-rc and the run ended `monitor_error`.
#[test]
fn a_login_shell_slower_than_the_heartbeat_bound_is_waited_for() {
    let sshd = Sshd::start_with("ForceCommand sleep 3.5; eval \"$SSH_ORIGINAL_COMMAND\"");
    let env = Env::new();
    let server = env.script("server.sh", "echo 'fired up and ready to roll'; sleep 60");
    let r = fd(
        &env,
        &sshd,
        &[
            "run",
            "--json",
            "--host",
            "fdtest",
            "--ready-line",
            "ready to roll",
            "--",
            &server,
        ],
    );
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert!(!r.stderr.contains("lost contact"), "{}", r.explain());
    let id = r.run_id().to_string();
    let stop = fd(&env, &sshd, &["stop", "--host", "fdtest", &id]);
    assert_eq!(stop.code, 0, "{}", stop.explain());
}

#[test]
fn a_failure_over_ssh_is_named_and_the_server_stopped() {
    let sshd = Sshd::start();
    let env = Env::new();
    let server = env.script(
        "oom.sh",
        "echo 'Capture cuda graph begin'; echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.'; exit 1",
    );
    let r = fd(
        &env,
        &sshd,
        &[
            "run",
            "--json",
            "--host",
            "fdtest",
            "--ready-line",
            "never",
            "--",
            &server,
        ],
    );
    assert_eq!((r.code, r.verdict()), (1, "failed"), "{}", r.explain());
    assert_eq!(r.signature(), Some("cuda_oom"), "{}", r.explain());
    assert_eq!(r.json["exit"]["code"], 1, "{}", r.explain());
}

#[test]
fn a_missing_remote_command_never_started() {
    let sshd = Sshd::start();
    let env = Env::new();
    let r = fd(
        &env,
        &sshd,
        &[
            "run",
            "--json",
            "--host",
            "fdtest",
            "--ready-line",
            "x",
            "--",
            "no-such-server-binary",
        ],
    );
    assert_eq!(
        (r.code, r.verdict()),
        (5, "never_started"),
        "{}",
        r.explain()
    );
    assert!(
        r.json["reason"]
            .as_str()
            .unwrap()
            .contains("no-such-server-binary"),
        "{}",
        r.explain()
    );
}

#[test]
fn the_seed_case_over_ssh_is_never_started_not_a_wait() {
    let sshd = Sshd::start();
    let env = Env::new();
    let r = fd(
        &env,
        &sshd,
        &[
            "watch",
            "--json",
            "--host",
            "fdtest",
            "--log",
            "/path/that/never/appears.log",
            "--log-grace",
            "2s",
            "--ready-line",
            "READY",
        ],
    );
    assert_eq!(
        (r.code, r.verdict()),
        (5, "never_started"),
        "{}",
        r.explain()
    );
    assert!(
        r.json["reason"]
            .as_str()
            .unwrap()
            .contains("/path/that/never/appears.log was never created"),
        "{}",
        r.explain()
    );
}

#[test]
fn transport_failures_are_monitor_errors_at_once_each_with_its_reason() {
    let sshd = Sshd::start();
    let env = Env::new();
    let cases: Vec<(std::path::PathBuf, &str)> = vec![
        (sshd.config_with_wrong_host_key(), "host key does not match"),
        (sshd.config_without_client_key(), "authentication failed"),
    ];
    for (config, want) in cases {
        let r = env.cmd_json(
            &[
                "watch",
                "--json",
                "--host",
                "fdtest",
                "--log",
                "/tmp/x.log",
                "--ready-line",
                "R",
            ],
            &[("FIREDUP_SSH_CONFIG", config.to_str().unwrap())],
        );
        assert_eq!(
            (r.code, r.verdict()),
            (7, "monitor_error"),
            "{}",
            r.explain()
        );
        let reason = r.json["reason"].as_str().unwrap();
        assert!(reason.contains(want), "{want}: {reason}");
    }
    // Nothing listens on the port: refused, at once.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let r = env.cmd_json(
        &[
            "run",
            "--json",
            "--host",
            &format!("root@127.0.0.1:{port}"),
            "--ready-line",
            "R",
            "--",
            "true",
        ],
        &[("FIREDUP_SSH_CONFIG", sshd.config_path().to_str().unwrap())],
    );
    assert_eq!(
        (r.code, r.verdict()),
        (7, "monitor_error"),
        "{}",
        r.explain()
    );
}

#[test]
fn arguments_reach_the_remote_command_exactly() {
    let sshd = Sshd::start();
    let env = Env::new();
    let dump = env.script(
        "dump.sh",
        &format!(
            "python3 -c 'import json,sys; open(\"{}\",\"w\").write(json.dumps(sys.argv[1:]))' \"$@\"\necho DONE",
            env.path("argv.json").display()
        ),
    );
    let tricky = [
        "two words",
        "it's \"quoted\"",
        "$(touch /tmp/firedup-injected)",
        "; rm -rf /nonexistent",
        "back\\slash",
        "new\nline",
        "ünïcødé ✓",
        "",
        "*",
    ];
    let mut args = vec![
        "run",
        "--json",
        "--host",
        "fdtest",
        "--until",
        "exit",
        "--",
        dump.as_str(),
    ];
    args.extend(tricky.iter());
    let r = fd(&env, &sshd, &args);
    assert_eq!((r.code, r.verdict()), (0, "succeeded"), "{}", r.explain());
    let got: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(env.path("argv.json")).unwrap()).unwrap();
    assert_eq!(got, tricky, "arguments changed on the way");
    assert!(!Path::new("/tmp/firedup-injected").exists(), "a $() ran");
}

/// A server that prints numbered lines slowly, then the ready line.
fn counting_server(env: &Env, n: u32, every: &str) -> String {
    env.script(
        "count.sh",
        &format!("i=1; while [ $i -le {n} ]; do echo \"step $i of {n}\"; i=$((i+1)); sleep {every}; done; echo READY; sleep 60"),
    )
}

/// Every `step K of N` line appears exactly once among the observed lines.
fn assert_each_line_once(events: &Path, n: u32) {
    let mut seen = vec![0u32; n as usize + 1];
    for e in json_lines(events) {
        if e["kind"] == "line" {
            if let Some(k) = e["text"]
                .as_str()
                .and_then(|t| t.strip_prefix("step "))
                .and_then(|t| t.split(' ').next())
                .and_then(|k| k.parse::<usize>().ok())
            {
                seen[k] += 1;
            }
        }
    }
    let wrong: Vec<(usize, u32)> = seen
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, c)| **c != 1)
        .map(|(k, c)| (k, *c))
        .collect();
    assert!(
        wrong.is_empty(),
        "lines not seen exactly once (line, times): {wrong:?}"
    );
}

#[test]
fn a_killed_ssh_master_is_lost_contact_then_resumed_without_losing_or_doubling_lines() {
    let sshd = Sshd::start();
    let env = Env::new();
    let server = counting_server(&env, 40, "0.1");
    let events = env.path("events.ndjson");
    let config = sshd.config_path();
    let child = spawn_fd(
        &env,
        &sshd,
        &[
            "run",
            "--json",
            "--host",
            "fdtest",
            "--ready-line",
            "READY",
            "--events",
            events.to_str().unwrap(),
            "--then",
            "true",
            "--",
            &server,
        ],
    );
    wait_for_lines(&events, 5);
    // Kill this test's ControlMaster once the watch is under way.
    let killed = std::process::Command::new("pkill")
        .args(["-9", "-f", &format!("ssh .*-F {}", config.display())])
        .status()
        .unwrap();
    assert!(killed.success(), "no ControlMaster to kill");
    let (json, stdout, stderr) = finish(child, Duration::from_secs(60));
    assert_eq!(json["verdict"], "ready", "{stdout}\n{stderr}");
    assert!(stderr.contains("lost contact with fdtest"), "{stderr}");
    assert!(stderr.contains("reconnected to fdtest"), "{stderr}");
    assert_each_line_once(&events, 40);
}

#[test]
fn a_frozen_link_is_lost_contact_never_still_starting_and_the_verdict_is_the_servers() {
    if !netns_or_skip("a_frozen_link_is_lost_contact") {
        return;
    }
    let link = NetLink::new();
    let sshd = Sshd::start_in(&link);
    let env = Env::new();
    // 60 lines over 6 s; the link is frozen from ~1.5 s to ~5 s: lines written meanwhile must
    // arrive after the thaw, each exactly once.
    let server = counting_server(&env, 60, "0.1");
    let events = env.path("events.ndjson");
    let child = spawn_fd(
        &env,
        &sshd,
        &[
            "run",
            "--json",
            "--host",
            "fdtest",
            "--ready-line",
            "READY",
            "--events",
            events.to_str().unwrap(),
            "--then",
            "true",
            "--",
            &server,
        ],
    );
    wait_for_lines(&events, 5);
    link.freeze();
    std::thread::sleep(Duration::from_millis(3500));
    link.thaw();
    let (json, stdout, stderr) = finish(child, Duration::from_secs(60));
    assert_eq!(
        json["verdict"], "ready",
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert!(stderr.contains("lost contact with fdtest"), "{stderr}");
    assert!(!stderr.contains("stalled"), "{stderr}");
    assert_each_line_once(&events, 60);
}

#[test]
fn contact_not_regained_in_time_is_monitor_error_and_the_server_keeps_running() {
    if !netns_or_skip("contact_not_regained_in_time") {
        return;
    }
    let link = NetLink::new();
    let sshd = Sshd::start_in(&link);
    let env = Env::new();
    let server = env.script("slow.sh", "echo starting; sleep 8; echo READY; sleep 60");
    let child = spawn_fd(
        &env,
        &sshd,
        &[
            "run",
            "--json",
            "--host",
            "fdtest",
            "--ready-line",
            "READY",
            "--reconnect-for",
            "2s",
            "--events",
            env.path("events.ndjson").to_str().unwrap(),
            "--",
            &server,
        ],
    );
    wait_for_lines(&env.path("events.ndjson"), 1);
    link.freeze();
    let out = wait_output(child, Duration::from_secs(30));
    link.thaw();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_default();
    assert_eq!(
        json["verdict"],
        "monitor_error",
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        json["reason"]
            .as_str()
            .unwrap()
            .contains("lost contact with fdtest"),
        "{stdout}"
    );
    assert_eq!(out.status.code(), Some(7));
    // The server was left running; a later watch by run id gets the server's verdict.
    let id = json["run_id"].as_str().unwrap().to_string();
    let r = fd(&env, &sshd, &["watch", "--json", "--host", "fdtest", &id]);
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    let stop = fd(&env, &sshd, &["stop", "--host", "fdtest", &id]);
    assert_eq!(stop.code, 0, "{}", stop.explain());
}

/// Waits (bounded) until the event stream shows `n` log lines: the watch is under way.
fn wait_for_lines(events: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while json_lines(events)
        .iter()
        .filter(|e| e["kind"] == "line")
        .count()
        < n
    {
        assert!(Instant::now() < deadline, "the watch never got under way");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// firedup started in the background against `sshd` (its config, a remote state dir of its
/// own), for tests that inject a fault while it watches.
fn spawn_fd(env: &Env, sshd: &Sshd, args: &[&str]) -> std::process::Child {
    env.cmd()
        .env("FIREDUP_SSH_CONFIG", sshd.config_path())
        .env("FIREDUP_REMOTE_STATE_DIR", env.path("remote-state"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits (bounded) for a [`spawn_fd`] firedup: its JSON verdict, stdout and stderr.
fn finish(child: std::process::Child, limit: Duration) -> (serde_json::Value, String, String) {
    let out = wait_output(child, limit);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let json = serde_json::from_str(stdout.trim()).unwrap_or_default();
    (json, stdout, stderr)
}

fn wait_output(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "firedup did not finish within {limit:?}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn probes_run_on_the_host_and_the_report_says_so() {
    let sshd = Sshd::start();
    let env = Env::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let r = fd(
        &env,
        &sshd,
        &[
            "run",
            "--json",
            "--host",
            "fdtest",
            "--port",
            &port,
            "--http",
            "/",
            "--then",
            "true",
            "--",
            "python3",
            "-m",
            "http.server",
            &port,
            "--bind",
            "127.0.0.1",
        ],
    );
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    // The URL names the host as given, never the host's own loopback (issue 29).
    assert_eq!(r.json["host"], "fdtest", "{}", r.explain());
    assert_eq!(
        r.json["url"],
        format!("http://fdtest:{port}").as_str(),
        "{}",
        r.explain()
    );
    let probes = r.json["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 2, "{}", r.explain());
    for p in probes {
        assert_eq!(p["from"], "remote fdtest", "{}", r.explain());
        assert!(p["ready_s"].as_f64().is_some(), "{}", r.explain());
    }
    assert!(
        probes[0]["last"]
            .as_str()
            .unwrap()
            .contains("of the watched process tree"),
        "the port owner was not checked on the host: {}",
        r.explain()
    );
}

#[test]
fn secrets_reach_the_server_but_no_report_and_no_command_line() {
    let sshd = Sshd::start();
    let env = Env::new();
    let seen = env.path("seen-token");
    let server = env.script(
        "secret.sh",
        &format!(
            "printf '%s' \"$HF_TOKEN\" > {}; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done > {}; echo READY; sleep 60",
            seen.display(),
            env.path("cmdlines").display()
        ),
    );
    let events = env.path("events.ndjson");
    let r = fd(
        &env,
        &sshd,
        &[
            "run",
            "--json",
            "--host",
            "fdtest",
            "--env",
            "HF_TOKEN=hf_s3cr3t_value",
            "--ready-line",
            "READY",
            "--events",
            events.to_str().unwrap(),
            "--then",
            "true",
            "--",
            &server,
        ],
    );
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert_eq!(
        common::file_text(&seen),
        "hf_s3cr3t_value",
        "the server did not get it"
    );
    for (what, text) in [
        ("stdout", r.stdout.clone()),
        ("stderr", r.stderr.clone()),
        ("events", common::file_text(&events)),
        (
            "command lines on the host",
            // The host is this machine here: leave out the local firedup's own command line
            // (the user typed the value there themselves).
            common::file_text(&env.path("cmdlines"))
                .lines()
                .filter(|l| !l.contains("--env HF_TOKEN="))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
    ] {
        assert!(!text.contains("hf_s3cr3t_value"), "the secret is in {what}");
    }
    let metas: Vec<_> = walk(&env.path("remote-state"))
        .into_iter()
        .filter(|p| p.ends_with("meta.json"))
        .collect();
    assert_eq!(metas.len(), 1);
    let meta = common::file_text(&metas[0]);
    assert!(
        !meta.contains("hf_s3cr3t_value") && meta.contains("HF_TOKEN"),
        "{meta}"
    );
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn the_server_crashing_while_the_link_is_down_is_judged_after_the_thaw() {
    if !netns_or_skip("the_server_crashing_while_the_link_is_down") {
        return;
    }
    let link = NetLink::new();
    let sshd = Sshd::start_in(&link);
    let env = Env::new();
    let go = env.path("crash-now");
    let server = env.script(
        "crash.sh",
        &format!(
            "echo 'Load weight begin'; while [ ! -f {} ]; do sleep 0.05; done; echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB.'; exit 1",
            go.display()
        ),
    );
    let events = env.path("events.ndjson");
    let child = spawn_fd(
        &env,
        &sshd,
        &[
            "run",
            "--json",
            "--host",
            "fdtest",
            "--ready-line",
            "READY",
            "--events",
            events.to_str().unwrap(),
            "--",
            &server,
        ],
    );
    wait_for_lines(&events, 1);
    link.freeze();
    // The server dies while firedup cannot see it.
    std::fs::write(&go, "").unwrap();
    std::thread::sleep(Duration::from_millis(4000));
    link.thaw();
    let (json, stdout, stderr) = finish(child, Duration::from_secs(60));
    assert_eq!(json["verdict"], "failed", "{stdout}\n{stderr}");
    assert_eq!(json["signature"], "cuda_oom", "{stdout}");
    assert_eq!(json["exit"]["code"], 1, "{stdout}");
    assert!(stderr.contains("lost contact with fdtest"), "{stderr}");
}

#[test]
fn sshd_killed_and_restarted_mid_watch_is_survived() {
    let mut sshd = Sshd::start();
    let env = Env::new();
    let server = counting_server(&env, 50, "0.1");
    let events = env.path("events.ndjson");
    let child = spawn_fd(
        &env,
        &sshd,
        &[
            "run",
            "--json",
            "--host",
            "fdtest",
            "--ready-line",
            "READY",
            "--events",
            events.to_str().unwrap(),
            "--then",
            "true",
            "--",
            &server,
        ],
    );
    wait_for_lines(&events, 5);
    // Every sshd process, the established connection's too: the link breaks.
    // sshd stopped, the established connection's sshd too (the link breaks), but not the
    // server, which runs in a session of its own on the host.
    sshd.stop();
    for pid in sshd.pids() {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.starts_with("sshd") {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
    std::thread::sleep(Duration::from_millis(1500));
    sshd.restart();
    let (json, stdout, stderr) = finish(child, Duration::from_secs(60));
    assert_eq!(json["verdict"], "ready", "{stdout}\n{stderr}");
    assert!(stderr.contains("lost contact with fdtest"), "{stderr}");
    assert!(stderr.contains("reconnected to fdtest"), "{stderr}");
    assert_each_line_once(&events, 50);
}

#[test]
fn a_matrix_runs_its_cells_on_the_host_with_bench_and_teardown_there() {
    let sshd = Sshd::start();
    let env = Env::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/servers");
    let file = env.path("remote-matrix.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[base]
host = "fdtest"
command = ["python3", "{server}", "--port", "{port}", "--step", "0.02"]
profile = "sglang"
stall = "5s"
grace = "2s"

[[axis]]
name = "FLASHMLA"
env = "SGLANG_SM120_MMA_FLASHMLA"
values = [0, 1]

[bench]
command = "python3 {bench} 10"
metrics = {{ throughput = 'Output token throughput \(tok/s\):\s+([0-9.]+)' }}
"#,
            server = fixtures.join("fake_sglang_server.py").display(),
            bench = fixtures.join("fake_bench.py").display(),
        ),
    )
    .unwrap();
    let r = fd(
        &env,
        &sshd,
        &["matrix", file.to_str().unwrap(), "--format", "json"],
    );
    assert_eq!(r.code, 1, "{}", r.explain());
    let cells = r.json["cells"].as_array().expect("cells");
    let ready = &cells[0]["runs"][0];
    assert_eq!(ready["verdict"], "ready", "{}", r.explain());
    assert!(
        ready["metrics"]["throughput"].as_f64().unwrap() > 0.0,
        "{}",
        r.explain()
    );
    assert_eq!(ready["clean"], true, "{}", r.explain());
    assert_eq!(
        cells[1]["runs"][0]["signature"],
        "cuda_oom",
        "{}",
        r.explain()
    );
    assert!(r.stderr.contains("on fdtest"), "{}", r.explain());
    // The bench ran on the host: its output is in the remote run directory.
    let run_id = ready["run_id"].as_str().unwrap();
    let bench_log = env
        .path("remote-state")
        .join("runs")
        .join(run_id)
        .join("bench.log");
    assert!(
        std::fs::read_to_string(&bench_log)
            .unwrap_or_default()
            .contains("Output token throughput"),
        "{}",
        bench_log.display()
    );
    // Recorded here, with the host.
    let h = env.fd("history").json().host("fdtest").output();
    assert_eq!(h.stdout.lines().count(), 2, "{}", h.explain());
    // The port is free again on the host (which is this machine).
    std::net::TcpListener::bind(("127.0.0.1", port)).expect("the port was released");
}

#[test]
fn reattaching_over_ssh_to_a_run_that_crashed_after_ready_reports_the_crash() {
    let sshd = Sshd::start();
    let env = Env::new();
    // The server crashes when the test says so, after `run` has reported it ready.
    let crash = env.path("crash-now");
    let server = env.script(
        "crash_later.sh",
        &format!(
            "echo 'listening on :8000'; while [ ! -e '{}' ]; do sleep 0.05; done; \
             echo 'RuntimeError: CUDA error: an illegal memory access was encountered'; exit 1",
            crash.display()
        ),
    );
    let r = fd(
        &env,
        &sshd,
        &[
            "run",
            "--json",
            "--host",
            "fdtest",
            "--ready-line",
            "listening on",
            "--",
            &server,
        ],
    );
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    let id = r.json["run_id"].as_str().unwrap().to_string();
    std::fs::write(&crash, "").unwrap();
    let exit_json = env
        .path("remote-state")
        .join("runs")
        .join(&id)
        .join("exit.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !exit_json.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(exit_json.exists(), "the crash was never recorded");
    let w = fd(&env, &sshd, &["watch", "--json", "--host", "fdtest", &id]);
    assert_eq!(
        (w.code, w.verdict(), w.signature()),
        (1, "failed", Some("cuda_error")),
        "{}",
        w.explain()
    );
    assert_eq!(w.json["exit"]["code"], 1, "{}", w.explain());
}

/// Issue 24, item 4, over SSH: the agent reads a big log in slices; until it has caught up
/// (`Backlog`), the client does not tick the judge, and the lines keep the time the log held
/// them. Before: `timed_out` with READY in the file.
#[test]
fn a_deadline_over_ssh_waits_for_the_agent_to_read_what_the_log_already_holds() {
    let sshd = Sshd::start();
    let env = Env::new();
    let log = env.path("big.log");
    common::write_long_log(&log, "READY");
    let r = fd(
        &env,
        &sshd,
        &[
            "watch",
            "--json",
            "--host",
            "fdtest",
            "--from-start",
            "--log",
            log.to_str().unwrap(),
            "--ready-line",
            "READY",
            "--timeout",
            "200ms",
        ],
    );
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
}
