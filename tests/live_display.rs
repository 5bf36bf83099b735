//! The live display on a terminal (under a pseudo-terminal of 80 columns made by `script`, from
//! util-linux): each finished phase keeps its "done in" line while the HTTP probe's messages
//! arrive, and the ETA from the last run of the same launch is on the status line, not cut off
//! by the terminal's edge.

mod common;

use std::process::Command;

use common::Env;

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/demo-server.sh");

fn script_installed() -> bool {
    Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A port nothing listens on (bound, then let go): the probe is refused there.
fn refused_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port().to_string()
}

#[test]
fn phase_lines_stay_and_the_eta_shows_at_80_columns_while_the_probe_is_refused() {
    if !script_installed() {
        eprintln!("script (util-linux) is not installed: no pseudo-terminal to test under");
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
