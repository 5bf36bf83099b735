//! The run history through the real binary: every `run` is recorded, `history` filters, `show` and
//! `compare` read it back, the progress display gives the ETA from the last run of the same
//! launch, several firedup processes write at once, and a broken database never changes a
//! verdict.

use crate::common;

use std::time::Duration;

use common::Env;

const SERVER: &str = "echo 'Load weight begin'; sleep 0.3; echo 'Capture cuda graph begin'; sleep 0.6; echo 'The server is fired up and ready to roll!'; sleep 300";

fn run_server(env: &Env, extra_env: &[&str]) -> common::Run {
    let mut args = vec![
        "run",
        "--json",
        "--profile",
        "sglang",
        "--no-probe",
        "--stall",
        "30s",
    ];
    for e in extra_env {
        args.push("--env");
        args.push(e);
    }
    args.extend(["--", "sh", "-c", SERVER]);
    let r = env.firedup(&args);
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    let s = env.fd("stop").opt("grace", "2s").arg(r.run_id()).output();
    assert_eq!(s.code, 0, "{}", s.explain());
    r
}

#[test]
fn runs_are_recorded_listed_shown_and_compared() {
    let env = Env::new();
    let a = run_server(&env, &["FLASHMLA=0", "HF_TOKEN=hf_very_secret"]);
    let b = run_server(&env, &["FLASHMLA=1", "HF_TOKEN=hf_very_secret"]);
    let failed = env
        .run()
        .json()
        .until("exit")
        .shell(
            "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'; exit 1",
        )
        .output();
    assert_eq!(failed.signature(), Some("cuda_oom"), "{}", failed.explain());

    let all = env.fd("history").json().output();
    let rows: Vec<serde_json::Value> = all
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3, "{}", all.explain());
    assert_eq!(rows[0]["run_id"], failed.run_id());
    assert!(
        !all.stdout.contains("hf_very_secret"),
        "a secret reached the history"
    );

    let table: Vec<(Vec<&str>, usize)> = vec![
        (vec!["--verdict", "ready"], 2),
        (vec!["--signature", "cuda_oom"], 1),
        (vec!["--profile", "sglang"], 2),
        (vec!["--since", "1h"], 3),
        (vec!["--since", "2000-01-01"], 3),
        (vec!["--host", "gpu-box"], 0),
        (vec!["--limit", "1"], 1),
    ];
    for (filter, n) in table {
        let mut args = vec!["history", "--json"];
        args.extend(&filter);
        let r = env.firedup(&args);
        assert_eq!(r.code, 0, "{filter:?}: {}", r.explain());
        assert_eq!(r.stdout.lines().count(), n, "{filter:?}: {}", r.explain());
    }

    let show = env.fd("show").arg(a.run_id()).output();
    assert_eq!(show.code, 0, "{}", show.explain());
    for want in [
        "ready",
        "env       FLASHMLA=0",
        "env       HF_TOKEN=<redacted>",
        "phase     load_weights",
        "phase     capture_cuda_graph",
    ] {
        assert!(
            show.stdout.contains(want),
            "missing {want:?}: {}",
            show.explain()
        );
    }
    let cmp = env.fd("compare").arg(a.run_id()).arg(b.run_id()).output();
    assert_eq!(cmp.code, 0, "{}", cmp.explain());
    assert!(cmp.stdout.contains("env FLASHMLA *"), "{}", cmp.explain());
    assert!(
        cmp.stdout.contains("phase capture_cuda_graph"),
        "{}",
        cmp.explain()
    );
    assert!(!cmp.stdout.contains("env HF_TOKEN *"), "{}", cmp.explain());

    let missing = env.fd("show").arg("no-such-run").output();
    assert_eq!(missing.code, 2);
    assert!(
        missing
            .stderr
            .contains("no run \"no-such-run\" in the history"),
        "{}",
        missing.explain()
    );
}

#[test]
fn the_second_run_of_a_launch_shows_how_long_its_phases_took_last_time() {
    let env = Env::new();
    let first = run_server(&env, &[]);
    assert!(!first.stderr.contains("last time"), "{}", first.explain());
    let second = run_server(&env, &[]);
    assert!(
        second.stderr.contains("phase capture_cuda_graph (took"),
        "{}",
        second.explain()
    );
    assert!(second.stderr.contains("last time)"), "{}", second.explain());
}

#[test]
fn concurrent_firedup_processes_all_land_in_the_history() {
    let env = Env::new();
    let n = 8;
    let children: Vec<std::process::Child> = (0..n)
        .map(|i| {
            env.cmd()
                .args(["run", "--json", "--until", "exit", "--", "sh", "-c"])
                .arg(format!("echo job {i}"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = common::bounded::wait_output(c, Duration::from_secs(60));
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(!out.stderr.contains("history"), "{}", out.stderr);
    }
    // Every run went straight into the database: none had to be kept aside.
    assert!(!env.state.path().join("history-pending.ndjson").exists());
    let h = env.fd("history").json().opt("limit", "0").output();
    assert_eq!(h.stdout.lines().count(), n, "{}", h.explain());
}

#[test]
fn a_broken_history_never_changes_the_verdict_and_loses_no_run() {
    let env = Env::new();
    let db = env.state.path().join("history.sqlite");
    let junk = vec![0x5au8; 4096];
    std::fs::write(&db, &junk).unwrap();
    let r = env.run().json().until("exit").command(&["true"]).output();
    assert_eq!(r.code, 0, "{}", r.explain());
    assert_eq!(r.verdict(), "succeeded");
    assert!(
        r.stderr.contains("history-pending.ndjson"),
        "{}",
        r.explain()
    );
    let h = env.fd("history").output();
    assert_eq!(h.code, 2);
    assert!(h.stderr.contains("left untouched"), "{}", h.explain());
    assert_eq!(
        std::fs::read(&db).unwrap(),
        junk,
        "the broken file was rewritten"
    );

    // Once the broken file is moved aside, the run kept meanwhile is in the history.
    std::fs::rename(&db, env.state.path().join("history.broken")).unwrap();
    let h = env.fd("history").json().output();
    assert_eq!(h.code, 0, "{}", h.explain());
    let rows: Vec<serde_json::Value> = h
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{}", h.explain());
    assert_eq!(rows[0]["run_id"], r.run_id());
    assert!(!env.state.path().join("history-pending.ndjson").exists());

    // FIREDUP_HISTORY points elsewhere; off records nothing.
    let other = env.path("elsewhere.sqlite");
    let r = env.cmd_json(
        &["run", "--json", "--until", "exit", "--", "true"],
        &[("FIREDUP_HISTORY", other.to_str().unwrap())],
    );
    assert_eq!(r.code, 0, "{}", r.explain());
    assert!(other.is_file());
    let off = env.cmd_json(&["history"], &[("FIREDUP_HISTORY", "off")]);
    assert_eq!(off.code, 2);
    assert!(off.stderr.contains("history is off"), "{}", off.explain());
}

#[test]
fn watching_a_run_again_is_the_same_launch_in_the_history() {
    let env = Env::new();
    let r = env
        .run()
        .json()
        .flag("keep")
        .opt("env", "API_TOKEN=abc123")
        .ready_line("up")
        .shell("echo up; sleep 300")
        .output();
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    let w = env.fd("watch").json().arg(r.run_id()).output();
    assert_eq!(w.verdict(), "ready", "{}", w.explain());
    env.fd("stop").opt("grace", "1s").arg(r.run_id()).output();
    let h = env.fd("history").json().output();
    let rows: Vec<serde_json::Value> = h
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // One run, one row: the watch updated the launch's row (issue 11, case 14).
    assert_eq!(rows.len(), 1, "{}", h.explain());
    assert_eq!(rows[0]["kind"], "run");
    assert_eq!(rows[0]["run_id"], r.run_id());
    assert_eq!(rows[0]["from_launch"], true, "{}", h.explain());
}

/// The database a run opened for its ETA is kept for its record only while it is still the file
/// at the history's path (`history/recording.rs`): one moved aside while the run waits keeps
/// what it had, and the run is recorded in the new database there. Before the check, the kept
/// connection wrote the record into the file moved aside.
#[test]
fn a_database_moved_aside_during_a_run_does_not_get_that_runs_record() {
    use std::io::BufRead;
    let env = Env::new();
    let db = env.state.path().join("history.sqlite");
    let aside = env.state.path().join("history-old.sqlite");
    let first = run_server(&env, &[]);
    let go = env.path("go");
    let mut child = env
        .run()
        .json()
        .ready_line("server ready")
        .shell(&format!(
            "echo loading; while [ ! -e {} ]; do sleep 0.05; done; echo server ready; exec sleep 300",
            go.display()
        ))
        .spawn();
    // Its first progress line comes after the ETA was read: the database is open and kept.
    let mut said = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert!(!said.is_empty(), "firedup said nothing");
    std::fs::rename(&db, &aside).unwrap();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::rename(
            format!("{}{suffix}", db.display()),
            format!("{}{suffix}", aside.display()),
        );
    }
    std::fs::write(&go, "").unwrap();
    let r: common::Run = common::bounded::wait_output(child, Duration::from_secs(60)).into();
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    let stop = env.fd("stop").opt("grace", "2s").arg(r.run_id()).output();
    assert_eq!(stop.code, 0, "{}", stop.explain());
    let ids = |history: Option<&std::path::Path>| -> Vec<String> {
        let mut h = env.fd("history").json();
        if let Some(p) = history {
            h = h.var("FIREDUP_HISTORY", p.display());
        }
        let out = h.output();
        out.stdout
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["run_id"].to_string())
            .map(|id| id.trim_matches('"').to_string())
            .collect()
    };
    assert_eq!(ids(None), vec![r.run_id().to_string()], "the new database");
    assert_eq!(
        ids(Some(&aside)),
        vec![first.run_id().to_string()],
        "the database moved aside"
    );
}

/// Holds SQLite's write lock on the database argv[1] (`BEGIN IMMEDIATE`), says so by creating
/// argv[2], and lets go once argv[3] exists.
const HOLD_THE_WRITE_LOCK: &str = "import os, sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute('BEGIN IMMEDIATE')
open(sys.argv[2], 'w').close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.01)
c.execute('COMMIT')";

/// The processes whose command line holds `text` and whose environment names `state` (this
/// test's firedup only: tests run side by side).
fn processes_of(state: &std::path::Path, text: &str) -> Vec<String> {
    let state = format!("FIREDUP_STATE_DIR={}", state.display());
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let dir = e.path();
        let (Ok(cmdline), Ok(environ)) = (
            std::fs::read(dir.join("cmdline")),
            std::fs::read(dir.join("environ")),
        ) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let ours = environ.split(|b| *b == 0).any(|v| v == state.as_bytes());
        if ours && cmdline.contains(text) {
            found.push(format!("{}: {}", dir.display(), cmdline.trim_end()));
        }
    }
    found
}

/// Issue 28: the caller of `run` is told the verdict before the run's history row is written
/// (`src/front.rs`). Here the row cannot be written (another process holds the database's write
/// lock): `run` has returned with its verdict all the same, the process left to record it no
/// longer names the command, and a `history` started meanwhile waits for the row and shows it.
#[test]
fn a_verdict_told_before_its_record_is_written_is_in_the_history_for_every_reader() {
    use std::process::{Command, Stdio};
    let env = Env::new();
    let first = env.run().json().until("exit").shell("true").output();
    assert_eq!(first.verdict(), "succeeded", "{}", first.explain());
    let (held, release) = (env.path("held"), env.path("release"));
    let db = env.state.path().join("history.sqlite");
    let mut locker = Command::new("python3")
        .args(["-c", HOLD_THE_WRITE_LOCK])
        .args([&db, &held, &release])
        .spawn()
        .expect("python3 runs");
    common::bounded::wait_for("the write lock held", Duration::from_secs(60), || {
        held.exists().then_some(())
    });
    let marker = "told-before-it-is-recorded-4821";
    // Stderr stays with the process that records (what it may have to say about the history).
    let run = env
        .cmd()
        .args(["run", "--json", "--until", "exit", "--", "sh", "-c"])
        .arg(format!("echo {marker}"))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let verdict: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(
        (run.status.code(), verdict["verdict"].as_str()),
        (Some(0), Some("succeeded"))
    );
    let run_id = verdict["run_id"].as_str().unwrap().to_string();
    assert_eq!(
        processes_of(env.state.path(), marker),
        Vec::<String>::new(),
        "no process names the command once run has returned"
    );
    let recording = processes_of(env.state.path(), "firedup (verdict given, recording)");
    assert_eq!(recording.len(), 1, "the record waits for the database");
    let reader = env.fd("history").json().spawn();
    // The reader waits for the record in flight (were it not waiting, it would have read the
    // database without the row by now, and the last assertion would fail).
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&release, "").unwrap();
    assert!(locker.wait().unwrap().success());
    let out: common::Run = common::bounded::wait_output(reader, Duration::from_secs(60)).into();
    let ids: Vec<String> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["run_id"].to_string())
        .map(|id| id.trim_matches('"').to_string())
        .collect();
    assert_eq!(
        ids,
        vec![run_id, first.run_id().to_string()],
        "{}",
        out.explain()
    );
}
