//! Issue 29: what firedup says while a person waits on it. `firedup stop` on a terminal says
//! what it does during the grace period (a line before the wait, the result after); Ctrl-C on
//! `firedup watch` detaches, saying how to stop the run it leaves running (exit 130).

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Env;

/// Whether `script` (util-linux) can make a pseudo-terminal here (says so when it cannot).
fn script_installed() -> bool {
    let installed = Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        eprintln!("script (util-linux) is not installed: no pseudo-terminal to test under");
    }
    installed
}

/// A server launched detached that prints a line and never becomes ready.
fn detached_server(env: &Env, ready: &str) -> (String, u64) {
    let r = env
        .run()
        .flag("detach")
        .json()
        .ready_line(ready)
        .shell("echo starting; echo READY; exec sleep 300")
        .output();
    assert_eq!(r.code, 0, "{}", r.explain());
    let pid = r.json["pid"].as_u64().expect("the pid");
    (r.run_id().to_string(), pid)
}

#[test]
fn stop_on_a_terminal_says_what_it_does_during_the_grace_period() {
    if !script_installed() {
        return;
    }
    let env = Env::new();
    let (run_id, pid) = detached_server(&env, "READY");
    let typescript = env.path("typescript");
    let out = Command::new("script")
        .args(["-qfec"])
        .arg(format!(
            "exec '{}' stop '{run_id}'",
            env!("CARGO_BIN_EXE_firedup")
        ))
        .arg(&typescript)
        .env("FIREDUP_STATE_DIR", env.state.path())
        .env_remove("FIREDUP_PLAIN")
        .current_dir(env.work.path())
        .output()
        .unwrap();
    let raw = String::from_utf8_lossy(&std::fs::read(&typescript).unwrap()).into_owned();
    assert_eq!(out.status.code(), Some(0), "{raw}");
    let before = raw
        .find(&format!(
            "firedup: stopping {run_id}: SIGTERM sent, waiting up to 10"
        ))
        .unwrap_or_else(|| panic!("no line before the grace period:\n{raw}"));
    let after = raw
        .find(&format!("{run_id}: stopped"))
        .unwrap_or_else(|| panic!("no result line:\n{raw}"));
    assert!(before < after, "{raw}");
    assert!(!common::alive(pid), "the server was stopped");
    // Not on a terminal: the result line alone, for scripts.
    let (quiet_id, _) = detached_server(&env, "READY");
    let quiet = env.fd("stop").arg(&quiet_id).output();
    assert_eq!(quiet.code, 0, "{}", quiet.explain());
    assert!(!quiet.stderr.contains("stopping"), "{}", quiet.explain());
}

#[test]
fn ctrl_c_on_watch_detaches_and_says_how_to_stop_the_run() {
    let env = Env::new();
    // Never ready: the watch goes on until it is interrupted.
    let (run_id, pid) = detached_server(&env, "NEVER-READY");
    let mut watch = env
        .cmd()
        .args(["watch", &run_id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = watch.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            all.push_str(&line);
            all.push('\n');
            let _ = tx.send(());
        }
        all
    });
    // The watch has begun (its first line is after the handler is installed).
    rx.recv_timeout(Duration::from_secs(60))
        .expect("watch said nothing");
    let watch_pid = rustix::process::Pid::from_raw(watch.id() as i32).unwrap();
    rustix::process::kill_process(watch_pid, rustix::process::Signal::INT).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = watch.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "watch did not end");
        std::thread::sleep(Duration::from_millis(50));
    };
    let said = reader.join().unwrap();
    assert_eq!(status.code(), Some(130), "{said}");
    assert!(
        said.contains(&format!(
            "firedup: detached; still running: firedup stop {run_id}"
        )),
        "{said}"
    );
    assert!(common::alive(pid), "the watch stopped the run: {said}");
    let stop = env.fd("stop").arg(&run_id).output();
    assert_eq!(stop.code, 0, "{}", stop.explain());
}
