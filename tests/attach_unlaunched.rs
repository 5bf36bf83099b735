//! `firedup watch` of a server firedup did not start: the process is found from its log (also one
//! that appears after the watch began), its log from the process (`--pid` alone), and what it
//! wrote is judged from the start when every byte is provably its own (issue 23, items 5, 6, 9).
//!
//! The servers are shell scripts (a real llama-server's log printed, then a `sleep` that does not
//! hold the log, so the script is the writer found) and a small Python HTTP server; each is killed
//! and reaped when its test ends, also when the test fails.

mod common;
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
    let r = env.firedup(&[
        "watch",
        "--json",
        "--no-probe",
        "--timeout",
        "60s",
        "--log",
        log.to_str().unwrap(),
    ]);
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
    let r = env.firedup(&[
        "watch",
        "--json",
        "--no-probe",
        "--timeout",
        "60s",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.contains("--from-start") && r.stderr.contains("--from-end"),
        "{}",
        r.explain()
    );
}
