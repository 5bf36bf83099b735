//! The run's life cycle at its edges, through the real binary: a `firedup run` whose reader went
//! away still ends its run on SIGINT, SIGTERM or SIGHUP (issue 23, item 2); `run --detach` hands
//! the run back at once and `watch RUN_ID --for` waits in steps, reporting `pending` (exit 75)
//! while the server starts and changing nothing.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::Env;

/// How long anything here may take before the test fails as a hang.
const BOUND: Duration = Duration::from_secs(60);

/// The run's process record, once it exists: (run id, pid).
fn launched_run(env: &Env) -> Option<(String, u64)> {
    let runs = env.state.path().join("runs");
    let entry = std::fs::read_dir(runs).ok()?.flatten().next()?;
    let text = std::fs::read_to_string(entry.path().join("process.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let id = entry.file_name().to_string_lossy().into_owned();
    Some((id, v["pid"].as_u64()?))
}

fn wait_for<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    common::bounded::wait_for(what, BOUND, f)
}

/// Before: the signal thread's "interrupted" line went to a closed stderr, panicked, and the
/// thread that should have exited the process was gone: `firedup run` slept forever after
/// stopping the server.
#[test]
fn a_run_whose_reader_is_gone_still_stops_its_server_and_exits_on_each_signal() {
    for (signal, code) in [
        (libc::SIGINT, 130),
        (libc::SIGTERM, 143),
        (libc::SIGHUP, 129),
    ] {
        let env = Env::new();
        let mut child = env
            .cmd()
            .args([
                "run",
                "--ready-line",
                "never printed",
                "--grace",
                "2s",
                "--",
                "sh",
                "-c",
                "echo loading; exec sleep 300",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (_, pid) = wait_for("the launch", || launched_run(&env));
        // Its parent is gone: nobody reads what it writes any more.
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        let _ = err.read_line(&mut first);
        drop(err);
        drop(child.stdout.take());
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = wait_for("firedup run to exit", || child.try_wait().unwrap());
        assert_eq!(status.code(), Some(code), "signal {signal}: {status:?}");
        assert!(
            !common::alive(pid),
            "signal {signal}: the server {pid} is still running"
        );
    }
}

/// Issue 24 item 6: a signal firedup was started with ignored stays ignored. `nohup firedup run`
/// (SIGHUP) and a script's background job (SIGINT: `trap '' INT`, as a non-interactive shell does
/// for `cmd &`) outlive the hangup or the Ctrl-C: the run goes on to its verdict and the server
/// keeps running. Before: firedup replaced the inherited SIG_IGN with its handler, and the signal
/// stopped the server and ended firedup 129 / 130.
#[test]
fn a_signal_ignored_at_start_stays_ignored_and_the_run_goes_on() {
    for (signal, wrapper) in [
        (libc::SIGHUP, vec!["nohup"]),
        (
            libc::SIGINT,
            vec!["sh", "-c", "trap '' INT; exec \"$0\" \"$@\""],
        ),
    ] {
        let env = Env::new();
        let go = env.path("go");
        let mut command = std::process::Command::new(wrapper[0]);
        command.args(&wrapper[1..]);
        let firedup = env.cmd();
        command
            .arg(firedup.get_program())
            .args(["run", "--json", "--ready-line", "server ready", "--"])
            .args(gated_server(&go))
            .envs(firedup.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .current_dir(env.work.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = command.spawn().unwrap();
        let (run_id, pid) = wait_for("the launch", || launched_run(&env));
        // SAFETY: kill(2) on our own child (firedup itself, exec'd by the wrapper), not reaped.
        unsafe { libc::kill(child.id() as i32, signal) };
        // Time for a handler, were there one, to stop the run before the server gets ready:
        // without it this test could pass on the old code, never fail on the new.
        std::thread::sleep(Duration::from_millis(300));
        std::fs::write(&go, "").unwrap();
        let out = child.wait_with_output().unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            (out.status.code(), json["verdict"].as_str()),
            (Some(0), Some("ready")),
            "signal {signal}: {json}\n{stderr}"
        );
        assert!(
            common::alive(pid),
            "signal {signal}: the server {pid} was stopped"
        );
        let stop = env.fd("stop").arg(&run_id).opt("grace", "2s").output();
        assert_eq!(stop.code, 0, "{}", stop.explain());
    }
}

/// A server that prints its ready line only once `go` exists.
fn gated_server(go: &Path) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "echo loading weights; while [ ! -e {} ]; do sleep 0.05; done; echo server ready; exec sleep 300",
            go.display()
        ),
    ]
}

#[test]
fn detach_returns_at_once_and_watch_for_reports_pending_then_the_verdict() {
    let env = Env::new();
    let go = env.path("go");
    let mut args: Vec<String> = [
        "run",
        "--detach",
        "--json",
        "--ready-line",
        "server ready",
        "--",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(gated_server(&go));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let detached = env.firedup(&args);
    assert_eq!(detached.code, 0, "{}", detached.explain());
    assert!(detached.json["verdict"].is_null(), "{}", detached.explain());
    let run_id = detached.run_id().to_string();
    let pid = detached.json["pid"].as_u64().expect("the pid");
    assert!(!run_id.is_empty() && detached.json["log"].is_string());
    assert!(common::alive(pid), "the detached server runs");

    // Not ready yet: pending, and nothing changed.
    let pending = env
        .fd("watch")
        .arg(&run_id)
        .opt("for", "300ms")
        .json()
        .output();
    assert_eq!(pending.code, 75, "{}", pending.explain());
    assert_eq!(pending.verdict(), "pending", "{}", pending.explain());
    assert_eq!(pending.json["run_id"], run_id.as_str());
    assert!(pending.json["elapsed_s"].as_f64().is_some());
    assert!(common::alive(pid), "pending stops nothing");
    let text = env.fd("watch").arg(&run_id).opt("for", "100ms").output();
    assert_eq!(text.code, 75, "{}", text.explain());
    assert!(text.stdout.starts_with("pending: "), "{}", text.explain());

    std::fs::write(&go, "").unwrap();
    let ready = env
        .fd("watch")
        .arg(&run_id)
        .opt("for", "60s")
        .json()
        .output();
    assert_eq!(ready.code, 0, "{}", ready.explain());
    assert_eq!(ready.verdict(), "ready", "{}", ready.explain());
    assert!(common::alive(pid), "a watch leaves a ready server running");

    let stop = env.fd("stop").arg(&run_id).opt("grace", "2s").output();
    assert_eq!(stop.code, 0, "{}", stop.explain());
    assert!(!common::alive(pid));
}

#[test]
fn detach_of_a_command_that_cannot_start_is_never_started_and_refuses_then() {
    let env = Env::new();
    let r = env
        .run()
        .flag("detach")
        .json()
        .ready_line("x")
        .command(&["/no/such/program"])
        .output();
    assert_eq!(r.code, 5, "{}", r.explain());
    assert_eq!(r.verdict(), "never_started", "{}", r.explain());
    let refused = env
        .run()
        .flag("detach")
        .opt("then", "true")
        .ready_line("x")
        .command(&["true"])
        .output();
    assert_eq!(refused.code, 2, "{}", refused.explain());
}

/// Continues a stopped process when dropped (also when the test fails before it does).
struct Stopped(i32);

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a pid and a signal number.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// A launched run's exit status is its supervisor's record, also when the supervisor is late with
/// it: on a loaded machine it reaps the command and writes the record (with an fsync) seconds
/// after the command's pidfd said it was gone. Here the supervisor is stopped (SIGSTOP: a machine
/// that gives it no core) while its command exits 3, and continued 3 s later. Before: firedup
/// gave up on the record after 2 s and the run `exited` "with an unknown status" (twice for vLLM's
/// API server on a cold CI run under load).
#[test]
fn a_supervisor_late_with_its_exit_record_still_gives_the_status() {
    let env = Env::new();
    let out = ended_while_its_supervisor_is_stopped(&env, env.run().json().until("exit"), "", "");
    let json = &out.json;
    assert_eq!(
        (json["verdict"].as_str(), &json["exit"]["code"]),
        (Some("exited"), &serde_json::json!(3)),
        "{}",
        out.explain()
    );
}

/// A server that ends inside its hold is not `ready`, also when its supervisor is late with the
/// exit record: no deadline is decided while an exit seen waits for its status. Before, the hold
/// ended during the wait and the verdict was `ready ... still healthy after the 5.0s hold` of a
/// server already gone (a replayed vLLM log whose worker was SIGKILLed, once under load). The
/// supervisor is stopped once firedup says it holds, and for longer than the hold.
#[test]
fn a_server_ended_inside_its_hold_is_not_ready_while_its_supervisor_is_late() {
    let env = Env::new();
    let events = env.work.path().join("events.ndjson");
    let run = env
        .run()
        .json()
        .ready_line("serving now")
        .opt("hold", "5s")
        .opt("events", events.to_str().unwrap());
    let out = ended_while_its_supervisor_is_stopped(&env, run, "echo serving now; ", "holding");
    let json = &out.json;
    assert_ne!(json["verdict"], "ready", "{}", out.explain());
    assert_eq!(json["exit"]["code"], 3, "{}", out.explain());
    // The judge heard the command was gone when it went, before its status came: the reason's
    // time counts to then, not to the supervisor's late record.
    let kinds: Vec<String> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|e| e["kind"].as_str().map(String::from))
        .filter(|k| k == "gone" || k == "exited")
        .collect();
    assert_eq!(kinds, ["gone", "exited"], "{}", out.explain());
}

/// Runs `run -- sh -c "PREFIX; echo waiting; (wait for a file); exit 3"`; once firedup's stderr
/// says `said` (at once when empty), stops the run's supervisor (SIGSTOP: a machine that gives it
/// no core) and lets the command exit; continues the supervisor 8 s later: firedup sees the
/// command gone seconds before the supervisor records how.
fn ended_while_its_supervisor_is_stopped(
    env: &Env,
    run: common::invocation::Invocation<'_>,
    prefix: &str,
    said: &str,
) -> common::Run {
    use std::io::BufRead;
    let go = env.work.path().join("go");
    let script = format!(
        "{prefix}echo waiting; while [ ! -e '{}' ]; do sleep 0.05; done; exit 3",
        go.display()
    );
    let mut child = run.shell(&script).spawn();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    if !said.is_empty() {
        wait_for(said, || {
            rx.recv_timeout(BOUND).ok().filter(|l| l.contains(said))
        });
    }
    let (id, pid) = wait_for("the launch", || launched_run(env));
    let record = env.state.path().join("runs").join(&id).join("process.json");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(record).unwrap()).unwrap();
    let supervisor = record["supervisor_pid"].as_i64().expect("supervisor_pid") as i32;
    // SAFETY: kill(2) on the run's supervisor, recorded just now (alive: its command is).
    unsafe { libc::kill(supervisor, libc::SIGSTOP) };
    let stopped = Stopped(supervisor);
    std::fs::write(&go, "").unwrap();
    // The command ends; its stopped supervisor cannot reap it: a zombie until continued.
    wait_for("the command to end", || (!common::alive(pid)).then_some(()));
    // Longer than the 2 s firedup waited for the record before, and than the hold.
    std::thread::sleep(Duration::from_secs(8));
    drop(stopped);
    let mut out: common::Run = common::bounded::wait_output(child, BOUND).into();
    out.stderr = reader.join().unwrap();
    out
}
