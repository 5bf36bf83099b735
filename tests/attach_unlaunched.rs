//! `firedup watch` of a server firedup did not start: the process is found from its log (also one
//! that appears after the watch began), its log from the process (`--pid` alone), and what it
//! wrote is judged from the start when every byte is provably its own (issue 23, items 5, 6, 9).
//!
//! The servers are shell scripts (a real llama-server's log printed, then a `sleep` that does not
//! hold the log, so the script is the writer found) and a small Python HTTP server; each is killed
//! and reaped when its test ends, also when the test fails.

use crate::common;
use common::{Env, fixture};

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A process the test started, killed and reaped on drop.
struct Started(Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `sh -c SCRIPT`, started by the test.
fn sh(script: &str) -> Started {
    Started(Command::new("sh").args(["-c", script]).spawn().unwrap())
}

/// Waits (bounded) until `log` holds `text`.
fn wait_for_text(log: &Path, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !common::file_text(log).contains(text) {
        assert!(
            Instant::now() < deadline,
            "{} never held {text:?}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A script named `llama-server` that prints a real llama-server's ready log and stays alive.
fn llama_server(env: &Env) -> String {
    env.script(
        "llama-server",
        &format!(
            "cat '{}'; sleep 60 > /dev/null 2>&1",
            fixture("servers/llamacpp-real/ready.log")
        ),
    )
}

#[test]
fn a_log_the_writer_created_after_it_started_is_judged_from_the_start_without_a_flag() {
    let env = Env::new();
    let log = env.path("server.log");
    let server = llama_server(&env);
    // `nohup server > log &`: the shell's child opens (creates) the log, then becomes the server.
    let writer = sh(&format!(
        "exec '{server}' -m tiny.gguf --port 18432 > '{}' 2>&1",
        log.display()
    ));
    wait_for_text(&log, "listening on");
    let r = env
        .fd("watch")
        .json()
        .flag("no-probe")
        .timeout("60s")
        .opt("log", log.to_str().unwrap())
        .output();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert_eq!(r.json["pid"], writer.0.id(), "{}", r.explain());
    assert!(
        r.stderr.contains("judging it from the start"),
        "{}",
        r.explain()
    );
}

#[test]
fn a_log_that_held_lines_before_its_writer_started_is_still_refused_without_a_flag() {
    let env = Env::new();
    let log = env.path("server.log");
    std::fs::write(&log, "an older run's line\n").unwrap();
    // The file's birth comes before the process's start: its first line may be anyone's.
    std::thread::sleep(Duration::from_millis(200));
    let server = llama_server(&env);
    let _writer = sh(&format!(
        "exec '{server}' -m tiny.gguf --port 18433 >> '{}' 2>&1",
        log.display()
    ));
    wait_for_text(&log, "listening on");
    let r = env
        .fd("watch")
        .json()
        .flag("no-probe")
        .timeout("60s")
        .opt("log", log.to_str().unwrap())
        .output();
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.contains("--from-start") && r.stderr.contains("--from-end"),
        "{}",
        r.explain()
    );
}

/// Whether process `pid` holds a pidfd open.
fn holds_a_pidfd(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.filter_map(|e| e.ok()).any(|e| {
                std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().contains("pidfd"))
            })
        })
        .unwrap_or(false)
}

/// `watch --pid` (with `--log` too when `log_given`) of `sh -c 'exec sleep 1000' > out`, started
/// by this test, which kills it by SIGKILL once the watch has begun and keeps it un-reaped (a
/// zombie, as a parent busy elsewhere would) until the watch has its verdict.
fn watch_a_process_killed_by_sigkill(log_given: bool) -> (common::bounded::Out, u32) {
    let env = Env::new();
    let out = env.path("out.log");
    let victim = Command::new("sh")
        .args(["-c", "exec sleep 1000"])
        .stdout(std::fs::File::create(&out).unwrap())
        .spawn()
        .unwrap();
    let mut victim = Started(victim);
    let pid = victim.0.id();
    let stderr = env.path("watch.stderr");
    let mut watch = env.cmd();
    watch.args([
        "watch",
        "--json",
        "--ready-line",
        "never printed",
        "--timeout",
        "60s",
        "--pid",
        &pid.to_string(),
    ]);
    if log_given {
        watch.args(["--log", out.to_str().unwrap()]);
    }
    let watch = watch
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    // Once the watch holds a pidfd (its observer watches the process's end); a refusal ends the
    // watch instead. A kill before that is read from the zombie just the same.
    let mut watch = watch;
    let deadline = Instant::now() + Duration::from_secs(60);
    // The pidfd is the watcher's: the process started here waits for it (`src/front.rs`).
    let front = watch.id();
    let watcher = || common::watcher_of(front).unwrap_or(front);
    while !holds_a_pidfd(watcher()) && watch.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "the watch never watched: {}",
            common::file_text(&stderr)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    victim.0.kill().unwrap(); // SIGKILL, not reaped until the watch is over
    let mut r = common::bounded::wait_output(watch, Duration::from_secs(120));
    r.stderr = common::file_text(&stderr);
    drop(victim);
    (r, pid)
}

#[test]
fn watch_pid_alone_follows_the_file_its_output_goes_to_and_reads_a_sigkill_from_the_kernel() {
    let (r, pid) = watch_a_process_killed_by_sigkill(false);
    let json: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap_or_default();
    let explain = format!(
        "exit {}\nstdout: {}\nstderr: {}",
        r.code, r.stdout, r.stderr
    );
    assert_eq!(json["pid"], pid, "{explain}");
    assert!(
        json["log"].as_str().is_some_and(|l| l.ends_with("out.log")),
        "{explain}"
    );
    assert_eq!(
        (r.code, json["verdict"].as_str()),
        (4, Some("killed")),
        "{explain}"
    );
    assert_eq!(json["exit"]["signal"], 9, "{explain}");
}

#[test]
fn a_process_not_started_by_firedup_killed_by_sigkill_is_killed_not_exited() {
    let (r, _) = watch_a_process_killed_by_sigkill(true);
    let json: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap_or_default();
    let explain = format!(
        "exit {}\nstdout: {}\nstderr: {}",
        r.code, r.stdout, r.stderr
    );
    assert_eq!(
        (r.code, json["verdict"].as_str()),
        (4, Some("killed")),
        "{explain}"
    );
    assert_eq!(json["signature"], "sigkill", "{explain}");
}

#[test]
fn watch_pid_alone_of_a_process_writing_to_a_pipe_is_refused_with_what_to_do() {
    let env = Env::new();
    let piped = Command::new("sleep")
        .arg("1000")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let piped = Started(piped);
    let r = env
        .fd("watch")
        .ready_line("x")
        .opt("pid", piped.0.id().to_string())
        .output();
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.contains("not a regular file") && r.stderr.contains("--log PATH"),
        "{}",
        r.explain()
    );
}

#[test]
fn a_watch_begun_before_the_log_exists_finds_its_writer_and_probes_the_writers_own_port() {
    let env = Env::new();
    let log = env.path("late.log");
    let port = common::free_port();
    // An sglang-shaped server (the profile's health probe decides) on its own --port, not the
    // profile's default 30000.
    let server = env.script(
        "sglang-serve",
        &format!(
            "exec python3 {} \"$@\"",
            fixture("servers/fake_sglang_server.py")
        ),
    );
    let mut watch = env.cmd();
    watch
        .args([
            "watch",
            "--json",
            "--profile",
            "sglang",
            // Bounds the watch before the fix (it waited out the 10-minute stall).
            "--timeout",
            "40s",
            "--log",
            log.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(env.path("watch.stderr")).unwrap());
    let mut watch = watch.spawn().unwrap();
    // Once the watch says it waits for the log, the server starts, creating its log.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !common::file_text(&env.path("watch.stderr"))
        .contains("to find the process that writes it")
    {
        assert!(
            watch.try_wait().unwrap().is_none(),
            "{}",
            common::file_text(&env.path("watch.stderr"))
        );
        assert!(
            Instant::now() < deadline,
            "the watch never said it waits for the log"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let writer = sh(&format!(
        "exec '{server}' --model-path fake/model --port {port} > '{}' 2>&1",
        log.display()
    ));
    let r = common::bounded::wait_output(watch, Duration::from_secs(120));
    let json: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap_or_default();
    let explain = format!(
        "exit {}\nstdout: {}\nstderr: {}",
        r.code, r.stdout, r.stderr
    );
    assert_eq!(
        (r.code, json["verdict"].as_str()),
        (0, Some("ready")),
        "{explain}"
    );
    assert_eq!(json["pid"], writer.0.id(), "{explain}");
    assert_eq!(json["port"], port, "{explain}");
    assert!(
        json["reason"]
            .as_str()
            .unwrap_or("")
            .contains(&format!(":{port}/health")),
        "{explain}"
    );
}
