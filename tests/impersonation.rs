//! Issue 24 item 1: a process of another user that sets the run's (public) `FIREDUP_RUN_ID` is
//! not a process of the run. It does not make the run `ready` by listening on the server's port,
//! never receives the server's API key from `--ready-request`, is never signalled by root's
//! `firedup stop`, and does not turn a launcher's exit into a daemon to follow (`stalled`).
//! Each test switches to a second local user (`common::other_user`), so they run as root.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::bounded::wait_output;
use common::other_user::{OtherUser, other_user};
use common::{Env, alive, free_port};

/// How long any one wait of these tests may take before the test fails.
const BOUND: Duration = Duration::from_secs(90);

/// Waits (bounded) until `done` holds; panics naming `what` past the bound.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The id of the one run under `env`'s state directory, once its launcher has recorded it.
fn wait_run_id(env: &Env) -> String {
    let runs = env.state.path().join("runs");
    let mut id = String::new();
    wait_until("the run to be recorded", || {
        let found = std::fs::read_dir(&runs).ok().and_then(|d| {
            d.filter_map(|e| e.ok())
                .find(|e| e.path().join("process.json").is_file())
        });
        if let Some(e) = found {
            id = e.file_name().to_string_lossy().into_owned();
        }
        !id.is_empty()
    });
    id
}

/// The impostor's listener: on 127.0.0.1:PORT, it answers every request with a completion (so a
/// probe that trusted it would be satisfied) and appends what it receives to `received`.
const LISTENER: &str = r#"
import socket, sys
port = int(sys.argv[1])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(16)
open("listening", "w").close()
body = b'{"data":[{"id":"m"}],"choices":[{"text":"x","index":0}],"usage":{"completion_tokens":1}}'
while True:
    c, _ = s.accept()
    c.settimeout(2)
    try:
        got = c.recv(65536)
    except OSError:
        got = b""
    with open("received", "ab") as f:
        f.write(got + b"\n----\n")
    try:
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    except OSError:
        pass
    c.close()
"#;

/// Starts `args` as the other user in `home`, carrying `FIREDUP_RUN_ID=run_id`.
fn as_other_user(other: &OtherUser, home: &Path, run_id: &str, args: &[&str]) -> Child {
    let mut cmd = Command::new(args[0]);
    cmd.args(&args[1..])
        .current_dir(home)
        .env("FIREDUP_RUN_ID", run_id)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    other.command(&mut cmd);
    let child = cmd.spawn().expect("the other user's process starts");
    // Its environment is the impostor's once it has exec'd: what firedup would see.
    let pid = child.id();
    let marker = format!("FIREDUP_RUN_ID={run_id}");
    wait_until("the other user's process to exec", || {
        std::fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|b| b.split(|c| *c == 0).any(|e| e == marker.as_bytes()))
    });
    child
}

/// The other user's listener on `port`, once it listens.
fn impostor_listener(other: &OtherUser, home: &Path, run_id: &str, port: u16) -> Child {
    let script = home.join("listener.py");
    std::fs::write(&script, LISTENER).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let port = port.to_string();
    let child = as_other_user(
        other,
        home,
        run_id,
        &["python3", script.to_str().unwrap(), &port],
    );
    wait_until("the impostor to listen", || home.join("listening").exists());
    child
}

fn end(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// `firedup run ARGS` in the background, its output piped.
fn spawn_run(env: &Env, args: &[&str]) -> Child {
    env.cmd()
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("firedup runs")
}

/// Waits until the events file shows a `probe` of `kind` judged `foreign` naming `pid`; false
/// when `run` ended first (it took the impostor for the server).
fn foreign_probe_seen(run: &mut Child, events: &Path, kind: &str, pid: u32) -> bool {
    let mut seen = false;
    wait_until("a foreign probe or the run's end", || {
        seen = common::file_text(events).lines().any(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
            v["kind"] == "probe"
                && v["probe"] == kind
                && v["state"] == "foreign"
                && v["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains(&format!("pid {pid} ")))
        });
        seen || run.try_wait().ok().flatten().is_some()
    });
    seen
}

fn verdict_of(out: &common::bounded::Out) -> serde_json::Value {
    serde_json::from_str(out.stdout.trim()).unwrap_or_default()
}

#[test]
fn another_users_listener_carrying_the_run_id_does_not_make_the_run_ready() {
    let Some(other) = other_user() else { return };
    let env = Env::new();
    let port = free_port();
    let go = env.path("go");
    let server = env.script(
        "server.sh",
        &format!(
            "while [ ! -e {} ]; do sleep 0.1; done\nexec python3 -m http.server --bind 127.0.0.1 {port}",
            go.display()
        ),
    );
    let events = env.path("events.ndjson");
    let mut run = spawn_run(
        &env,
        &[
            "--json",
            "--port",
            &port.to_string(),
            "--events",
            events.to_str().unwrap(),
            "--timeout",
            "5m",
            "--stall",
            "off",
            "--",
            &server,
        ],
    );
    let run_id = wait_run_id(&env);
    let home = other.dir();
    let impostor = impostor_listener(&other, home.path(), &run_id, port);
    let impostor_pid = impostor.id();
    let waited = foreign_probe_seen(&mut run, &events, "port", impostor_pid);
    end(impostor);
    std::fs::write(&go, "").unwrap();
    let out = wait_output(run, BOUND);
    // A ready run goes on serving after `run` returns: stopped here, whatever the asserts say.
    let stop = env.fd("stop").arg(&run_id).bounded(BOUND).output();
    let v = verdict_of(&out);
    assert!(
        waited,
        "the run ended while only the other user's pid {impostor_pid} listened on its port: {} {}",
        out.stdout, out.stderr
    );
    assert_eq!(v["verdict"], "ready", "{} {}", out.stdout, out.stderr);
    assert_eq!(stop.code, 0, "{}", stop.explain());
    // Ready from the real server: the last port probe names the watched tree.
    let last_up = common::file_text(&events)
        .lines()
        .rfind(|l| l.contains(r#""probe":"port""#) && l.contains(r#""state":"up""#))
        .unwrap_or_default()
        .to_string();
    assert!(
        last_up.contains("of the watched process tree")
            && !last_up.contains(&format!("pid {impostor_pid} ")),
        "{last_up}"
    );
}

#[test]
fn the_servers_api_key_is_never_sent_to_another_users_listener() {
    let Some(other) = other_user() else { return };
    let env = Env::new();
    let port = free_port();
    let key = "sk-impersonation-test-key-4711";
    let server = env.script("server.sh", "exec sleep 300");
    let events = env.path("events.ndjson");
    let mut run = spawn_run(
        &env,
        &[
            "--json",
            "--port",
            &port.to_string(),
            "--ready-request",
            "openai",
            "--events",
            events.to_str().unwrap(),
            "--timeout",
            "5m",
            "--stall",
            "off",
            "--",
            &server,
            "--api-key",
            key,
        ],
    );
    let run_id = wait_run_id(&env);
    let home = other.dir();
    let impostor = impostor_listener(&other, home.path(), &run_id, port);
    let impostor_pid = impostor.id();
    let waited = foreign_probe_seen(&mut run, &events, "request", impostor_pid);
    end(impostor);
    let stop = env.fd("stop").arg(&run_id).output();
    let out = wait_output(run, BOUND);
    let received = common::file_text(&home.path().join("received"));
    assert!(
        !received.contains(key),
        "the other user's listener received the server's API key: {received}"
    );
    assert!(
        waited,
        "the run ended while only the other user's pid {impostor_pid} listened: {} {}",
        out.stdout, out.stderr
    );
    assert_ne!(verdict_of(&out)["verdict"], "ready", "{}", out.stdout);
    assert_eq!(stop.code, 0, "{}", stop.explain());
}

#[test]
fn roots_stop_leaves_another_users_process_carrying_the_run_id_alone() {
    let Some(other) = other_user() else { return };
    let env = Env::new();
    let server = env.script("server.sh", "echo READY\nexec sleep 300");
    let r = env
        .run()
        .json()
        .ready_line("READY")
        .command(&[&server])
        .output();
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    let run_id = r.run_id().to_string();
    let home = other.dir();
    let impostor = as_other_user(&other, home.path(), &run_id, &["sleep", "300"]);
    let pid = impostor.id();
    let stop = env.fd("stop").arg(&run_id).output();
    let survived = alive(pid as u64);
    end(impostor);
    assert!(
        survived,
        "root's stop of {run_id} killed the other user's pid {pid}"
    );
    assert_eq!(stop.code, 0, "{}", stop.explain());
    assert!(
        !stop.stdout.contains(&pid.to_string()) && !stop.stderr.contains(&pid.to_string()),
        "the stop spoke of the other user's pid {pid} as the run's: {}",
        stop.explain()
    );
    assert!(stop.stdout.contains("none left"), "{}", stop.explain());
}

#[test]
fn a_launcher_that_exits_beside_another_users_process_carrying_the_run_id_has_exited() {
    let Some(other) = other_user() else { return };
    let env = Env::new();
    let go = env.path("go");
    let server = env.script(
        "server.sh",
        &format!(
            "while [ ! -e {} ]; do sleep 0.1; done\nexit 0",
            go.display()
        ),
    );
    let run = spawn_run(
        &env,
        &[
            "--json",
            "--ready-line",
            "never printed",
            // Long enough that a loaded machine's slow start of the impostor is no stall.
            "--stall",
            "60s",
            "--timeout",
            "5m",
            "--",
            &server,
        ],
    );
    let run_id = wait_run_id(&env);
    let home = other.dir();
    let impostor = as_other_user(&other, home.path(), &run_id, &["sleep", "300"]);
    let pid = impostor.id();
    std::fs::write(&go, "").unwrap();
    let out = wait_output(run, BOUND);
    let survived = alive(pid as u64);
    end(impostor);
    let v = verdict_of(&out);
    assert_eq!(
        v["verdict"], "exited",
        "the other user's pid {pid} was taken for the run's daemon: {} {}",
        out.stdout, out.stderr
    );
    assert!(survived, "the run's end killed the other user's pid {pid}");
}

#[test]
fn another_users_process_carrying_the_run_id_does_not_keep_the_run_from_prune() {
    let Some(other) = other_user() else { return };
    let env = Env::new();
    let r = env.run().json().until("exit").command(&["true"]).output();
    assert_eq!(r.verdict(), "succeeded", "{}", r.explain());
    let run_id = r.run_id().to_string();
    let home = other.dir();
    let impostor = as_other_user(&other, home.path(), &run_id, &["sleep", "300"]);
    let prune = env.fd("prune").opt("older-than", "0s").output();
    end(impostor);
    assert!(
        prune.stdout.contains(&format!("removed {run_id} ")),
        "the other user's process kept {run_id} from being pruned: {}",
        prune.explain()
    );
}
