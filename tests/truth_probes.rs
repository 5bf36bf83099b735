//! True verdicts around probes and the ready condition, through the real binary (issue 11):
//! someone else's server on the probed port is "not yet", never `ready` (`--http`,
//! `--ready-request` and a profile's own probe); parallel matrix cells that would share a port are
//! refused before they start; a uvicorn app's bind error right after `Application startup
//! complete.` is the verdict, not `ready`; a `monitor_error` leaves the server running with the
//! commands to re-attach or stop it; `--then` learns the address given by `--http`.
//!
//! The foreign server is a real `python3 -m http.server`; the uvicorn app is
//! `tests/fixtures/truth/fake_uvicorn.py`. Every firedup run is bounded (60 s, then killed and
//! failed); no test bounds how fast anything is.

mod common;

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::bounded::run_bounded;
use common::{Env, fixture, free_port};

const BOUND: Duration = Duration::from_secs(60);

struct Ran {
    code: i32,
    json: serde_json::Value,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn verdict(&self) -> &str {
        self.json["verdict"].as_str().unwrap_or("<no json>")
    }
    fn explain(&self) -> String {
        format!(
            "exit {}\nstdout: {}\nstderr: {}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs firedup with `args`, killed and failed past [`BOUND`].
fn firedup(env: &Env, args: &[&str]) -> Ran {
    let mut c = env.cmd();
    c.args(args);
    let out = run_bounded(c, BOUND);
    Ran {
        code: out.code,
        json: serde_json::from_str(out.stdout.trim()).unwrap_or(serde_json::Value::Null),
        stdout: out.stdout,
        stderr: out.stderr,
    }
}

/// A process the test started, killed (and reaped) when dropped.
struct Helper(Child);

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A real `python3 -m http.server` on 127.0.0.1:`port`, once it accepts connections.
fn foreign_http_server(env: &Env, port: u16) -> Helper {
    let child = Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .current_dir(env.work.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 runs");
    let helper = Helper(child);
    let deadline = Instant::now() + BOUND;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "python3 -m http.server never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    helper
}

fn fake_uvicorn() -> String {
    fixture("truth/fake_uvicorn.py")
}

// ------------------------------------------------------------------------------- case 4

/// uvicorn logs `Application startup complete.` and only then binds; a taken port is the next
/// line. The vllm profile's ready line must not win over it: `failed` with `port_in_use`, whether
/// the app exits at once or lingers in its shutdown (before the fix: `ready` in a millisecond,
/// and with `--then` the next step would have run against someone else's server).
#[test]
fn a_bind_error_right_after_the_ready_line_is_the_verdict() {
    let env = Env::new();
    let port = free_port();
    let _foreign = foreign_http_server(&env, port);
    let p = port.to_string();
    let app = fake_uvicorn();
    for linger in ["0", "3"] {
        let r = firedup(
            &env,
            &[
                "run",
                "--json",
                "--profile",
                "vllm",
                "--no-probe",
                "--timeout",
                "30s",
                "--",
                "python3",
                &app,
                "--port",
                &p,
                "--linger",
                linger,
            ],
        );
        assert_eq!(
            (r.code, r.verdict(), r.json["signature"].as_str()),
            (1, "failed", Some("port_in_use")),
            "linger {linger}: {}",
            r.explain()
        );
        let line = r.json["line"]["text"].as_str().unwrap_or_default();
        assert!(
            line.contains("[Errno 98] error while attempting to bind on address"),
            "linger {linger}: {line}"
        );
        assert_eq!(r.json["server_running"], false, "linger {linger}");
    }
}

/// When the port is free the same app serves: `ready`, and the time reported is the time of the
/// ready line, not the end of the confirmation window.
#[test]
fn a_uvicorn_app_that_binds_is_ready_at_the_time_of_its_ready_line() {
    let env = Env::new();
    let p = free_port().to_string();
    let r = firedup(
        &env,
        &[
            "run",
            "--json",
            "--profile",
            "vllm",
            "--timeout",
            "30s",
            "--then",
            "true",
            "--",
            "python3",
            &fake_uvicorn(),
            "--port",
            &p,
        ],
    );
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    let ready_s = r.json["ready_s"].as_f64().expect("ready_s");
    assert_eq!(r.json["elapsed_s"].as_f64(), Some(ready_s), "{}", r.json);
    let http = r.json["probes"][0]["last"].as_str().unwrap_or_default();
    assert!(http.contains("HTTP 200"), "{http}");
}
