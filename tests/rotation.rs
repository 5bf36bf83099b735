//! A log rotated before firedup first follows it: the command goes on writing to the file it has
//! open (renamed away, or deleted), while a new, empty file sits at the path. firedup must read
//! the file the run was launched into, found by the identity the launch recorded, not judge the
//! new file alone (a false `stalled`, or a missed fatal line).
//!
//! Deterministic, not by load: firedup is killed before the rotation and re-attaches with
//! `watch RUN_ID` after it. Through the real binary; waits are bounded, verdicts asserted; no
//! wall-clock bound.

use crate::common;
use common::Env;
use common::bounded::wait_output;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(60);

/// Waits (bounded) until `cond` holds.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !cond() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn only_run_id(env: &Env) -> String {
    let runs = env.state.path().join("runs");
    let deadline = Instant::now() + BOUND;
    loop {
        let found = std::fs::read_dir(&runs).ok().and_then(|d| {
            d.flatten()
                .find(|e| e.path().join("process.json").exists())
                .map(|e| e.file_name().to_string_lossy().into_owned())
        });
        if let Some(id) = found {
            return id;
        }
        assert!(Instant::now() < deadline, "no run appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn has(path: &Path, text: &str) -> bool {
    std::fs::read_to_string(path).is_ok_and(|s| s.contains(text))
}

/// Launches `job` (a shell body; the log path is `$1`, the gates `$2` and `$3`) with `run
/// --until exit`, kills firedup before the job rotates its log (the job waits for gate `$2`),
/// lets it rotate, and re-attaches with `watch RUN_ID --events`. Returns the watch (still
/// running) and the events file.
fn rotated_before_watch(env: &Env, job: &str) -> (Child, std::path::PathBuf) {
    let log = env.path("job.log");
    let (gate1, gate2) = (env.path("gate1"), env.path("gate2"));
    let script = env.script("job.sh", job);
    let mut first = env
        .cmd()
        .args([
            "run",
            "--json",
            "--until",
            "exit",
            "--stall",
            "3s",
            "--log",
            log.to_str().unwrap(),
            "--",
            &script,
            log.to_str().unwrap(),
            gate1.to_str().unwrap(),
            gate2.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let id = only_run_id(env);
    wait_until("the job's first line", || has(&log, "epoch starting"));
    first.kill().unwrap(); // firedup, not the job
    first.wait().unwrap();
    std::fs::write(&gate1, "").unwrap();
    wait_until("the rotation", || env.path("rotated").exists());
    let events = env.path("events.ndjson");
    let watch = env
        .cmd()
        .args(["watch", "--json", "--events", events.to_str().unwrap(), &id])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (watch, events)
}

/// The job's rotation: `mv` (logrotate's `create`) or `rm` (deleted; only the descriptors the
/// run's processes hold reach the file then), then an empty file at the path.
fn rotation(how: &str) -> String {
    let away = match how {
        "mv" => "mv \"$1\" \"$1.1\"",
        _ => "rm \"$1\"",
    };
    format!(
        "echo 'epoch starting'\nwhile [ ! -e \"$2\" ]; do sleep 0.05; done\n{away}; : > \"$1\"; : > rotated\n"
    )
}

fn a_job_writing_to_its_rotated_log_is_working(how: &str) {
    let env = Env::new();
    let job = format!(
        "{}i=0; while [ ! -e \"$3\" ]; do i=$((i+1)); echo \"working on step $i\"; sleep 0.2; done\necho 'training finished'\nexit 0",
        rotation(how)
    );
    let (mut watch, events) = rotated_before_watch(&env, &job);
    // The lines the job writes to the rotated file after firedup re-attached are read (a watch
    // that ended meanwhile reached a verdict without them).
    let deadline = Instant::now() + BOUND;
    while !has(&events, "working on step")
        && watch.try_wait().unwrap().is_none()
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let seen = has(&events, "working on step");
    std::fs::write(env.path("gate2"), "").unwrap();
    let out = wait_output(watch, BOUND);
    let json: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
    assert!(
        seen,
        "the lines written to the rotated log were never read\nstdout: {}\nstderr: {}",
        out.stdout, out.stderr
    );
    assert_eq!(
        (out.code, json["verdict"].as_str()),
        (0, Some("succeeded")),
        "stdout: {}\nstderr: {}",
        out.stdout,
        out.stderr
    );
    assert!(
        has(&events, "training finished"),
        "the job's last line, written to the rotated log, was not read"
    );
    assert!(
        out.stderr
            .contains("was rotated before firedup followed it"),
        "the user is told: {}",
        out.stderr
    );
}

#[test]
fn a_job_writing_to_its_log_renamed_before_firedup_followed_it_succeeds() {
    a_job_writing_to_its_rotated_log_is_working("mv");
}

#[test]
fn a_job_writing_to_its_log_deleted_before_firedup_followed_it_succeeds() {
    a_job_writing_to_its_rotated_log_is_working("rm");
}

#[test]
fn a_fatal_line_written_to_the_rotated_log_fails_the_run_with_its_signature() {
    let env = Env::new();
    let job = format!(
        "{}echo 'still loading'\nwhile [ ! -e \"$3\" ]; do sleep 0.05; done\necho 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'\nexit 1",
        rotation("mv")
    );
    let (watch, events) = rotated_before_watch(&env, &job);
    // The fatal line is written once the watch has begun observing.
    wait_until("the watch to begin", || has(&events, "\"started\""));
    std::fs::write(env.path("gate2"), "").unwrap();
    let out = wait_output(watch, BOUND);
    let json: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
    assert_eq!(
        (
            json["verdict"].as_str(),
            json["signature"].as_str(),
            out.code
        ),
        (Some("failed"), Some("cuda_oom"), 1),
        "stdout: {}\nstderr: {}",
        out.stdout,
        out.stderr
    );
    let line = json["line"]["text"].as_str().unwrap_or("");
    assert!(
        line.contains("CUDA out of memory"),
        "decisive line {line:?}"
    );
}
