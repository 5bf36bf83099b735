//! Issue 29's small frictions, each through the real binary: what firedup says before a launch
//! (the most basic mistake first, every mistake named where it is) and after it (hints that can
//! be followed).

use crate::common;
use common::Env;

/// A command that does not exist is said before the missing readiness condition: that one is
/// the next round trip, not the first.
#[test]
fn a_missing_command_is_said_before_the_missing_readiness_condition() {
    let env = Env::new();
    for (program, says) in [
        ("/no/such/binary", "/no/such/binary does not exist"),
        ("no-such-command-29", "no-such-command-29 is not on PATH"),
    ] {
        let r = env.run().command(&[program]).output();
        assert_eq!(r.code, 2, "{}", r.explain());
        let first = r
            .stderr
            .find(says)
            .unwrap_or_else(|| panic!("{}", r.explain()));
        let readiness = r.stderr.find("no readiness condition");
        assert!(readiness.is_none_or(|at| first < at), "{}", r.explain());
    }
    // A command that exists keeps the readiness complaint alone.
    let r = env.run().command(&["true"]).output();
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.starts_with("firedup: no readiness condition"),
        "{}",
        r.explain()
    );
}

/// `--log` in a directory that does not exist is a usage mistake named before the launch: no
/// directory is created, nothing is launched.
#[test]
fn a_log_in_a_missing_directory_is_refused_and_nothing_is_created() {
    let env = Env::new();
    let dir = env.path("no/such/dir");
    let log = dir.join("x.log");
    let marker = env.path("launched");
    let r = env
        .run()
        .until("exit")
        .opt("log", log.to_str().unwrap())
        .command(&["touch", marker.to_str().unwrap()])
        .output();
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr
            .contains(&format!("the directory {} does not exist", dir.display())),
        "{}",
        r.explain()
    );
    assert!(!env.path("no").exists(), "a directory was created");
    assert!(!marker.exists(), "the command ran");
    // A log in a directory that exists is written as before.
    let log = env.path("x.log");
    let r = env
        .run()
        .json()
        .until("exit")
        .opt("log", log.to_str().unwrap())
        .command(&["echo", "hello"])
        .output();
    assert_eq!(r.verdict(), "succeeded", "{}", r.explain());
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "hello\n");
}

/// `history --verdict` with a name no run can have is refused, listing the names it takes.
#[test]
fn history_refuses_an_unknown_verdict_name() {
    let env = Env::new();
    let r = env.fd("history").opt("verdict", "readyy").output();
    assert_eq!(r.code, 2, "{}", r.explain());
    for name in [
        "ready",
        "succeeded",
        "failed",
        "exited",
        "killed",
        "never_started",
        "stalled",
        "timed_out",
        "monitor_error",
        "interrupted",
        "owner_gone",
    ] {
        assert!(r.stderr.contains(name), "{name}: {}", r.explain());
    }
    for name in ["ready", "owner_gone"] {
        let r = env.fd("history").opt("verdict", name).output();
        assert_eq!(r.code, 0, "{}", r.explain());
    }
}

/// A duration with an unknown unit names every unit the parser takes: `d` included, as `7d` is
/// accepted.
#[test]
fn a_duration_error_names_every_accepted_unit() {
    let env = Env::new();
    let r = env
        .run()
        .timeout("7x")
        .until("exit")
        .command(&["true"])
        .output();
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.contains("use ms, s, m, min, h or d"),
        "{}",
        r.explain()
    );
    let r = env
        .run()
        .json()
        .timeout("7d")
        .until("exit")
        .command(&["true"])
        .output();
    assert_eq!(r.verdict(), "succeeded", "{}", r.explain());
}

/// `ready = [".*"]` in a profile file is refused as `--ready-line '.*'` is, by `profiles check`
/// and when the file is loaded for a run; `profiles check` names every mistake, each at its line.
#[test]
fn a_profile_ready_pattern_gets_the_ready_line_rule_and_every_mistake_is_named() {
    let env = Env::new();
    let file = env.path("mine.toml");
    std::fs::write(
        &file,
        "name = \"mine\"\ndescription = \"d\"\nready = ['.*']\nstall = \"5x\"\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let r = env.fd("profiles").arg("check").arg(file).output();
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.contains(&format!(
            "{file}:3: field ready[0]: '.*' matches every line"
        )),
        "{}",
        r.explain()
    );
    assert!(
        r.stderr.contains(&format!("\n{file}:4: field stall: ")),
        "{}",
        r.explain()
    );
    let flag = env.run().ready_line(".*").command(&["true"]).output();
    assert_eq!(flag.code, 2, "{}", flag.explain());
    let r = env
        .run()
        .json()
        .opt("profile-file", file)
        .opt("profile", "mine")
        .command(&["sleep", "30"])
        .output();
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(r.stderr.contains("matches every line"), "{}", r.explain());
}

/// The `next:` line never sends a person to `less +G` a log that was never created: it says that
/// no log was written, and where it was expected.
#[test]
fn next_says_no_log_was_written_instead_of_less_on_a_missing_log() {
    let env = Env::new();
    let log = env.path("never/created.log");
    let r = env
        .fd("watch")
        .opt("log", log.to_str().unwrap())
        .opt("log-grace", "1s")
        .ready_line("READY")
        .output();
    assert_eq!(r.code, 5, "{}", r.explain());
    // The reason says how long the log was waited for: the attach's wait (it said "within 0ms").
    assert!(
        r.stdout
            .contains("was never created (its directory does not exist either) within 1.0s"),
        "{}",
        r.explain()
    );
    // The verdict goes to stdout when it is not a terminal.
    let next = r
        .stdout
        .lines()
        .chain(r.stderr.lines())
        .find(|l| l.trim_start().starts_with("next:"))
        .unwrap_or_else(|| panic!("{}", r.explain()));
    assert!(!next.contains("less"), "{}", r.explain());
    assert!(
        next.contains(&format!(
            "no log to read: nothing readable was written at {}",
            log.display()
        )),
        "{}",
        r.explain()
    );
}

/// A real redis-server started through wrappers (`env A=B nice`) is still recognised as Redis:
/// its profile's port probe decides `ready`. Before, the anchored detection saw `env` and chose
/// `generic`, which has no readiness condition (exit 2, nothing launched).
#[test]
fn redis_under_env_and_nice_is_recognised() {
    let env = Env::new();
    let port = common::free_port().to_string();
    let dir = env.path("redis-dir");
    std::fs::create_dir(&dir).unwrap();
    let r = env
        .run()
        .json()
        .timeout("60s")
        .command(&[
            "env",
            "FRICTIONS_29=1",
            "nice",
            "-n",
            "1",
            "redis-server",
            "--port",
            &port,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            dir.to_str().unwrap(),
        ])
        .output();
    let stop = env.fd("stop").arg(r.run_id()).output();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert_eq!(stop.code, 0, "{}", stop.explain());
    assert_eq!(
        r.json["port"].as_u64(),
        port.parse().ok(),
        "{}",
        r.explain()
    );
    // Redis's URL is redis://, not http:// (issue 29).
    assert_eq!(
        r.json["url"],
        format!("redis://127.0.0.1:{port}").as_str(),
        "{}",
        r.explain()
    );
    assert!(
        r.json["line"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Ready to accept connections")),
        "{}",
        r.explain()
    );
}

/// `--notify` STATUS= messages are said in the plain progress lines (not a terminal) as they
/// change; before, only the next 15 s heartbeat carried the latest one, so a run shorter than
/// that showed one status at most.
#[test]
fn notify_status_messages_appear_in_the_plain_progress_lines() {
    let env = Env::new();
    let server = env.path("notifier.py");
    std::fs::write(
        &server,
        r#"import os, socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
addr = os.environ["NOTIFY_SOCKET"]
s.sendto(b"STATUS=loading weights 1/2", addr)
time.sleep(1)
s.sendto(b"STATUS=loading weights 2/2", addr)
time.sleep(1)
s.sendto(b"READY=1\nSTATUS=serving", addr)
time.sleep(30)
"#,
    )
    .unwrap();
    let r = env
        .run()
        .json()
        .flag("notify")
        .timeout("60s")
        .opt("then", "true")
        .command(&["python3", server.to_str().unwrap()])
        .output();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    for status in ["loading weights 1/2", "loading weights 2/2"] {
        assert!(
            r.stderr
                .lines()
                .any(|l| l.starts_with("firedup [") && l.ends_with(&format!(": status: {status}"))),
            "no line for {status}: {}",
            r.explain()
        );
    }
}

/// The verdict word is coloured on a colour terminal (under script(1)'s pseudo-terminal), and
/// never with NO_COLOR set or on a pipe.
#[test]
fn the_verdict_word_is_coloured_on_a_terminal_only() {
    let env = Env::new();
    let args = ["run", "--until", "exit", "--", "true"];
    let piped = env.firedup(&args);
    assert_eq!(piped.code, 0, "{}", piped.explain());
    assert!(
        piped.stdout.contains("firedup: SUCCEEDED"),
        "{}",
        piped.explain()
    );
    assert!(!piped.stdout.contains('\x1b'), "{}", piped.explain());
    let installed = std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        eprintln!("script (util-linux) is not installed: no pseudo-terminal to test under");
        return;
    }
    for (no_color, coloured) in [(None, true), (Some("1"), false)] {
        let typescript = env.path("typescript");
        let mut c = std::process::Command::new("script");
        c.args(["-qfec"])
            .arg(format!(
                "exec '{}' {}",
                env!("CARGO_BIN_EXE_firedup"),
                args.join(" ")
            ))
            .arg(&typescript)
            .env("FIREDUP_STATE_DIR", env.state.path())
            .env("TERM", "xterm")
            .env_remove("NO_COLOR")
            .current_dir(env.work.path());
        if let Some(v) = no_color {
            c.env("NO_COLOR", v);
        }
        let out = c.output().unwrap();
        let raw = String::from_utf8_lossy(&std::fs::read(&typescript).unwrap()).into_owned();
        assert_eq!(out.status.code(), Some(0), "{raw}");
        assert_eq!(
            raw.contains("firedup: \x1b[1;32mSUCCEEDED\x1b[0m after"),
            coloured,
            "NO_COLOR={no_color:?}: {raw:?}"
        );
        assert!(raw.contains("SUCCEEDED"), "{raw:?}");
    }
}
