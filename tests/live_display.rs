//! The live display on a terminal (under a pseudo-terminal of 80 columns made by `script`, from
//! util-linux): each finished phase keeps its "done in" line while the HTTP probe's messages
//! arrive, and the ETA from the last run of the same launch is on the status line, not cut off
//! by the terminal's edge.

use crate::common;

use std::process::Command;

use common::Env;

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/demo-server.sh");

/// Whether `script` can make a pseudo-terminal here (says so when it cannot).
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

/// A port nothing listens on (bound, then let go): the probe is refused there.
fn refused_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port().to_string()
}

#[test]
fn phase_lines_stay_and_the_eta_shows_at_80_columns_while_the_probe_is_refused() {
    if !script_installed() {
        return;
    }
    let env = Env::new();
    let port = refused_port();
    // The demo server's ready line comes, its HTTP endpoint never answers: the run times out
    // in capture_cuda_graph, after init_distributed and load_weights are done.
    let args = [
        "run",
        "--profile",
        "sglang",
        "--port",
        &port,
        "--timeout",
        "4s",
        "--",
        DEMO,
    ];
    // A first run of the same launch gives the second its ETA.
    let first = env.firedup(&args);
    assert_eq!(first.code, 124, "{}", first.stderr);
    let quoted: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_firedup"))
        .chain(args)
        .map(|a| format!("'{a}'"))
        .collect();
    let typescript = env.path("typescript");
    let out = Command::new("script")
        .args(["-qfec"])
        .arg(format!("stty cols 80 rows 40; exec {}", quoted.join(" ")))
        .arg(&typescript)
        .env("FIREDUP_STATE_DIR", env.state.path())
        .env_remove("FIREDUP_PLAIN")
        .env_remove("COLUMNS")
        .current_dir(env.work.path())
        .output()
        .unwrap();
    let raw = String::from_utf8_lossy(&std::fs::read(&typescript).unwrap()).into_owned();
    assert_eq!(out.status.code(), Some(124), "{raw}");
    assert!(
        raw.contains("http: connection refused"),
        "no probe message came:\n{raw}"
    );
    for phase in ["init_distributed", "load_weights"] {
        let kept = raw
            .split(['\r', '\n'])
            .any(|l| l.contains(phase) && l.contains("done in"));
        assert!(kept, "no '{phase} ... done in' line:\n{raw}");
    }
    // indicatif cuts the status line at the terminal's width: what is in the output was shown.
    assert!(
        raw.contains("last time"),
        "no ETA on the 80-column status line:\n{raw}"
    );
}

/// What a terminal of `rows` x 80 shows once it has drawn `raw` (vt100 replays the cursor moves
/// and erasures indicatif makes), scrollback included.
fn screen_after(raw: &[u8], rows: u16) -> String {
    let size = |n: u16| std::num::NonZeroU16::new(n).expect("a terminal has a size");
    let mut term = vt100::Parser::new(size(rows), size(80), 0);
    term.process(raw);
    term.screen().contents()
}

#[test]
fn a_probe_message_after_a_phase_ends_does_not_erase_its_done_line() {
    if !script_installed() {
        return;
    }
    let env = Env::new();
    let port = refused_port();
    // sglang's phase lines; during capture_cuda_graph its HTTP endpoint comes up answering 503,
    // so the probe has something new to say after init_distributed and load_weights are done.
    let server = env.path("server.sh");
    std::fs::write(
        &server,
        format!(
            r#"#!/bin/sh
echo "[2025-03-01 10:00:00] Init torch distributed begin."
sleep 0.5
echo "[2025-03-01 10:00:01] Load weight begin. avail mem=78.50 GB"
sleep 0.5
echo "[2025-03-01 10:00:03] Capture cuda graph begin. This can take up to several minutes."
exec python3 -c '
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(503); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", {port}), H).serve_forever()'
"#
        ),
    )
    .unwrap();
    std::fs::set_permissions(&server, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let firedup = env!("CARGO_BIN_EXE_firedup");
    let server = server.display();
    let typescript = env.path("typescript");
    let out = Command::new("script")
        .args(["-qfec"])
        .arg(format!(
            "stty cols 80 rows 40; exec '{firedup}' run --profile sglang --port {port} --timeout 6s -- '{server}'"
        ))
        .arg(&typescript)
        .env("FIREDUP_STATE_DIR", env.state.path())
        .env("TERM", "xterm-256color")
        .env_remove("FIREDUP_PLAIN")
        .env_remove("COLUMNS")
        .current_dir(env.work.path())
        .output()
        .unwrap();
    let raw = std::fs::read(&typescript).unwrap();
    let shown = screen_after(&raw, 40);
    assert_eq!(out.status.code(), Some(124), "{shown}");
    assert!(
        shown.contains("HTTP 503"),
        "the probe said nothing new:\n{shown}"
    );
    for phase in ["init_distributed", "load_weights"] {
        let kept = shown
            .lines()
            .any(|l| l.contains(phase) && l.contains("done in"));
        assert!(
            kept,
            "the '{phase} ... done in' line is not on the screen:\n{shown}"
        );
    }
}
