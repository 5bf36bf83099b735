//! firedup against real servers: Redis, PostgreSQL and Python's http.server, each started through
//! `firedup run`, asserted on its JSON verdict and always stopped again.
//!
//! Every wait is bounded twice: by firedup's own `--timeout`/`--stall` and by a process-level bound
//! here (the firedup process is killed if it outlives it).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common;

use common::bounded::run_bounded;
use common::free_port;
use common::pg::{AS_POSTGRES, Pg, find_pg, pg_cluster, sh};

/// The longest any single firedup or helper process may run before the test kills it.
const PROCESS_BOUND: Duration = Duration::from_secs(120);

/// One test's firedup: its own state directory.
struct Firedup {
    state: tempfile::TempDir,
}

struct Run {
    code: i32,
    json: serde_json::Value,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Run {
    fn verdict(&self) -> &str {
        self.json["verdict"].as_str().unwrap_or("<no json>")
    }
    fn signature(&self) -> Option<&str> {
        self.json["signature"].as_str()
    }
    fn run_id(&self) -> String {
        self.json["run_id"].as_str().unwrap_or("").to_string()
    }
    fn line_text(&self) -> &str {
        self.json["line"]["text"].as_str().unwrap_or("")
    }
    fn explain(&self) -> String {
        format!(
            "exit {} after {:?}\nstdout: {}\nstderr: {}",
            self.code, self.took, self.stdout, self.stderr
        )
    }
}

impl Firedup {
    fn new() -> Firedup {
        Firedup {
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn command(&self, cwd: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_firedup"));
        c.env("FIREDUP_STATE_DIR", self.state.path())
            .env("FIREDUP_PLAIN", "1")
            .env("RUST_BACKTRACE", "0")
            .current_dir(cwd)
            .args(args);
        c
    }

    /// Runs firedup with `args` and parses its stdout as JSON (Null when it is not JSON).
    fn run(&self, cwd: &Path, args: &[&str]) -> Run {
        let out = run_bounded(self.command(cwd, args), PROCESS_BOUND);
        let json = serde_json::from_str(out.stdout.trim()).unwrap_or(serde_json::Value::Null);
        Run {
            code: out.code,
            json,
            stdout: out.stdout,
            stderr: out.stderr,
            took: out.took,
        }
    }

    /// `firedup run --json ARGS`, with a guard that stops the run when dropped (whatever the verdict).
    fn launch<'a>(&'a self, cwd: &Path, args: &[&str]) -> (Run, StopGuard<'a>) {
        let mut full = vec!["run", "--json"];
        full.extend_from_slice(args);
        let r = self.run(cwd, &full);
        let guard = StopGuard {
            firedup: self,
            run_id: r.run_id(),
            stopped: false,
        };
        (r, guard)
    }
}

/// Runs `firedup stop RUN_ID` on drop unless `stop` already did.
struct StopGuard<'a> {
    firedup: &'a Firedup,
    run_id: String,
    stopped: bool,
}

impl StopGuard<'_> {
    fn stop(&mut self) -> Run {
        self.stopped = true;
        let r = self
            .firedup
            .run(self.firedup.state.path(), &["stop", &self.run_id]);
        assert_eq!(r.code, 0, "firedup stop {}: {}", self.run_id, r.explain());
        r
    }
}

impl Drop for StopGuard<'_> {
    fn drop(&mut self) {
        if !self.stopped && !self.run_id.is_empty() {
            self.stopped = true;
            let r = self
                .firedup
                .run(self.firedup.state.path(), &["stop", &self.run_id]);
            eprintln!("cleanup: firedup stop {} -> exit {}", self.run_id, r.code);
        }
    }
}

/// Redis and Postgres are ready only once their port is listening, held by the watched tree.
fn assert_port_probe_held_by_tree(r: &Run, port: &str) {
    let probes = r.json["probes"].as_array().expect("probes in the JSON");
    assert_eq!(probes.len(), 1, "{}", r.explain());
    let p = &probes[0];
    assert_eq!(p["kind"], "port", "{}", r.explain());
    assert!(
        p["target"].as_str().unwrap().ends_with(&format!(":{port}")),
        "{}",
        r.explain()
    );
    assert!(p["ready_s"].as_f64().is_some(), "{}", r.explain());
    assert!(
        p["last"]
            .as_str()
            .unwrap()
            .contains("of the watched process tree"),
        "{}",
        r.explain()
    );
}

/// A listener holding 127.0.0.1 on some port, kept open by the caller.
fn taken_port() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

fn refuses(port: u16) -> bool {
    match TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Duration::from_secs(2),
    ) {
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionRefused,
        Ok(_) => false,
    }
}

// ---------------------------------------------------------------- Redis

fn redis_available() -> bool {
    Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[test]
fn redis_ready_answers_ping_and_stop_frees_the_port() {
    assert!(redis_available(), "redis-server is not installed");
    let fd = Firedup::new();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let (r, mut guard) = fd.launch(
        dir.path(),
        &[
            "--timeout",
            "30s",
            "--",
            "redis-server",
            "--port",
            &port,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            dir.path().to_str().unwrap(),
        ],
    );
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert!(
        r.line_text().contains("Ready to accept connections"),
        "{}",
        r.explain()
    );
    assert_port_probe_held_by_tree(&r, &port);
    let mut ping = Command::new("redis-cli");
    ping.args(["-p", &port, "ping"]);
    let p = run_bounded(ping, Duration::from_secs(30));
    assert_eq!(
        p.stdout.trim(),
        "PONG",
        "redis-cli: {} {}",
        p.stdout,
        p.stderr
    );
    guard.stop();
    let port: u16 = port.parse().unwrap();
    assert!(
        refuses(port),
        "port {port} still accepts after firedup stop"
    );
}

#[test]
fn redis_port_taken_is_port_in_use() {
    assert!(redis_available(), "redis-server is not installed");
    let fd = Firedup::new();
    let dir = tempfile::tempdir().unwrap();
    let (_held, port) = taken_port();
    let port = port.to_string();
    let (r, _guard) = fd.launch(
        dir.path(),
        &[
            "--timeout",
            "30s",
            "--stall",
            "20s",
            "--",
            "redis-server",
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            dir.path().to_str().unwrap(),
        ],
    );
    assert_eq!((r.code, r.verdict()), (1, "failed"), "{}", r.explain());
    assert_eq!(r.signature(), Some("port_in_use"), "{}", r.explain());
    let text = r.line_text();
    assert!(
        text.contains("Address already in use") || text.contains("Failed listening"),
        "decisive line {text:?}\n{}",
        r.explain()
    );
}

#[test]
fn redis_bad_config_option_is_config_error() {
    assert!(redis_available(), "redis-server is not installed");
    let fd = Firedup::new();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let (r, _guard) = fd.launch(
        dir.path(),
        &[
            "--timeout",
            "30s",
            "--stall",
            "20s",
            "--",
            "redis-server",
            "--port",
            &port,
            "--no-such-option",
            "1",
        ],
    );
    assert_eq!((r.code, r.verdict()), (1, "failed"), "{}", r.explain());
    assert_eq!(r.signature(), Some("config_error"), "{}", r.explain());
}

// ---------------------------------------------------------------- PostgreSQL

/// `firedup run` args for postgres on `port` as the postgres user, plus `extra` server args.
fn pg_args<'a>(
    pg: &'a Pg,
    dir: &'a str,
    data: &'a str,
    port: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut v = vec!["--timeout", "60s", "--stall", "45s", "--"];
    v.extend(AS_POSTGRES);
    v.extend([
        pg.postgres.to_str().unwrap(),
        "-D",
        data,
        "-p",
        port,
        "-k",
        dir,
        "-c",
        "listen_addresses=127.0.0.1",
    ]);
    v.extend_from_slice(extra);
    v
}

#[test]
fn postgres_ready_and_stop() {
    let Some(pg) = find_pg() else { return };
    let dir = pg_cluster(&pg);
    let d = dir.path().to_str().unwrap();
    let data = format!("{d}/data");
    let port = free_port().to_string();
    let fd = Firedup::new();
    let (r, mut guard) = fd.launch(dir.path(), &pg_args(&pg, d, &data, &port, &[]));
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert!(
        r.line_text()
            .contains("database system is ready to accept connections"),
        "{}",
        r.explain()
    );
    assert_port_probe_held_by_tree(&r, &port);
    // The port probe reads the socket table instead of connecting once Postgres listens, so
    // Postgres does not log a line per probe.
    let log = std::fs::read_to_string(r.json["log"].as_str().unwrap()).unwrap();
    assert!(
        !log.contains("incomplete startup packet"),
        "the port probe made Postgres log connections:\n{log}"
    );
    guard.stop();
    let port: u16 = port.parse().unwrap();
    assert!(
        refuses(port),
        "port {port} still accepts after firedup stop"
    );
}

#[test]
fn postgres_bad_option_is_config_error() {
    let Some(pg) = find_pg() else { return };
    let dir = pg_cluster(&pg);
    let d = dir.path().to_str().unwrap();
    let data = format!("{d}/data");
    let port = free_port().to_string();
    let fd = Firedup::new();
    let (r, _guard) = fd.launch(
        dir.path(),
        &pg_args(&pg, d, &data, &port, &["-c", "no_such_option=1"]),
    );
    assert_eq!((r.code, r.verdict()), (1, "failed"), "{}", r.explain());
    assert_eq!(r.signature(), Some("config_error"), "{}", r.explain());
}

#[test]
fn postgres_port_taken_is_port_in_use() {
    let Some(pg) = find_pg() else { return };
    let dir = pg_cluster(&pg);
    let d = dir.path().to_str().unwrap();
    let data = format!("{d}/data");
    let (_held, port) = taken_port();
    let port = port.to_string();
    let fd = Firedup::new();
    let (r, _guard) = fd.launch(dir.path(), &pg_args(&pg, d, &data, &port, &[]));
    assert_eq!((r.code, r.verdict()), (1, "failed"), "{}", r.explain());
    assert_eq!(r.signature(), Some("port_in_use"), "{}", r.explain());
    let line = r.json["line"]["text"].as_str().unwrap_or("");
    assert!(
        line.contains("Address already in use"),
        "the decisive line shows the cause: {line}"
    );
}

#[test]
fn postgres_unreadable_data_dir_is_permission_denied() {
    let Some(pg) = find_pg() else { return };
    let dir = pg_cluster(&pg);
    let d = dir.path().to_str().unwrap();
    let data = format!("{d}/data");
    // The data directory now belongs to root, mode 700: the postgres user cannot use it.
    sh(&["chown", "-R", "root:root", &data]);
    sh(&["chmod", "700", &data]);
    let port = free_port().to_string();
    let fd = Firedup::new();
    let (r, _guard) = fd.launch(dir.path(), &pg_args(&pg, d, &data, &port, &[]));
    assert_eq!((r.code, r.verdict()), (1, "failed"), "{}", r.explain());
    assert_eq!(r.signature(), Some("permission_denied"), "{}", r.explain());
}

// ---------------------------------------------------------------- Python http.server

#[test]
fn python_http_server_ready_serves_and_stops() {
    let fd = Firedup::new();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let (r, mut guard) = fd.launch(
        dir.path(),
        &[
            "--timeout",
            "30s",
            "--ready-line",
            "Serving HTTP on",
            "--",
            "python3",
            "-u",
            "-m",
            "http.server",
            &port,
            "--bind",
            "127.0.0.1",
        ],
    );
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    let mut s = TcpStream::connect(format!("127.0.0.1:{port}")).expect("connect to http.server");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    assert!(resp.starts_with("HTTP/1.0 200"), "response: {resp:?}");
    drop(s);
    guard.stop();
    let port: u16 = port.parse().unwrap();
    assert!(
        refuses(port),
        "port {port} still accepts after firedup stop"
    );
}
