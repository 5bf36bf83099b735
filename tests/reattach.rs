//! Re-attaching to a run that has ended (`firedup watch RUN_ID`): the verdict, times and probes
//! its launching firedup recorded are reported as recorded, a stop that firedup itself made is
//! not "someone else", and how the run ended after ready is still said (issue 23, items 4 and 8).

use crate::common;
use common::{Env, Run, alive, free_port};
use std::time::{Duration, Instant};

/// A server on `port` that prints a loading line, takes about a second, then listens and prints
/// READY; it serves until stopped, or exits with `then_exit` a moment after READY when given.
fn server(env: &Env, port: u16, then_exit: Option<i32>) -> String {
    let after = match then_exit {
        Some(code) => format!("time.sleep(2); sys.exit({code})"),
        None => "time.sleep(300)".to_string(),
    };
    env.script(
        "server",
        &format!(
            "exec python3 -u -c '
import socket, sys, time
print(\"loading weights\")
time.sleep(1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((\"127.0.0.1\", {port}))
s.listen(8)
print(\"server READY\")
{after}
'"
        ),
    )
}

fn run_to_ready(env: &Env, port: u16, then_exit: Option<i32>) -> Run {
    let server = server(env, port, then_exit);
    let port = port.to_string();
    let r = env
        .run()
        .json()
        .ready_line("READY")
        .opt("port", &port)
        .command(&[&server])
        .output();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    r
}

/// Waits (bounded) until the supervisor has recorded the run's exit.
fn wait_for_exit_record(env: &Env, id: &str) {
    let exit_json = env.state.path().join("runs").join(id).join("exit.json");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !exit_json.exists() {
        assert!(
            Instant::now() < deadline,
            "the supervisor never recorded the exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The run's row in the history, as `show --json` prints it.
fn shown(env: &Env, id: &str) -> serde_json::Value {
    let s = env.fd("show").json().arg(id).output();
    assert_eq!(s.code, 0, "{}", s.explain());
    s.json
}

/// The verdict object inside `show --json` (its `outcome`, or the object itself).
fn outcome_of(show: &serde_json::Value) -> &serde_json::Value {
    if show.get("outcome").is_some() {
        &show["outcome"]
    } else {
        show
    }
}

#[test]
fn a_ready_run_stopped_by_firedup_stop_is_named_as_firedups_stop_when_watched_again() {
    let env = Env::new();
    let port = free_port();
    let r = run_to_ready(&env, port, None);
    let id = r.run_id().to_string();
    let pid = r.json["pid"].as_u64().unwrap();
    let s = env.fd("stop").arg(&id).output();
    assert_eq!(s.code, 0, "{}", s.explain());
    assert!(!alive(pid));
    // Not `ready` (exit 0): the server is gone, and a script reading the exit code would call it
    // up. Its SIGTERM was firedup's, after ready, and the reason says so.
    let w = env.fd("watch").json().arg(&id).output();
    assert_eq!(
        (w.code, w.verdict(), w.signature()),
        (4, "killed", Some("terminated")),
        "{}",
        w.explain()
    );
    let reason = w.json["reason"].as_str().unwrap_or_default();
    assert!(!reason.contains("someone else"), "{reason}");
    assert!(
        reason.contains("after becoming ready") && reason.contains("firedup stop"),
        "the stop is the ending: {reason}"
    );
    assert_eq!(w.json["server_running"], false, "{}", w.explain());
    assert_eq!(w.json["ready_s"], r.json["ready_s"], "{}", w.explain());
    // The history keeps the verdict the run had.
    let row = shown(&env, &id);
    assert_eq!(outcome_of(&row)["verdict"], "ready", "{row}");
    // The stop left its record in the run directory, before and after it signalled.
    let stop = std::fs::read_to_string(env.state.path().join("runs").join(&id).join("stop.json"))
        .expect("stop.json");
    let stop: serde_json::Value = serde_json::from_str(&stop).unwrap();
    assert_eq!(stop["by"], "firedup stop", "{stop}");
    assert_eq!(stop["result"]["clean"], true, "{stop}");
}

#[test]
fn a_watch_of_an_ended_run_reports_the_recorded_times_and_probes() {
    let env = Env::new();
    let port = free_port();
    let r = run_to_ready(&env, port, None);
    let id = r.run_id().to_string();
    let ready_s = r.json["ready_s"].as_f64().expect("ready_s");
    assert!(
        ready_s >= 1.0,
        "the server took its second: {}",
        r.explain()
    );
    let s = env.fd("stop").arg(&id).output();
    assert_eq!(s.code, 0, "{}", s.explain());
    let w = env.fd("watch").json().arg(&id).output();
    assert_eq!(w.json["ready_s"], r.json["ready_s"], "{}", w.explain());
    assert_eq!(w.json["timeline"], r.json["timeline"], "{}", w.explain());
    assert_eq!(w.json["probes"], r.json["probes"], "{}", w.explain());
    assert!(
        !w.stdout.contains("never ready"),
        "the port was up before the stop: {}",
        w.explain()
    );
    let row = shown(&env, &id);
    assert_eq!(outcome_of(&row)["ready_s"], w.json["ready_s"], "{row}");
}

#[test]
fn a_crash_after_ready_is_still_how_a_re_attached_run_ended() {
    let env = Env::new();
    let port = free_port();
    let r = run_to_ready(&env, port, Some(1));
    let id = r.run_id().to_string();
    wait_for_exit_record(&env, &id);
    let w = env.fd("watch").json().arg(&id).output();
    assert_eq!(
        (w.code, w.verdict()),
        (3, "exited"),
        "the exit after ready decides: {}",
        w.explain()
    );
    assert_eq!(w.json["exit"]["code"], 1, "{}", w.explain());
    let reason = w.json["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("after becoming ready") || reason.contains("after its ready"),
        "{reason}"
    );
    // Its times are the recorded ones, not the moment of the re-attach.
    assert_eq!(w.json["ready_s"], r.json["ready_s"], "{}", w.explain());
    assert_eq!(w.json["timeline"], r.json["timeline"], "{}", w.explain());
    assert!(!alive(r.json["pid"].as_u64().unwrap()));
}

#[test]
fn a_run_stopped_by_firedup_while_starting_names_the_stop_not_someone_else() {
    let env = Env::new();
    let gate = env.path("started");
    let script = format!("echo loading; touch {}; exec sleep 300", gate.display());
    let run = env
        .cmd()
        .args([
            "run",
            "--json",
            "--ready-line",
            "READY",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !gate.exists() {
        assert!(Instant::now() < deadline, "the server never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let id = std::fs::read_dir(env.state.path().join("runs"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .next()
        .unwrap();
    let s = env.fd("stop").arg(&id).output();
    assert_eq!(s.code, 0, "{}", s.explain());
    let out = run.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "killed", "{v}");
    assert_eq!(v["signature"], "terminated", "{v}");
    let reason = v["reason"].as_str().unwrap_or_default();
    assert!(!reason.contains("someone else"), "{reason}");
    assert!(reason.contains("firedup stop"), "{reason}");
    // A re-attach says the same.
    let w = env.fd("watch").json().arg(&id).output();
    assert_eq!((w.code, w.verdict()), (4, "killed"), "{}", w.explain());
    assert_eq!(w.json["reason"], v["reason"], "{}", w.explain());
}

#[test]
fn a_run_whose_firedup_died_before_its_verdict_claims_no_times_it_cannot_know() {
    let env = Env::new();
    let gate = env.path("gate");
    let script = format!(
        "echo loading; while [ ! -e {} ]; do sleep 0.05; done; echo 'server READY'; sleep 1; exit 1",
        gate.display()
    );
    let mut run = env
        .cmd()
        .args([
            "run",
            "--json",
            "--ready-line",
            "READY",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let runs = env.state.path().join("runs");
    let deadline = Instant::now() + Duration::from_secs(30);
    let id = loop {
        let found = std::fs::read_dir(&runs).ok().and_then(|d| {
            d.filter_map(|e| e.ok())
                .find(|e| e.path().join("process.json").exists())
        });
        if let Some(e) = found {
            break e.file_name().to_string_lossy().into_owned();
        }
        assert!(Instant::now() < deadline, "no run appeared");
        std::thread::sleep(Duration::from_millis(10));
    };
    run.kill().unwrap(); // SIGKILL firedup before its verdict, not the server
    run.wait().unwrap();
    std::fs::write(&gate, "").unwrap();
    wait_for_exit_record(&env, &id);
    assert!(!runs.join(&id).join("verdict.json").exists());
    let w = env.fd("watch").json().arg(&id).output();
    assert_eq!((w.code, w.verdict()), (3, "exited"), "{}", w.explain());
    // Read at the end, the log cannot say when the server became ready.
    assert_eq!(
        w.json["ready_s"],
        serde_json::Value::Null,
        "{}",
        w.explain()
    );
    let reason = w.json["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("exit code 1 after becoming ready"),
        "no time after ready is claimed: {reason}"
    );
}
