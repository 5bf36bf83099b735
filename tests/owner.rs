//! `run --owner PID` (issue 23, "an owner for every run"): when the owner ends, however it ends,
//! the run's supervisor stops the run and nothing of it is left, also after `run` has exited; the
//! verdict of a `run` still watching names the owner; the history records `owner_gone`; a dead
//! PID launches nothing.

use crate::common;
use common::Env;
use common::bounded::wait_output;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the run may take to be gone once its owner is (bounded wait, not a timing claim).
const GONE_WITHIN: Duration = Duration::from_secs(60);

/// A stand-in for a pytest session: a process whose end should stop the run.
struct Owner(Child);

impl Owner {
    fn start() -> Owner {
        Owner(Command::new("sleep").arg("1000").spawn().unwrap())
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    /// SIGKILL, then reaped (the kernel's view of its end: no handler ran).
    fn kill(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Live processes carrying `FIREDUP_RUN_ID=run_id` (the supervisor, the command, anything they
/// started), or `pid` itself.
fn left_of_run(run_id: &str, pid: Option<u64>) -> Vec<u64> {
    let want = format!("FIREDUP_RUN_ID={run_id}");
    let mut left: Vec<u64> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .filter(|p| common::alive(*p))
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/environ"))
                .is_ok_and(|b| b.split(|c| *c == 0).any(|e| e == want.as_bytes()))
        })
        .collect();
    if let Some(p) = pid.filter(|p| common::alive(*p)) {
        left.push(p);
    }
    left
}

/// Waits (bounded) until nothing of the run is left; returns what is left at the bound.
fn wait_until_gone(run_id: &str, pid: Option<u64>) -> Vec<u64> {
    let deadline = Instant::now() + GONE_WITHIN;
    loop {
        let left = left_of_run(run_id, pid);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills what a failed test left of the run.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in left_of_run(&self.0, None) {
            // SAFETY: kill(2) with a pid read from /proc just now.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
    }
}

fn show(env: &Env, run_id: &str) -> String {
    let r = env.fd("show").arg(run_id).output();
    format!("{}{}", r.stdout, r.stderr)
}

#[test]
fn a_ready_server_is_stopped_when_its_owner_is_killed_after_run_exited() {
    let env = Env::new();
    let mut owner = Owner::start();
    let pid = owner.pid().to_string();
    let r = env
        .run()
        .json()
        .opt("owner", &pid)
        .opt("grace", "2s")
        .ready_line("ready")
        .shell("echo ready; sleep 1000")
        .output();
    let _cleanup = Cleanup(r.run_id().to_string());
    assert_eq!(r.code, 0, "{}", r.explain());
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    assert_eq!(r.json["owner"].as_u64(), Some(owner.pid() as u64));
    let server = r.json["pid"].as_u64();
    assert!(server.is_some_and(common::alive), "{}", r.explain());
    let ps = env.fd("ps").json().output();
    assert_eq!(
        ps.json[0]["owner"].as_u64(),
        Some(owner.pid() as u64),
        "{}",
        ps.stdout
    );
    // `run` has exited: only the run's supervisor is left to notice.
    owner.kill();
    let left = wait_until_gone(r.run_id(), server);
    assert!(
        left.is_empty(),
        "processes of the run outlived its owner: {left:?}"
    );
    let shown = show(&env, r.run_id());
    assert!(
        shown.starts_with(&format!("{}: owner_gone", r.run_id())),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("stopped because its owner, pid {pid}, ended")),
        "{shown}"
    );
}

/// `run --json --owner` of `script` (sh -c), its owner SIGKILLed once the command runs (before
/// any verdict): run's JSON verdict, its explanation, and the run id, once nothing of the run is
/// left (asserted) and `show` says owner_gone (asserted).
fn owner_ends_while_run_watches(
    env: &Env,
    script: &str,
    grace: &str,
) -> (serde_json::Value, String) {
    let mut owner = Owner::start();
    let pid = owner.pid().to_string();
    let child = env
        .cmd()
        .args([
            "run",
            "--json",
            "--owner",
            &pid,
            "--grace",
            grace,
            "--ready-line",
            "never",
            "--",
            "sh",
            "-c",
            script,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The owner goes once the command has printed its first line, before any verdict.
    let runs = env.state.path().join("runs");
    let deadline = Instant::now() + GONE_WITHIN;
    let run_id = loop {
        let started = std::fs::read_dir(&runs).ok().and_then(|d| {
            d.filter_map(|e| e.ok())
                .find(|e| common::file_text(&e.path().join("output.log")).contains("starting"))
                .map(|e| e.file_name().to_string_lossy().into_owned())
        });
        if let Some(id) = started {
            break id;
        }
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    let _cleanup = Cleanup(run_id.clone());
    owner.kill();
    let out = wait_output(child, GONE_WITHIN);
    let json: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
    let explain = format!("exit {}\n{}\n{}", out.code, out.stdout, out.stderr);
    assert_eq!(
        json["owner"].as_u64(),
        Some(owner.pid() as u64),
        "{explain}"
    );
    let left = wait_until_gone(&run_id, json["pid"].as_u64());
    assert!(left.is_empty(), "left: {left:?}\n{explain}");
    let shown = show(env, &run_id);
    assert!(
        shown.starts_with(&format!("{run_id}: owner_gone")),
        "{shown}"
    );
    (json, explain)
}

#[test]
fn an_owner_ending_while_run_watches_gives_a_verdict_that_names_it() {
    let env = Env::new();
    let (json, explain) = owner_ends_while_run_watches(&env, "echo starting; sleep 1000", "2s");
    assert_eq!(json["verdict"], "killed", "{explain}");
    assert!(explain.starts_with("exit 4\n"), "{explain}");
    assert_eq!(json["signature"], serde_json::Value::Null, "{explain}");
    let reason = json["reason"].as_str().unwrap_or_default();
    let owner = json["owner"].as_u64().unwrap_or_default();
    assert!(
        reason.starts_with(&format!("stopped: its owner, pid {owner}, ended")),
        "{explain}"
    );
    assert!(reason.contains("SIGTERM"), "{explain}");
}

#[test]
fn a_fatal_line_printed_while_stopping_for_the_owner_is_not_the_verdict() {
    // The server answers firedup's SIGTERM with a fatal-looking line and takes longer than the
    // settle window (1.5 s) to exit: that line is the stop's echo, not a failure of the server.
    let env = Env::new();
    let script = "trap 'echo \"torch.OutOfMemoryError: CUDA out of memory\"; sleep 3; exit 1' TERM; echo starting; sleep 1000 & wait";
    let (json, explain) = owner_ends_while_run_watches(&env, script, "20s");
    assert_eq!(json["verdict"], "killed", "{explain}");
    assert_eq!(json["signature"], serde_json::Value::Null, "{explain}");
    let owner = json["owner"].as_u64().unwrap_or_default();
    assert!(
        json["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with(&format!("stopped: its owner, pid {owner}, ended")),
        "{explain}"
    );
}

#[test]
fn an_owner_that_is_not_running_launches_nothing() {
    let env = Env::new();
    let mut gone = Owner::start();
    gone.kill();
    let pid = gone.pid().to_string();
    let marker = env.path("ran");
    let touch = format!("touch {}", marker.display());
    for extra in [
        &[][..],
        &["--host", "elsewhere.invalid"][..],
        &["--slurm"][..],
    ] {
        let mut args = vec!["run", "--owner", &pid];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", &touch]);
        let r = env.firedup(&args);
        assert_eq!(r.code, 2, "{extra:?}: {}", r.explain());
        assert!(r.stderr.contains("--owner"), "{extra:?}: {}", r.explain());
    }
    let r = env.run().opt("owner", &pid).shell(&touch).output();
    assert!(
        r.stderr.contains("no such process is running"),
        "{}",
        r.explain()
    );
    assert!(!marker.exists(), "the command ran");
    let runs = std::fs::read_dir(env.state.path().join("runs"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(runs, 0, "a refused launch left a run directory");
}
