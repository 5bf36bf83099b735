//! Smaller things found while fixing issue 11, each through the real binary: a closed pipe, foot-gun
//! flags, the README's examples, the matrix's dry run and cell numbers, the `--fail-line` reason,
//! heartbeats with hex request ids, and what a failed SSH connection prints.

use crate::common;
use common::Env;

use std::process::{Command, Stdio};
use std::time::Duration;

/// How long any one command may take before the test calls it a hang.
const BOUND: Duration = Duration::from_secs(60);

fn bounded(env: &Env, args: &[&str]) -> common::bounded::Out {
    let mut c = env.cmd();
    c.args(args);
    common::bounded::run_bounded(c, BOUND)
}

fn json(out: &common::bounded::Out) -> serde_json::Value {
    serde_json::from_str(out.stdout.trim()).unwrap_or(serde_json::Value::Null)
}

#[test]
fn a_closed_pipe_ends_every_command_quietly() {
    let env = Env::new();
    // Something for history, ps and show to print.
    let r = bounded(&env, &["run", "--json", "--until", "exit", "--", "true"]);
    let run_id = json(&r)["run_id"].as_str().unwrap().to_string();
    let commands: &[&[&str]] = &[
        &["history"],
        &["history", "--json"],
        &["ps"],
        &["ps", "--json"],
        &["show", &run_id],
        &["profiles"],
        &["profiles", "show", "vllm"],
    ];
    for args in commands {
        // The reader is gone before firedup writes anything: every write fails with EPIPE, as
        // for `firedup history | head -1` once head has its line.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let child = env
            .cmd()
            .args(*args)
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = common::bounded::wait_output(child, BOUND);
        assert_eq!(
            (out.code, out.stderr.as_str()),
            (141, ""),
            "firedup {}: should end quietly with 128+SIGPIPE",
            args.join(" ")
        );
    }
}

#[test]
fn foot_gun_flags_are_refused_with_one_sentence() {
    let env = Env::new();
    let cases: &[(&[&str], &str)] = &[
        (&["--stall", "0ms", "--ready-line", "READY"], "--stall 0ms"),
        (
            &["--timeout", "0s", "--ready-line", "READY"],
            "--timeout 0s",
        ),
        (&["--ready-line", ""], "--ready-line \"\""),
        (
            &["--ready-line", "READY", "--fail-line", ""],
            "--fail-line \"\"",
        ),
    ];
    let launched = env.path("launched");
    let body = format!("touch {}; echo READY; exec sleep 60", launched.display());
    for (flags, named) in cases {
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "sh", "-c", &body]);
        let out = bounded(&env, &args);
        let said = out.stderr.trim();
        assert_eq!(out.code, 2, "{flags:?}: {said}");
        assert!(
            said.contains(named) && said.lines().count() == 1,
            "{flags:?}: one sentence naming {named}: {said}"
        );
    }
    assert!(!launched.exists(), "a refused run launched its command");
    // `off` (and `0`) still disable the stall window.
    for off in ["off", "0"] {
        let out = bounded(
            &env,
            &[
                "run", "--json", "--until", "exit", "--stall", off, "--", "true",
            ],
        );
        assert_eq!(out.code, 0, "--stall {off}: {}", out.stderr);
    }
}

/// The README's example commands, as written: the lines of its ```sh blocks and the `$ ` lines
/// of its ```console blocks that start with `firedup` (after `NAME=value` settings), up to a `|`
/// or a comment.
fn readme_commands() -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let mut out = Vec::new();
    let mut block = "";
    let mut pending = String::new();
    for line in readme.lines() {
        if let Some(kind) = line.strip_prefix("```") {
            block = if block.is_empty() { kind } else { "" };
            continue;
        }
        let line = match block {
            "sh" => line,
            "console" => match line.strip_prefix("$ ") {
                Some(l) => l,
                None => continue,
            },
            _ => continue,
        };
        let line = line
            .split_whitespace()
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .collect::<Vec<_>>()
            .join(" ");
        let line = line.split(" #").next().unwrap().trim_end();
        if let Some(cont) = line.strip_suffix('\\') {
            pending.push_str(cont);
            continue;
        }
        let full = format!("{pending}{line}");
        pending.clear();
        for part in full.split(';') {
            let part = part.split(" | ").next().unwrap().trim();
            if part.starts_with("firedup ") {
                out.push(part.to_string());
            }
        }
    }
    out
}

#[test]
fn the_readme_watch_example_is_not_a_usage_error() {
    let env = Env::new();
    let example = readme_commands()
        .into_iter()
        .find(|c| {
            c.starts_with("firedup watch --log /var/log/server.log ") && c.contains("--pid 12345")
        })
        .expect("the README's watch --log --pid example");
    let log = env.path("server.log");
    std::fs::write(&log, "INFO:     Started server process\n").unwrap();
    let mut server = Command::new("sleep").arg("2").spawn().unwrap();
    let pid = server.id().to_string();
    let args: Vec<String> = shlex::split(&example).unwrap()[1..]
        .iter()
        .map(|a| match a.as_str() {
            "/var/log/server.log" => log.display().to_string(),
            "12345" => pid.clone(),
            _ => a.clone(),
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = bounded(&env, &args);
    let _ = server.wait();
    assert_ne!(out.code, 2, "{example}: {}", out.stderr);
    assert!(
        json(&out)["verdict"].is_string(),
        "{example}: {}",
        out.stdout
    );
}

#[test]
fn the_readme_run_ids_are_ids_the_binary_makes() {
    let env = Env::new();
    let commands = readme_commands();
    // The run id each README launch gets: its program replaced by one that does not exist, so
    // that it ends at once (never_started) with the id it would have had.
    let mut stems = Vec::new();
    for c in commands.iter().filter(|c| c.starts_with("firedup run ")) {
        let Some((_, launched)) = c.split_once(" -- ") else {
            continue;
        };
        let mut argv = shlex::split(launched).unwrap();
        let name = std::path::Path::new(&argv[0])
            .file_name()
            .unwrap()
            .to_owned();
        argv[0] = format!("/nonexistent/{}", name.to_string_lossy());
        let mut args = vec!["run", "--json", "--until", "exit", "--"];
        args.extend(argv.iter().map(String::as_str));
        let out = bounded(&env, &args);
        let id = json(&out)["run_id"].as_str().unwrap_or("").to_string();
        let (stem, _) = id.rsplit_once('-').expect(&out.stdout);
        stems.push(stem.to_string());
    }
    let id = regex::Regex::new(
        r"firedup (?:stop|watch|logs|show)(?: --host \S+)? ([a-z0-9_][a-z0-9_-]*)-[0-9a-f]{6}\b",
    )
    .unwrap();
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let mut found = 0;
    for c in id.captures_iter(&readme) {
        found += 1;
        assert!(
            stems.iter().any(|s| s == &c[1]),
            "the README shows run id {:?}, but its launches get ids starting {stems:?}",
            &c[0]
        );
    }
    assert!(found >= 3, "the README's run ids were not found");
}

#[test]
fn a_fail_line_reason_reads_as_a_sentence() {
    let env = Env::new();
    let out = bounded(
        &env,
        &[
            "run",
            "--json",
            "--ready-line",
            "READY",
            "--fail-line",
            "BOOM",
            "--",
            "sh",
            "-c",
            "echo loading; echo BOOM; exit 1",
        ],
    );
    let reason = json(&out)["reason"].as_str().unwrap_or("").to_string();
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        reason.starts_with("failed with a line matching --fail-line (line 2)"),
        "{reason}"
    );
}

#[test]
fn a_heartbeat_with_hex_request_ids_is_not_progress() {
    let env = Env::new();
    // A hung server that repeats one message with a new request id each time (every id has a
    // digit in it; only its letters would make the lines differ once digits are removed).
    let script = "i=0; while :; do i=$((i+1)); printf 'req 3%07x waiting\\n' $(( (i * 2654435761) % 268435456 )); sleep 0.2; done";
    let out = bounded(
        &env,
        &[
            "run",
            "--json",
            "--ready-line",
            "READY",
            "--stall",
            "2s",
            "--timeout",
            "30s",
            "--",
            "sh",
            "-c",
            script,
        ],
    );
    assert_eq!(
        (out.code, json(&out)["verdict"].as_str()),
        (6, Some("stalled")),
        "{}",
        out.stdout
    );
}

#[test]
fn the_dry_run_knows_a_cell_that_failed_and_json_counts_cells_from_one() {
    let env = Env::new();
    let file = env.path("m.toml");
    std::fs::write(
        &file,
        r#"
[base]
command = ["sh", "-c", "if [ \"$MODE\" = bad ]; then echo 'RuntimeError: CUDA error: an illegal memory access was encountered'; exit 1; fi; echo serving; sleep 300"]
ready_lines = ["serving"]
timeout = "60s"
grace = "2s"

[[axis]]
env = "MODE"
values = ["good", "bad"]
"#,
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let ran = bounded(&env, &["matrix", f, "--format", "json"]);
    let j = json(&ran);
    assert_eq!(j["cells"][0]["cell"], 1, "{}", ran.stdout);
    assert_eq!(j["cells"][1]["cell"], 2, "{}", ran.stdout);
    let failed = j["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["verdict"] == "failed")
        .expect("a failed group");
    // The table's row 2 is the failed cell: JSON says 2 as well.
    assert_eq!(failed["cells"], serde_json::json!([2]), "{}", ran.stdout);
    let dry = bounded(&env, &["matrix", f, "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        !dry.stdout.contains("never run before"),
        "both cells ran before:\n{}",
        dry.stdout
    );
    assert!(dry.stdout.contains("last     failed"), "{}", dry.stdout);
}

#[test]
fn a_host_that_cannot_be_reached_prints_no_empty_fields() {
    let env = Env::new();
    let host = "nonexistent.invalid";
    let ssh = [
        "--host",
        host,
        "--connect-timeout",
        "5s",
        "--ready-line",
        "R",
    ];
    // `run`: nothing was launched, so there is no log to look at.
    let mut args = vec!["run"];
    args.extend_from_slice(&ssh);
    args.extend_from_slice(&["--", "sleep", "1"]);
    let out = bounded(&env, &args);
    assert_eq!(out.code, 7, "{}{}", out.stdout, out.stderr);
    for line in out.stdout.lines() {
        let line = line.trim_end();
        assert!(
            !line.ends_with(':') && !line.ends_with("+G"),
            "an empty field: {line:?} in\n{}",
            out.stdout
        );
    }
    // `watch --log`: the log is on the host, so the hint says so.
    let mut args = vec!["watch", "--log", "/tmp/x.log"];
    args.extend_from_slice(&ssh);
    let out = bounded(&env, &args);
    assert_eq!(out.code, 7, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains(&format!("next:    ssh {host} less +G /tmp/x.log")),
        "{}",
        out.stdout
    );
}

#[test]
fn after_run_on_a_host_the_next_commands_name_the_host() {
    let sshd = common::sshd::Sshd::start();
    let env = Env::new();
    let server = env.script("server.sh", "echo 'server READY'; exec sleep 60");
    let remote_state = env.path("remote-state");
    let config = sshd.config_path();
    let vars = [
        ("FIREDUP_SSH_CONFIG", config.to_str().unwrap()),
        ("FIREDUP_REMOTE_STATE_DIR", remote_state.to_str().unwrap()),
    ];
    let run = |args: &[&str]| {
        let mut c = env.cmd();
        c.args(args);
        for (k, v) in vars {
            c.env(k, v);
        }
        common::bounded::run_bounded(c, BOUND)
    };
    let out = run(&[
        "run",
        "--host",
        "fdtest",
        "--ready-line",
        "READY",
        "--",
        &server,
    ]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let next = out
        .stdout
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("next:"))
        .unwrap_or_default()
        .trim()
        .to_string();
    let id = out
        .stdout
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("run:"))
        .unwrap_or_default()
        .trim()
        .to_string();
    assert!(
        next.starts_with(&format!("firedup stop --host fdtest {id}")),
        "{}",
        out.stdout
    );
    // The hint works as printed.
    let argv = shlex::split(next.split("    (").next().unwrap()).unwrap();
    let argv: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    let stop = run(&argv);
    assert_eq!(stop.code, 0, "{next}: {}{}", stop.stdout, stop.stderr);
}
