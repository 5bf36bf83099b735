//! Issue 24, item 3: a log shared over time (one launch after another appending to it) or by
//! aliases (a hard link, an old file moved into place, a truncation) is divided between runs by
//! file identity and offsets, never by path: `watch RUN_ID` judges that run's part only, a
//! re-judge never overwrites a recorded verdict, and a file a live run writes is refused to
//! another.

use crate::common;

use std::path::Path;

use common::Env;

/// Waits until `done` holds, polling, for at most 60 s (a bound, not a timing: the assertion
/// that follows says what was missing).
fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "never came: {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Waits (bounded) until run `id`'s command has ended and its end is recorded.
fn ended(env: &Env, id: &str) {
    let exit = env.state.path().join("runs").join(id).join("exit.json");
    until("the detached run's exit.json", || exit.exists());
}

/// Launches `script` detached into `log`, with `flags`; its run id.
fn detached(env: &Env, log: &Path, flags: &[&str], script: &str) -> String {
    let mut args = vec!["run", "--detach", "--json", "--log", log.to_str().unwrap()];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let r = env.firedup(&args);
    assert_eq!(r.code, 0, "{}", r.explain());
    r.run_id().to_string()
}

fn history_verdict(env: &Env, id: &str) -> String {
    let r = env.fd("show").arg(id).json().output();
    r.json["verdict"]
        .as_str()
        .or(r.json["outcome"]["verdict"].as_str())
        .unwrap_or_else(|| panic!("{}", r.explain()))
        .to_string()
}

#[test]
fn watching_an_ended_run_judges_its_own_part_of_a_shared_log_and_keeps_its_verdict() {
    let env = Env::new();
    let log = env.path("shared.log");
    let a = detached(
        &env,
        &log,
        &["--until", "exit", "--fail-line", "FATAL"],
        "echo hello; exit 0",
    );
    ended(&env, &a);
    // The next launch appends to the same log after the first has ended.
    let b = env
        .run()
        .json()
        .until("exit")
        .opt("log", log.to_str().unwrap())
        .shell("echo 'FATAL: the next run broke'; exit 1")
        .output();
    assert_eq!(b.verdict(), "exited", "the next run ran: {}", b.explain());
    // `logs` shows the first run's part only.
    let logs = env.fd("logs").arg(&a).output();
    assert!(
        logs.stdout.contains("hello") && !logs.stdout.contains("next run"),
        "{}",
        logs.explain()
    );
    let w = env.fd("watch").arg(&a).json().output();
    assert_eq!(w.verdict(), "succeeded", "{}", w.explain());
    assert!(!w.stdout.contains("next run"), "{}", w.explain());
    assert_eq!(history_verdict(&env, &a), "succeeded");
    // A re-judge with other flags reports the verdict recorded, and leaves the row as it was.
    let again = env
        .fd("watch")
        .arg(&a)
        .json()
        .opt("fail-line", "hello")
        .output();
    assert_eq!(again.verdict(), "succeeded", "{}", again.explain());
    assert_eq!(history_verdict(&env, &a), "succeeded");
}

#[test]
fn a_hard_link_to_a_live_runs_log_is_refused_as_another_runs_log() {
    let env = Env::new();
    let log = env.path("a.log");
    let a = detached(
        &env,
        &log,
        &["--ready-line", "READY"],
        "echo READY; exec sleep 60",
    );
    let alias = env.path("alias.log");
    // The first run's supervisor creates the log: bounded wait for it.
    until("the first run's log", || log.exists());
    std::fs::hard_link(&log, &alias).unwrap();
    let b = env
        .run()
        .json()
        .until("exit")
        .opt("log", alias.to_str().unwrap())
        .shell("echo second")
        .output();
    let stop = env.fd("stop").arg(&a).output();
    assert_eq!(b.code, 2, "{}", b.explain());
    assert!(
        b.stderr.contains(&a) && b.stderr.contains("give this run a log of its own"),
        "{}",
        b.explain()
    );
    assert_eq!(stop.code, 0, "{}", stop.explain());
}

#[test]
fn an_old_file_moved_into_place_after_a_rotation_is_not_judged_as_the_runs() {
    let env = Env::new();
    let log = env.path("app.log");
    let old = env.path("old.log");
    std::fs::write(
        &old,
        "Traceback (most recent call last):\nRuntimeError: yesterday's failure\n",
    )
    .unwrap();
    let a = detached(&env, &log, &["--until", "exit"], "echo launched; exit 0");
    ended(&env, &a);
    // Rotated (renamed away), and an older file moved into place.
    std::fs::rename(&log, env.path("app.log.1")).unwrap();
    std::fs::rename(&old, &log).unwrap();
    let w = env.fd("watch").arg(&a).json().output();
    assert_eq!(w.verdict(), "succeeded", "{}", w.explain());
    assert!(!w.stdout.contains("yesterday"), "{}", w.explain());
}

#[test]
fn an_appended_log_truncated_by_copytruncate_is_read_from_its_start() {
    let env = Env::new();
    let log = env.path("app.log");
    std::fs::write(&log, "0123456789\n").unwrap();
    // The command writes its fatal line only once the test has truncated the log (bounded).
    let a = detached(
        &env,
        &log,
        &["--until", "exit", "--fail-line", "FATAL"],
        "echo started; i=0; while [ ! -e go ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; echo 'FATAL: written after the truncation'; exit 0",
    );
    until("the run's first line", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("started"))
    });
    // copytruncate: copied away, then the same file emptied.
    std::fs::copy(&log, env.path("app.log.1")).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(0)
        .unwrap();
    std::fs::write(env.path("go"), "").unwrap();
    ended(&env, &a);
    let w = env.fd("watch").arg(&a).json().output();
    assert_eq!(w.verdict(), "failed", "{}", w.explain());
    assert!(
        w.stdout.contains("FATAL: written after the truncation"),
        "{}",
        w.explain()
    );
}
