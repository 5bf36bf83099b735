//! Issue 11, the log and the files: a verdict is about what this launch wrote, read from a real
//! log file, and a refused run leaves nothing behind. Through the real binary; no wall-clock
//! bound: waits are bounded (the helper is killed and the test fails past the bound) and the
//! verdicts are asserted.

use crate::common;
use common::bounded::{run_bounded, wait_output};
use common::{Env, alive};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(60);

/// firedup with `args`, killed (and the test failed) past the bound.
fn bounded(env: &Env, args: &[&str]) -> common::Run {
    let mut c = env.cmd();
    c.args(args);
    let out = run_bounded(c, BOUND);
    common::Run {
        code: out.code,
        json: serde_json::from_str(out.stdout.trim()).unwrap_or(serde_json::Value::Null),
        stdout: out.stdout,
        stderr: out.stderr,
        took: out.took,
    }
}

fn stop(env: &Env, r: &common::Run) {
    if !r.run_id().is_empty() {
        env.fd("stop").arg(r.run_id()).opt("grace", "1s").output();
    }
}

fn run_dirs(env: &Env) -> Vec<String> {
    std::fs::read_dir(env.state.path().join("runs"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Waits (bounded) until `cond` holds.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !cond() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A shell snippet that waits (bounded) until firedup's event stream says it follows the log.
fn wait_for_readable(events: &Path) -> String {
    format!(
        "i=0; until grep -q Readable '{}' 2>/dev/null; do i=$((i+1)); [ $i -gt 1200 ] && exit 1; sleep 0.05; done",
        events.display()
    )
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

// ---- case 1: a reused --log is judged from this launch's offset ----

#[test]
fn an_old_ready_line_in_a_reused_log_is_not_this_runs_ready() {
    let env = Env::new();
    let log = env.path("server.log");
    std::fs::write(&log, "yesterday: listening on :8000\n").unwrap();
    let r = bounded(
        &env,
        &[
            "run",
            "--json",
            "--log",
            log.to_str().unwrap(),
            "--ready-line",
            "listening on",
            "--",
            "sh",
            "-c",
            "echo loading; sleep 0.5; echo 'today: listening on :8000'; exec sleep 300",
        ],
    );
    stop(&env, &r);
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    // The decisive line is today's, numbered as a line of the file.
    assert_eq!(
        r.json["line"]["text"],
        "today: listening on :8000",
        "{}",
        r.explain()
    );
    assert_eq!(r.json["line"]["number"], 3);
    assert_eq!(
        r.json["log_from_line"], 2,
        "the report says the log was appended to"
    );
    // The old line is still there: the log is appended to, never truncated.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.starts_with("yesterday: listening on :8000\nloading\n"),
        "{text}"
    );
}

#[test]
fn an_old_oom_line_in_a_reused_log_does_not_fail_a_healthy_server() {
    let env = Env::new();
    let log = env.path("server.log");
    std::fs::write(
        &log,
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
    )
    .unwrap();
    let r = bounded(
        &env,
        &[
            "run",
            "--log",
            log.to_str().unwrap(),
            "--ready-line",
            "listening on",
            "--",
            "sh",
            "-c",
            "sleep 0.3; echo 'listening on :8000'; exec sleep 300",
        ],
    );
    // Human output: the run id is on the `run:` line.
    let id = r
        .stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("run:"))
        .map(|id| id.trim().to_string())
        .unwrap_or_default();
    assert!(!id.is_empty(), "{}", r.explain());
    env.fd("stop").arg(&id).opt("grace", "1s").output();
    assert_eq!(r.code, 0, "{}", r.explain());
    assert!(r.stdout.contains("READY"), "{}", r.explain());
    assert!(
        r.stdout.contains("appended to: this run starts at line 2"),
        "the human report says the log was appended to: {}",
        r.explain()
    );
}

#[test]
fn a_second_run_into_a_log_a_live_run_writes_is_refused() {
    let env = Env::new();
    let log = env.path("shared.log");
    let first = bounded(
        &env,
        &[
            "run",
            "--json",
            "--log",
            log.to_str().unwrap(),
            "--ready-line",
            "listening",
            "--",
            "sh",
            "-c",
            "echo listening; exec sleep 300",
        ],
    );
    assert_eq!(first.verdict(), "ready", "{}", first.explain());
    let second = bounded(
        &env,
        &[
            "run",
            "--json",
            "--log",
            log.to_str().unwrap(),
            "--ready-line",
            "listening",
            "--",
            "sh",
            "-c",
            "echo 'torch.OutOfMemoryError: CUDA out of memory.'; exit 1",
        ],
    );
    let pid = first.json["pid"].as_u64().unwrap();
    let first_alive = alive(pid);
    stop(&env, &first);
    stop(&env, &second);
    assert_eq!(second.code, 2, "{}", second.explain());
    assert!(
        second.stderr.contains("being written by process"),
        "{}",
        second.explain()
    );
    assert!(first_alive, "the first run is untouched");
    assert_eq!(run_dirs(&env).len(), 1, "the refused run left a directory");
}

#[test]
fn watch_log_with_old_content_needs_a_choice() {
    let env = Env::new();
    let log = env.path("attach.log");
    let l = log.to_str().unwrap();
    std::fs::write(&log, "old READY\n").unwrap();
    // Neither flag, no process: refused, naming both choices.
    let r = bounded(&env, &["watch", "--log", l, "--ready-line", "READY"]);
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.contains("--from-start") && r.stderr.contains("--from-end"),
        "{}",
        r.explain()
    );
    assert!(run_dirs(&env).is_empty());
    // The flags conflict.
    let r = bounded(
        &env,
        &[
            "watch",
            "--log",
            l,
            "--from-start",
            "--from-end",
            "--ready-line",
            "READY",
        ],
    );
    assert_eq!(r.code, 2, "{}", r.explain());
    // --from-start judges what is there.
    let r = bounded(
        &env,
        &[
            "watch",
            "--json",
            "--log",
            l,
            "--from-start",
            "--ready-line",
            "READY",
        ],
    );
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert_eq!(r.json["line"]["number"], 1);
    // --from-end judges only what comes next (written once firedup follows the log).
    let ev = env.path("events.ndjson");
    let writer = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("{}; echo 'new READY' >> {l}", wait_for_readable(&ev)),
        ])
        .spawn()
        .unwrap();
    let r = bounded(
        &env,
        &[
            "watch",
            "--json",
            "--log",
            l,
            "--from-end",
            "--ready-line",
            "READY",
            "--events",
            ev.to_str().unwrap(),
        ],
    );
    wait_output(writer, BOUND);
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert_eq!(r.json["line"]["text"], "new READY");
    assert_eq!(r.json["line"]["number"], 2);
}

#[test]
fn watch_log_skips_content_older_than_the_watched_process() {
    let env = Env::new();
    let log = env.path("attach.log");
    let l = log.to_str().unwrap().to_string();
    std::fs::write(&log, "old READY\n").unwrap();
    // Make the log's last write clearly older than the process.
    let old = std::time::SystemTime::now() - Duration::from_secs(30);
    std::fs::File::options()
        .append(true)
        .open(&log)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let ev = env.path("events.ndjson");
    let mut server = std::process::Command::new("sh")
        .args([
            "-c",
            &format!(
                "{}; echo 'new READY' >> {l}; exec sleep 300",
                wait_for_readable(&ev)
            ),
        ])
        .spawn()
        .unwrap();
    let pid = server.id().to_string();
    let r = bounded(
        &env,
        &[
            "watch",
            "--json",
            "--log",
            &l,
            "--pid",
            &pid,
            "--ready-line",
            "READY",
            "--events",
            ev.to_str().unwrap(),
        ],
    );
    server.kill().unwrap();
    server.wait().unwrap();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert_eq!(r.json["line"]["text"], "new READY", "{}", r.explain());
    assert!(
        r.stderr.contains("before the process started"),
        "{}",
        r.explain()
    );
}

// ---- case 2: re-attaching after a crash tells the crash ----

#[test]
fn reattaching_to_a_run_that_crashed_after_ready_reports_the_crash() {
    let env = Env::new();
    // The server crashes when the test says so: after `run` has reported it ready (a crash
    // inside the confirmation window would rightly not be `ready` at all).
    let crash = env.path("crash-now");
    let script = format!(
        "echo 'listening on :8000'; while [ ! -e '{}' ]; do sleep 0.05; done; \
         echo 'RuntimeError: CUDA error: an illegal memory access was encountered'; exit 1",
        crash.display()
    );
    let r = bounded(
        &env,
        &[
            "run",
            "--json",
            "--ready-line",
            "listening on",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    std::fs::write(&crash, "").unwrap();
    let id = r.run_id().to_string();
    let exit_json = env.state.path().join("runs").join(&id).join("exit.json");
    wait_until("the crash to be recorded", || exit_json.exists());
    let w = bounded(&env, &["watch", "--json", &id]);
    assert_eq!(
        (w.code, w.verdict(), w.signature()),
        (1, "failed", Some("cuda_error")),
        "{}",
        w.explain()
    );
    assert_eq!(w.json["line"]["number"], 2);
    assert_eq!(w.json["exit"]["code"], 1);
    assert_eq!(w.json["server_running"], false);
}

#[test]
fn reattaching_to_a_run_stopped_after_ready_is_not_ready() {
    let env = Env::new();
    let r = bounded(
        &env,
        &[
            "run",
            "--json",
            "--ready-line",
            "listening",
            "--",
            "sh",
            "-c",
            "echo listening; exec sleep 300",
        ],
    );
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    // Still running: ready is the present truth.
    let w = bounded(&env, &["watch", "--json", r.run_id()]);
    assert_eq!((w.code, w.verdict()), (0, "ready"), "{}", w.explain());
    stop(&env, &r);
    let exit_json = env
        .state
        .path()
        .join("runs")
        .join(r.run_id())
        .join("exit.json");
    wait_until("the stop to be recorded", || exit_json.exists());
    let w = bounded(&env, &["watch", "--json", r.run_id()]);
    assert_ne!(w.verdict(), "ready", "{}", w.explain());
    assert_eq!(w.json["exit"]["signal"], 15, "{}", w.explain());
}

#[test]
fn reattaching_judges_from_the_launchs_offset() {
    let env = Env::new();
    let log = env.path("reused.log");
    std::fs::write(&log, "torch.OutOfMemoryError: CUDA out of memory.\n").unwrap();
    let r = bounded(
        &env,
        &[
            "run",
            "--json",
            "--log",
            log.to_str().unwrap(),
            "--ready-line",
            "listening",
            "--",
            "sh",
            "-c",
            "echo listening; exec sleep 300",
        ],
    );
    let w = bounded(&env, &["watch", "--json", r.run_id()]);
    stop(&env, &r);
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    assert_eq!((w.code, w.verdict()), (0, "ready"), "{}", w.explain());
    assert_eq!(w.json["line"]["number"], 2);
    assert_eq!(w.json["log_from_line"], 2);
    // `logs` prints this run's part of the file.
    let l = bounded(&env, &["logs", r.run_id()]);
    assert_eq!(l.stdout, "listening\n", "{}", l.explain());
}

// ---- case 5: rotation by rename + create ----

/// A server that prints a progress line every 0.2 s for 8 s, the log being rotated (renamed and
/// recreated empty) after its third line; `reopen` says whether it then writes to the new file.
fn rotating_server(env: &Env, reopen: bool) -> String {
    let rotate = if reopen {
        "mv server.log server.log.1; exec >>server.log 2>&1"
    } else {
        "mv server.log server.log.1; : > server.log"
    };
    env.script(
        "rotating.sh",
        &format!(
            "i=0\nwhile [ $i -lt 40 ]; do\n  i=$((i+1)); echo \"loading shard $i/40\"\n  \
             if [ $i = 3 ]; then {rotate}; fi\n  sleep 0.2\ndone\necho 'listening on :8000'\nexec sleep 300"
        ),
    )
}

#[test]
fn a_log_rotated_by_rename_and_create_keeps_being_followed() {
    for reopen in [false, true] {
        let env = Env::new();
        let server = rotating_server(&env, reopen);
        let r = bounded(
            &env,
            &[
                "run",
                "--json",
                "--log",
                "server.log",
                "--ready-line",
                "listening on",
                "--stall",
                "4s",
                "--",
                &server,
            ],
        );
        stop(&env, &r);
        assert_eq!(
            (r.code, r.verdict()),
            (0, "ready"),
            "reopen={reopen}: {}",
            r.explain()
        );
        assert_eq!(r.json["line"]["text"], "listening on :8000");
    }
}

// ---- case 6: what is not a regular file is refused ----

#[test]
fn a_log_that_is_not_a_regular_file_is_refused_before_anything_starts() {
    let env = Env::new();
    let fifo = env.path("fifo");
    mkfifo(&fifo);
    let dir = env.path("a-dir");
    std::fs::create_dir(&dir).unwrap();
    for (log, what) in [
        (fifo.to_str().unwrap(), "FIFO"),
        ("/dev/zero", "character device"),
        ("/dev/urandom", "character device"),
        (dir.to_str().unwrap(), "directory"),
    ] {
        let marker = env.path("started");
        let job = format!("touch {}", marker.display());
        let r = bounded(
            &env,
            &[
                "run",
                "--log",
                log,
                "--until",
                "exit",
                "--timeout",
                "5s",
                "--",
                "sh",
                "-c",
                &job,
            ],
        );
        assert_eq!(r.code, 2, "{log}: {}", r.explain());
        assert!(
            r.stderr.contains(what) && r.stderr.contains("not a regular file"),
            "{log}: {}",
            r.explain()
        );
        assert_eq!(
            r.stderr.trim().lines().count(),
            1,
            "one sentence: {}",
            r.stderr
        );
        assert!(!marker.exists(), "{log}: the command was started");
        let w = bounded(
            &env,
            &["watch", "--log", log, "--until", "exit", "--timeout", "5s"],
        );
        assert_eq!(w.code, 2, "{log}: {}", w.explain());
        assert!(
            w.stderr.contains("not a regular file"),
            "{log}: {}",
            w.explain()
        );
    }
    assert!(
        run_dirs(&env).is_empty(),
        "refused runs left {:?}",
        run_dirs(&env)
    );
}

// ---- case 17: files ----

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[test]
fn a_log_symlink_planted_by_another_user_is_refused() {
    if !is_root() {
        eprintln!("skipped: planting another user's symlink needs root");
        return;
    }
    let env = Env::new();
    let victim = env.path("victim");
    std::fs::write(&victim, "root's file\n").unwrap();
    let link = env.path("planted.log");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    // SAFETY: lchown on a valid NUL-terminated path (uid/gid of `nobody`).
    let c = std::ffi::CString::new(link.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::lchown(c.as_ptr(), 65534, 65534) }, 0);
    let r = bounded(
        &env,
        &[
            "run",
            "--log",
            link.to_str().unwrap(),
            "--until",
            "exit",
            "--",
            "sh",
            "-c",
            "echo appended",
        ],
    );
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.contains("symlink owned by another user"),
        "{}",
        r.explain()
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's file\n");
    // A symlink of one's own is followed.
    let mine = env.path("mine.log");
    std::os::unix::fs::symlink(env.path("real.log"), &mine).unwrap();
    let r = bounded(
        &env,
        &[
            "run",
            "--json",
            "--log",
            mine.to_str().unwrap(),
            "--until",
            "exit",
            "--",
            "sh",
            "-c",
            "echo appended",
        ],
    );
    assert_eq!(r.verdict(), "succeeded", "{}", r.explain());
    assert_eq!(
        std::fs::read_to_string(env.path("real.log")).unwrap(),
        "appended\n"
    );
}

#[test]
fn a_refused_run_truncates_no_events_file_and_leaves_no_run_dir() {
    let env = Env::new();
    let events = env.path("events.ndjson");
    let dir = env.path("a-dir");
    std::fs::create_dir(&dir).unwrap();
    let refusals: [&[&str]; 3] = [
        &["--log", dir.to_str().unwrap()],
        &["--cwd", "/no/such/dir"],
        &["--log", "/dev/null"],
    ];
    for extra in refusals {
        std::fs::write(&events, "precious\n").unwrap();
        let mut args = vec![
            "run",
            "--events",
            events.to_str().unwrap(),
            "--until",
            "exit",
            "--notify",
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "true"]);
        // The notify socket's directory goes under TMPDIR: a private one shows what is left.
        let tmp = tempfile::tempdir().unwrap();
        let mut c = env.cmd();
        c.env("TMPDIR", tmp.path()).args(&args);
        let out = run_bounded(c, BOUND);
        let r = common::Run {
            code: out.code,
            json: serde_json::Value::Null,
            stdout: out.stdout,
            stderr: out.stderr,
            took: out.took,
        };
        assert_eq!(r.code, 2, "{extra:?}: {}", r.explain());
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert!(left.is_empty(), "{extra:?} left {left:?} in TMPDIR");
        assert_eq!(
            std::fs::read_to_string(&events).unwrap(),
            "precious\n",
            "{extra:?}"
        );
        assert!(
            run_dirs(&env).is_empty(),
            "{extra:?} left {:?}",
            run_dirs(&env)
        );
    }
    // watch validates first too.
    std::fs::write(&events, "precious\n").unwrap();
    let r = bounded(
        &env,
        &["watch", "--events", events.to_str().unwrap(), "no-such-run"],
    );
    assert_eq!(r.code, 2, "{}", r.explain());
    assert_eq!(std::fs::read_to_string(&events).unwrap(), "precious\n");
}

#[test]
fn the_history_database_is_readable_by_its_owner_only() {
    let env = Env::new();
    let r = bounded(&env, &["run", "--json", "--until", "exit", "--", "true"]);
    assert_eq!(r.verdict(), "succeeded", "{}", r.explain());
    let db = env.state.path().join("history.sqlite");
    wait_until("the history database", || db.exists());
    for suffix in ["", "-wal", "-shm"] {
        let p = env.state.path().join(format!("history.sqlite{suffix}"));
        if let Ok(m) = std::fs::metadata(&p) {
            assert_eq!(
                m.mode() & 0o077,
                0,
                "{} is mode {:o}",
                p.display(),
                m.mode() & 0o777
            );
        }
    }
}

#[test]
fn a_state_dir_others_can_write_is_refused() {
    let env = Env::new();
    std::fs::set_permissions(env.state.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let r = bounded(&env, &["run", "--until", "exit", "--", "true"]);
    std::fs::set_permissions(env.state.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.contains("not a private directory"),
        "{}",
        r.explain()
    );
}

#[test]
fn without_home_the_state_dir_is_not_a_shared_tmp_path() {
    let env = Env::new();
    let mut c = env.cmd();
    c.env_remove("HOME")
        .env_remove("XDG_STATE_HOME")
        .env_remove("FIREDUP_STATE_DIR")
        .env("FIREDUP_HISTORY", "off")
        .args(["ps"]);
    let out = run_bounded(c, BOUND);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains("/tmp/.local"), "{}", out.stdout);
}
