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

use crate::common;

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Env, Run, alive, fixture, free_port};

const BOUND: Duration = Duration::from_secs(60);

/// Runs firedup with `args`, killed and failed past [`BOUND`].
fn firedup(env: &Env, args: &[&str]) -> Run {
    env.fd(args[0])
        .args_from(&args[1..])
        .bounded(BOUND)
        .output()
}

/// A process the test started, killed (and reaped) when dropped.
struct Helper(Child);

impl Helper {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

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

// ------------------------------------------------------------------------------- case 3

/// A stale `python3 -m http.server` on the probed port answers 200 (or 404) at once; the watched
/// server is still loading. Each kind of HTTP probe must say "not yet", naming the other process,
/// until the timeout: never `ready` (before the fix: `ready` in milliseconds through `--http`,
/// `monitor_error` through the request probe and the profile's /health, whose 404 came from the
/// wrong server, and the loading server was stopped for it).
#[test]
fn someone_elses_http_server_on_the_port_is_not_yet_for_every_http_probe() {
    let env = Env::new();
    let port = free_port();
    let foreign = foreign_http_server(&env, port);
    let p = port.to_string();
    let url = format!("http://127.0.0.1:{port}/");
    // A loading server whose address is the probed port (`sh -c SCRIPT sh --port P` reads to the
    // vllm profile as a server on port P) and that never gets there.
    let loading = "echo 'INFO:     Application startup complete.'; exec sleep 30";
    let cases: [(&str, Vec<&str>); 3] = [
        ("--http", vec!["--ready-line", "never", "--http", &url]),
        (
            "--ready-request",
            vec!["--profile", "vllm", "--no-probe", "--ready-request"],
        ),
        ("the profile's http probe", vec!["--profile", "vllm"]),
    ];
    for (name, flags) in cases {
        let mut args = vec!["run", "--json", "--timeout", "3s"];
        args.extend(flags);
        args.extend(["--", "sh", "-c", loading, "sh", "--port", &p]);
        let r = firedup(&env, &args);
        assert_eq!(
            (r.code, r.verdict()),
            (124, "timed_out"),
            "{name}: {}",
            r.explain()
        );
        let reason = r.json["reason"].as_str().unwrap_or_default();
        let named = format!("port {port} is answered by pid {}", foreign.pid());
        assert!(
            reason.contains(&named) && reason.contains("not by the watched process"),
            "{name}: the reason does not name the other server: {reason}"
        );
        assert!(
            r.stderr.contains(&named),
            "{name}: not shown while waiting:\n{}",
            r.stderr
        );
    }
    // The other server was never touched.
    assert!(alive(foreign.pid() as u64));
}

/// A server that daemonizes (a double fork into its own session) leaves the watched process tree,
/// but it still carries the run's FIREDUP_RUN_ID: its listener is the run's own, so `ready`.
#[test]
fn a_daemon_of_the_run_holding_the_port_is_the_runs_own() {
    let env = Env::new();
    let port = free_port();
    let daemon = format!("http.server {port} --bind 127.0.0.1");
    let script =
        format!("(setsid timeout 60 python3 -m {daemon} >/dev/null 2>&1 &); exec sleep 30");
    let url = format!("http://127.0.0.1:{port}/");
    let r = env
        .run()
        .json()
        .opt("http", &url)
        .timeout("20s")
        .shell(&script)
        .bounded(BOUND)
        .output();
    // The daemon is the test's to clean up (`firedup stop` follows the tree).
    let _ = env
        .fd("stop")
        .arg(r.json["run_id"].as_str().unwrap_or("none"))
        .bounded(BOUND)
        .output();
    for pid in pids_with_cmdline(&daemon) {
        // SAFETY: kill(2) on processes this test started (their command line names its port).
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    }
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
}

/// Pids whose command line contains `needle`.
fn pids_with_cmdline(needle: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| {
                    String::from_utf8_lossy(&b)
                        .replace('\0', " ")
                        .contains(needle)
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Two slots running at once, each cell's server on the vllm profile's default port 8000: the
/// second would find the first's server. Refused before anything starts (exit 2, naming the
/// cells and the port); slots that give each cell its own port are accepted.
#[test]
fn parallel_matrix_cells_that_would_share_a_port_are_refused_before_they_start() {
    let env = Env::new();
    let write = |name: &str, slots: &str| {
        let file = env.path(name);
        std::fs::write(
            &file,
            format!(
                r#"
[base]
command = ["sh", "-c", "echo 'INFO:     Application startup complete.'; exec sleep 30", "sh", "--port", "{{port}}"]
profile = "vllm"
no_probe = true
timeout = "10s"
vars = {{ port = "8000" }}

[[axis]]
env = "MODE"
values = ["a", "b"]

{slots}
"#
            ),
        )
        .unwrap();
        file.display().to_string()
    };
    let shared = write("shared.toml", "[[slot]]\n[[slot]]\n");
    let r = env
        .fd("matrix")
        .arg(&shared)
        .flag("dry-run")
        .bounded(BOUND)
        .output();
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.contains("cell 1 (MODE=a) in slot 0")
            && r.stderr.contains("in slot 1")
            && r.stderr.contains("would both use port 8000"),
        "{}",
        r.explain()
    );
    let own = write(
        "own-ports.toml",
        "[[slot]]\nvars = { port = \"18000\" }\n[[slot]]\nvars = { port = \"18001\" }\n",
    );
    let r = env
        .fd("matrix")
        .arg(&own)
        .flag("dry-run")
        .bounded(BOUND)
        .output();
    assert_eq!(r.code, 0, "{}", r.explain());
}

// ------------------------------------------------------------------------------- case 4

/// uvicorn logs `Application startup complete.` and only then binds; a taken port is the next
/// line. The vllm profile's ready line must not win over it: `failed` with `port_in_use`, whether
/// the app exits at once or lingers in its shutdown (before the fix: `ready` in a millisecond,
/// and with `--then` the next step would have run against someone else's server). With the
/// probes on too (the profile's HTTP probe, and a port probe): the taken port is someone else's
/// listener, never direct evidence that ends the confirmation window (issue 28).
#[test]
fn a_bind_error_right_after_the_ready_line_is_the_verdict() {
    let env = Env::new();
    let port = free_port();
    let _foreign = foreign_http_server(&env, port);
    let p = port.to_string();
    let app = fake_uvicorn();
    let probes: [&[&str]; 3] = [&["--no-probe"], &[], &["--port", &p]];
    for probe in probes {
        for linger in ["0", "3"] {
            let mut args = vec!["run", "--json", "--profile", "vllm"];
            args.extend(probe);
            args.extend(["--timeout", "30s", "--", "python3", &app]);
            args.extend(["--port", &p, "--linger", linger]);
            let r = firedup(&env, &args);
            let case = format!("{probe:?} linger {linger}");
            assert_eq!(
                (r.code, r.verdict(), r.json["signature"].as_str()),
                (1, "failed", Some("port_in_use")),
                "{case}: {}",
                r.explain()
            );
            let line = r.json["line"]["text"].as_str().unwrap_or_default();
            assert!(
                line.contains("[Errno 98] error while attempting to bind on address"),
                "{case}: {line}"
            );
            assert_eq!(r.json["server_running"], false, "{case}");
        }
    }
}

/// Issue 28: a server whose own process answers the probe has bound its port; its ready line is
/// `ready` at once, without the confirmation window. `listens_then_ready.py` answers /health,
/// prints `READY`, and 0.2 s later a bind error of a second listener: inside the old 500ms window
/// (before the change: `failed`), after the verdict now. `--hold` still catches it.
#[test]
fn the_runs_own_listener_ends_the_confirmation_window_and_hold_still_catches_a_later_error() {
    let env = Env::new();
    let app = fixture("truth/listens_then_ready.py");
    for (hold, code, verdict) in [(None, 0, "ready"), (Some("3s"), 1, "failed")] {
        let p = free_port().to_string();
        let url = format!("http://127.0.0.1:{p}/health");
        let mut args = vec!["run", "--json", "--ready-line", "READY", "--http", &url];
        if let Some(h) = hold {
            args.extend(["--hold", h]);
        }
        args.extend(["--timeout", "30s", "--", "python3", &app, "--port", &p]);
        let r = firedup(&env, &args);
        assert_eq!(
            (r.code, r.verdict()),
            (code, verdict),
            "{hold:?}: {}",
            r.explain()
        );
        let line = r.json["line"]["text"].as_str().unwrap_or_default();
        if hold.is_none() {
            assert_eq!(line, "READY", "{}", r.explain());
            let last = r.json["probes"][0]["last"].as_str().unwrap_or_default();
            assert!(last.contains("HTTP 200"), "{last}");
            let _ = env
                .cmd()
                .args(["stop", r.json["run_id"].as_str().unwrap()])
                .output();
        } else {
            assert_eq!(
                r.json["signature"].as_str(),
                Some("port_in_use"),
                "{}",
                r.explain()
            );
        }
    }
}

/// Issue 15: vLLM with its port taken and the default HTTP probe. The other server answers the
/// profile's /health with 404 while vLLM is still importing; the owner check cannot call it
/// foreign (it runs inside the watched tree, `tests/fixtures/truth/port_taken_in_tree.sh`). The
/// refusals before the ready line are not firedup's fault: vLLM's bind failure decides, `failed`
/// with `port_in_use` (before the fix: `monitor_error` after three 404s).
#[test]
fn a_refused_probe_before_the_ready_line_lets_the_bind_failure_decide() {
    let env = Env::new();
    let p = free_port().to_string();
    let script = fixture("truth/port_taken_in_tree.sh");
    let r = env
        .run()
        .json()
        .opt("profile", "vllm")
        .timeout("50s")
        .command(&["sh", &script, "--port", &p])
        .bounded(BOUND)
        .output();
    assert_eq!(
        (r.code, r.verdict(), r.json["signature"].as_str()),
        (1, "failed", Some("port_in_use")),
        "{}",
        r.explain()
    );
    let line = r.json["line"]["text"].as_str().unwrap_or_default();
    assert!(line.contains("[Errno 98] Address already in use"), "{line}");
    let last = r.json["probes"][0]["last"].as_str().unwrap_or_default();
    assert!(last.contains("404"), "the probe was refused: {last}");
}

/// When the port is free the same app serves: `ready`, and the time reported is the time of the
/// ready line, not the end of the confirmation window.
#[test]
fn a_uvicorn_app_that_binds_is_ready_at_the_time_of_its_ready_line() {
    let env = Env::new();
    let p = free_port().to_string();
    let r = env
        .run()
        .json()
        .opt("profile", "vllm")
        .timeout("30s")
        .opt("then", "true")
        .command(&["python3", &fake_uvicorn(), "--port", &p])
        .bounded(BOUND)
        .output();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    let ready_s = r.json["ready_s"].as_f64().expect("ready_s");
    assert_eq!(r.json["elapsed_s"].as_f64(), Some(ready_s), "{}", r.json);
    let http = r.json["probes"][0]["last"].as_str().unwrap_or_default();
    assert!(http.contains("HTTP 200"), "{http}");
}

// ------------------------------------------------------------------------------- case 10

/// The health URL answers 200, but the server has no /v1/models: firedup's own request probe
/// cannot work, so the verdict is `monitor_error`, and firedup, which cannot tell what the server
/// is doing, leaves it running and says how to re-attach or stop it (before the fix: stopped).
#[test]
fn a_monitor_error_leaves_the_server_running_with_the_commands_to_go_on() {
    let env = Env::new();
    for json in [true, false] {
        let port = free_port();
        let p = port.to_string();
        let url = format!("http://127.0.0.1:{port}/");
        let mut args = vec!["run"];
        if json {
            args.push("--json");
        }
        args.extend([
            "--http",
            &url,
            "--ready-request=openai",
            "--timeout",
            "30s",
            "--",
            "python3",
            "-m",
            "http.server",
            &p,
            "--bind",
            "127.0.0.1",
        ]);
        let r = firedup(&env, &args);
        assert_eq!(r.code, 7, "{}", r.explain());
        let run_id = if json {
            assert_eq!(r.verdict(), "monitor_error", "{}", r.explain());
            assert_eq!(r.json["server_running"], true, "{}", r.explain());
            let pid = r.json["pid"].as_u64().expect("pid");
            assert!(alive(pid), "the server was stopped");
            r.json["run_id"].as_str().unwrap().to_string()
        } else {
            let run_id = r
                .stdout
                .lines()
                .find_map(|l| l.trim().strip_prefix("run:"))
                .map(|id| id.trim().to_string())
                .expect("a run: line");
            for want in [
                "MONITOR_ERROR",
                "left running",
                &format!("firedup watch {run_id}"),
                &format!("firedup stop {run_id}"),
            ] {
                assert!(r.stdout.contains(want), "missing {want:?}: {}", r.explain());
            }
            run_id
        };
        // The server still serves, and the printed command stops it.
        assert!(TcpStream::connect(("127.0.0.1", port)).is_ok());
        let stop = env.fd("stop").arg(&run_id).bounded(BOUND).output();
        assert_eq!(stop.code, 0, "{}", stop.explain());
    }
}

// ------------------------------------------------------------------------ --then's address

/// The address of `--http URL` reaches `--then` as FIREDUP_HOST, FIREDUP_PORT and FIREDUP_URL
/// (before the fix: unset, as no profile knew the address).
#[test]
fn then_gets_the_address_of_the_http_url() {
    let env = Env::new();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/health");
    let r = env
        .run()
        .json()
        .opt("http", &url)
        .timeout("30s")
        .opt(
            "then",
            "printf '%s|%s|%s' \"$FIREDUP_HOST\" \"$FIREDUP_PORT\" \"$FIREDUP_URL\" > then-env.txt",
        )
        .command(&["python3", &fake_uvicorn(), "--port", &port.to_string()])
        .bounded(BOUND)
        .output();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert_eq!(
        common::file_text(&env.path("then-env.txt")),
        format!("127.0.0.1|{port}|http://127.0.0.1:{port}")
    );
}
