//! Processes left behind or lost, and runs ended deliberately (issue 11, cases 7, 8, 9, 11, 12),
//! through the real binary with real processes. After each verdict, stop or interrupt, the test
//! checks that no process of the run is left: none carrying the run's `FIREDUP_RUN_ID`, nor a
//! descendant of one (redis overwrites its environment with its process title).
//!
//! No wall-clock bound on firedup: each wait is bounded generously (the helper is killed and the
//! test fails past it), and the verdicts and leftovers are asserted.

use crate::common;
use common::bounded::{run_bounded, wait_output};
use common::{Env, alive, free_port};

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(60);

/// Live processes carrying `FIREDUP_RUN_ID=<run_id>` (or `KEY=VALUE` when given with `=`), and
/// their descendants.
fn processes_marked(marker: &str) -> Vec<u32> {
    let want = if marker.contains('=') {
        marker.to_string()
    } else {
        format!("FIREDUP_RUN_ID={marker}")
    };
    let me = std::process::id();
    let mut table: Vec<(u32, u32)> = Vec::new();
    let mut members: HashSet<u32> = HashSet::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let rest: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, r)| r.split_whitespace().collect())
            .unwrap_or_default();
        if rest.first().is_some_and(|s| *s == "Z" || *s == "X") {
            continue;
        }
        let ppid: u32 = rest.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
        table.push((pid, ppid));
        if pid == me {
            continue;
        }
        if std::fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|b| b.split(|c| *c == 0).any(|v| v == want.as_bytes()))
        {
            members.insert(pid);
        }
    }
    loop {
        let n = members.len();
        for (pid, ppid) in &table {
            if members.contains(ppid) {
                members.insert(*pid);
            }
        }
        if members.len() == n {
            break;
        }
    }
    let mut v: Vec<u32> = members.into_iter().collect();
    v.sort();
    v
}

/// Waits (bounded) until nothing of the run is left; returns what is left at the bound.
fn left_of_run(marker: &str) -> Vec<(u32, String)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_marked(marker);
        if left.is_empty() || Instant::now() >= deadline {
            return left
                .into_iter()
                .map(|p| {
                    let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                    (p, String::from_utf8_lossy(&cmd).replace('\0', " "))
                })
                .collect();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn kill_all(pids: &[(u32, String)]) {
    for (p, _) in pids {
        // SAFETY: kill(2) on a process this test's run started (it carries the run's id).
        unsafe { libc::kill(*p as i32, libc::SIGKILL) };
    }
}

/// Asserts nothing of the run is left (killing what is, so that a failure leaves nothing).
fn assert_nothing_left(marker: &str, what: &str) {
    let left = left_of_run(marker);
    kill_all(&left);
    assert!(
        left.is_empty(),
        "{what}: processes of the run left: {left:?}"
    );
}

fn json(out: &common::Run) -> serde_json::Value {
    out.json.clone()
}

fn explain(out: &common::Run) -> String {
    format!(
        "exit {}\nstdout: {}\nstderr: {}",
        out.code, out.stdout, out.stderr
    )
}

/// The id of the only run in `env`'s state directory.
fn only_run_id(env: &Env) -> String {
    let runs: Vec<String> = std::fs::read_dir(env.state.path().join("runs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

// ---- case 7: daemonizing servers ----

#[test]
fn a_daemonizing_redis_is_ready_and_running_and_stop_finds_it() {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(found, "redis-server is not installed");
    let env = Env::new();
    let port = free_port().to_string();
    let log = env.path("redis.log").display().to_string();
    let pidfile = env.path("redis.pid").display().to_string();
    let out = env
        .run()
        .json()
        .timeout("30s")
        .opt("log", &log)
        .command(&[
            "redis-server",
            "--port",
            &port,
            "--daemonize",
            "yes",
            "--logfile",
            &log,
            "--pidfile",
            &pidfile,
            "--save",
            "",
        ])
        .bounded(BOUND)
        .output();
    let v = json(&out);
    let run_id = v["run_id"].as_str().unwrap_or("").to_string();
    let daemon: Option<u32> = std::fs::read_to_string(&pidfile)
        .ok()
        .and_then(|t| t.trim().parse().ok());
    let verdict_ok = v["verdict"] == "ready" && v["server_running"] == true;
    if !verdict_ok {
        if let Some(d) = daemon {
            // SAFETY: kill(2) on the redis this test started.
            unsafe { libc::kill(d as i32, libc::SIGKILL) };
        }
    }
    assert!(verdict_ok, "{}", explain(&out));
    assert!(
        v["reason"].as_str().unwrap_or("").contains("daemon"),
        "{}",
        explain(&out)
    );
    let daemon = daemon.expect("redis wrote its pidfile");
    assert!(alive(daemon as u64));
    let ps = env.fd("ps").bounded(BOUND).output();
    assert!(
        ps.stdout.contains(&format!("running (daemon {daemon}")),
        "{}",
        explain(&ps)
    );
    // A re-attach sees the daemon serving: ready, not a run that has ended.
    let again = env.fd("watch").json().arg(&run_id).bounded(BOUND).output();
    assert_eq!(json(&again)["verdict"], "ready", "{}", explain(&again));
    let stop = env.fd("stop").arg(&run_id).bounded(BOUND).output();
    assert_eq!(stop.code, 0, "{}", explain(&stop));
    assert!(stop.stdout.contains("none left"), "{}", explain(&stop));
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(daemon as u64) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survived = alive(daemon as u64);
    if survived {
        // SAFETY: kill(2) on the redis this test started.
        unsafe { libc::kill(daemon as i32, libc::SIGKILL) };
    }
    assert!(!survived, "`stop` left the redis daemon {daemon} running");
    assert_nothing_left(&run_id, "after stop");
}

#[test]
fn a_double_forked_daemon_is_followed_to_ready_and_a_dead_one_is_the_exit() {
    let env = Env::new();
    // The launcher exits 0 at once; its double-forked grandchild prints READY a moment later.
    let daemon = env.script(
        "daemon.sh",
        "(setsid sh -c 'sleep 0.3; echo READY; exec sleep 300' &)\nexit 0",
    );
    let out = env
        .run()
        .json()
        .ready_line("READY")
        .command(&[&daemon])
        .bounded(BOUND)
        .output();
    let v = json(&out);
    let run_id = v["run_id"].as_str().unwrap_or("").to_string();
    let ok = v["verdict"] == "ready" && v["server_running"] == true;
    if !ok {
        kill_all(&left_of_run(&run_id));
    }
    assert!(ok, "{}", explain(&out));
    let stop = env.fd("stop").arg(&run_id).bounded(BOUND).output();
    assert!(stop.stdout.contains("none left"), "{}", explain(&stop));
    assert_nothing_left(&run_id, "after stop");

    // The daemon dies before the ready line: the run's exit, with nothing left. It lives 3 s, not
    // a fraction: one that was gone before firedup saw the launcher's exit (a loaded machine) is
    // a plain exit 0, with no daemon to name.
    let env = Env::new();
    let short = env.script("short.sh", "(setsid sh -c 'sleep 3' &)\nexit 0");
    let out = env
        .run()
        .json()
        .ready_line("READY")
        .command(&[&short])
        .bounded(BOUND)
        .output();
    let v = json(&out);
    assert_eq!(v["verdict"], "exited", "{}", explain(&out));
    assert!(
        v["reason"].as_str().unwrap_or("").contains("daemon"),
        "{}",
        explain(&out)
    );
    assert_nothing_left(v["run_id"].as_str().unwrap_or("-"), "after the exit");
}

/// A Python program that exits 0 while its `multiprocessing` resource tracker lingers (here a
/// lookalike that sleeps: the real one ends a moment after its program): the run ended with the
/// program's exit 0, no daemon was left to follow, and teardown still takes the tracker.
#[test]
fn a_runtime_helper_outliving_an_exit_0_is_no_daemon() {
    let env = Env::new();
    let program = env.script(
        "program.sh",
        "python3 -c 'from multiprocessing.resource_tracker import main; import time; \
         time.sleep(30)' </dev/null >/dev/null 2>&1 &\nsleep 0.3\nexit 0",
    );
    let out = env
        .run()
        .json()
        .ready_line("READY")
        .command(&[&program])
        .bounded(BOUND)
        .output();
    let v = json(&out);
    let run_id = v["run_id"].as_str().unwrap_or("-").to_string();
    let reason = v["reason"].as_str().unwrap_or("").to_string();
    let left = left_of_run(&run_id);
    kill_all(&left);
    assert_eq!(v["verdict"], "exited", "{}", explain(&out));
    assert_eq!(v["exit"]["code"], 0, "{}", explain(&out));
    assert!(!reason.contains("daemon"), "{}", explain(&out));
    assert!(left.is_empty(), "left {left:?}: {}", explain(&out));
}

// ---- case 8: stop and teardown find escaped processes ----

#[test]
fn stop_and_teardown_stop_a_setsid_grandchild_that_left_the_tree() {
    let env = Env::new();
    let server = env.script(
        "escape.sh",
        "(setsid sleep 301 </dev/null >/dev/null 2>&1 &)\necho READY\nexec sleep 302",
    );
    let out = env
        .run()
        .json()
        .ready_line("READY")
        .command(&[&server])
        .bounded(BOUND)
        .output();
    let v = json(&out);
    assert_eq!(v["verdict"], "ready", "{}", explain(&out));
    let run_id = v["run_id"].as_str().unwrap().to_string();
    let stop = env.fd("stop").arg(&run_id).bounded(BOUND).output();
    assert_eq!(stop.code, 0, "{}", explain(&stop));
    assert!(
        stop.stdout.contains("none left") && stop.stdout.contains("FIREDUP_RUN_ID"),
        "{}",
        explain(&stop)
    );
    assert_nothing_left(&run_id, "after `firedup stop`");

    // The run's own teardown after a failure verdict.
    let env = Env::new();
    let failing = env.script(
        "failing.sh",
        "(setsid sleep 303 </dev/null >/dev/null 2>&1 &)\nsleep 0.2\necho BOOM\nexec sleep 304",
    );
    let out = env
        .run()
        .json()
        .ready_line("READY")
        .opt("fail-line", "BOOM")
        .command(&[&failing])
        .bounded(BOUND)
        .output();
    let v = json(&out);
    assert_eq!(v["verdict"], "failed", "{}", explain(&out));
    assert_eq!(v["server_running"], false, "{}", explain(&out));
    assert_nothing_left(v["run_id"].as_str().unwrap(), "after the teardown");
}

// ---- case 9: a full state disk ----

/// Runs `args` in a private mount namespace where the state directory is a 64 KiB tmpfs with
/// `free_pages` pages left. `Err` where mounting is not allowed here.
fn on_a_full_disk(env: &Env, free_pages: u32, args: &[&str]) -> Result<common::Run, String> {
    let dir = env.path("statefs");
    std::fs::create_dir_all(&dir).unwrap();
    let setup = format!(
        "mount -t tmpfs -o size=64k tmpfs {d} && mkdir -p {d}/state && dd if=/dev/zero of={d}/fill bs=4096 count={n} 2>/dev/null; exec \"$@\"",
        d = dir.display(),
        n = 16 - free_pages
    );
    let probe = Command::new("unshare")
        .args(["-m", "sh", "-c", &setup, "sh", "true"])
        .stderr(Stdio::piped())
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            return Err(format!(
                "cannot mount a tmpfs in a private mount namespace here: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        Err(e) => return Err(format!("no unshare: {e}")),
    }
    let mut c = Command::new("unshare");
    c.args([
        "-m",
        "sh",
        "-c",
        &setup,
        "sh",
        env!("CARGO_BIN_EXE_firedup"),
    ])
    .args(args)
    .env("FIREDUP_STATE_DIR", dir.join("state"))
    .env("FIREDUP_PLAIN", "1")
    .current_dir(env.work.path());
    Ok(run_bounded(c, BOUND).into())
}

#[test]
fn a_full_state_disk_starts_nothing_it_cannot_record_and_still_reports_the_exit() {
    let env = Env::new();
    let mark = format!("TRUTH_PROCS_MARK={}-{}", std::process::id(), line!());
    let log = env.path("server.log").display().to_string();
    // One free page: meta.json takes it, process.json cannot be written.
    let out = match on_a_full_disk(
        &env,
        1,
        &[
            "run",
            "--ready-line",
            "READY",
            "--log",
            &log,
            "--env",
            &mark,
            "--",
            "sh",
            "-c",
            "echo READY; exec sleep 300",
        ],
    ) {
        Ok(o) => o,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let left = left_of_run(&mark);
    kill_all(&left);
    assert!(
        left.is_empty(),
        "the command runs on unrecorded: {left:?}\n{}",
        explain(&out)
    );
    assert_eq!(out.code, 2, "{}", explain(&out));
    assert!(
        out.stderr.contains("cannot record the run") && out.stderr.contains("not started"),
        "{}",
        explain(&out)
    );

    // Two free pages: process.json fits, exit.json does not; the exit code still arrives.
    let env = Env::new();
    let log = env.path("job.log").display().to_string();
    let out = on_a_full_disk(
        &env,
        2,
        &[
            "run",
            "--json",
            "--until",
            "exit",
            "--log",
            &log,
            "--",
            "sh",
            "-c",
            "sleep 0.2; exit 3",
        ],
    )
    .expect("mounting worked a moment ago");
    let v = json(&out);
    assert_eq!(v["exit"]["code"], 3, "{}", explain(&out));
}

// ---- case 11: Ctrl-C, SIGTERM, SIGHUP ----

/// Starts `firedup run ARGS` and waits (bounded) for `file` to exist.
fn start_and_wait_for(env: &Env, args: &[&str], file: &std::path::Path) -> std::process::Child {
    let mut c = env.cmd();
    let mut child = c
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + BOUND;
    while !file.exists() {
        if Instant::now() >= deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{} never appeared: {}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn signal(child: &std::process::Child, sig: i32) {
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// A history row of `run_id`, as `firedup show --json` prints it.
fn shown(env: &Env, run_id: &str) -> serde_json::Value {
    json(&env.fd("show").arg(run_id).json().bounded(BOUND).output())
}

#[test]
fn a_signal_to_run_stops_the_server_says_so_records_it_and_exits_128_plus_n() {
    for (sig, name, code) in [
        (libc::SIGINT, "SIGINT", 130),
        (libc::SIGTERM, "SIGTERM", 143),
        (libc::SIGHUP, "SIGHUP", 129),
    ] {
        let env = Env::new();
        let up = env.path("up");
        let server = env.script(
            "server.sh",
            &format!(
                "(setsid sleep 305 </dev/null >/dev/null 2>&1 &)\ntouch {}\nexec sleep 306",
                up.display()
            ),
        );
        let child = start_and_wait_for(&env, &["run", "--ready-line", "NEVER", "--", &server], &up);
        let run_id = only_run_id(&env);
        signal(&child, sig);
        let out: common::Run = wait_output(child, BOUND).into();
        assert_eq!(out.code, code, "{name}: {}", explain(&out));
        assert!(
            out.stderr.contains(&format!("interrupted ({name})"))
                && out.stderr.contains("none left"),
            "{name}: {}",
            explain(&out)
        );
        assert_nothing_left(&run_id, name);
        let row = shown(&env, &run_id);
        assert_eq!(row["interrupted"], true, "{name}: {row}");
    }
}

#[test]
fn a_signal_with_keep_leaves_the_server_and_says_how_to_stop_it() {
    let env = Env::new();
    let up = env.path("up");
    let server = env.script(
        "server.sh",
        &format!("touch {}\nexec sleep 307", up.display()),
    );
    let child = start_and_wait_for(
        &env,
        &["run", "--keep", "--ready-line", "NEVER", "--", &server],
        &up,
    );
    let run_id = only_run_id(&env);
    signal(&child, libc::SIGINT);
    let out: common::Run = wait_output(child, BOUND).into();
    let still = processes_marked(&run_id);
    assert_eq!(out.code, 130, "{}", explain(&out));
    assert!(
        out.stderr.contains(&format!("firedup stop {run_id}"))
            && out.stderr.contains(&format!("firedup watch {run_id}")),
        "{}",
        explain(&out)
    );
    assert!(!still.is_empty(), "--keep must leave the server running");
    let stop = env.fd("stop").arg(&run_id).bounded(BOUND).output();
    assert!(stop.stdout.contains("none left"), "{}", explain(&stop));
    assert_nothing_left(&run_id, "after stop");
}

#[test]
fn a_signal_during_then_stops_the_then_command_and_the_server() {
    let env = Env::new();
    let then_up = env.path("then-up");
    let server = env.script("server.sh", "echo READY\nexec sleep 308");
    let then = format!("touch {}; sleep 309", then_up.display());
    let child = start_and_wait_for(
        &env,
        &[
            "run",
            "--ready-line",
            "READY",
            "--then",
            &then,
            "--",
            &server,
        ],
        &then_up,
    );
    let run_id = only_run_id(&env);
    signal(&child, libc::SIGTERM);
    let out: common::Run = wait_output(child, BOUND).into();
    assert_eq!(out.code, 143, "{}", explain(&out));
    assert!(
        out.stderr.contains("interrupted (SIGTERM)"),
        "{}",
        explain(&out)
    );
    assert_nothing_left(&run_id, "after the interrupt during --then");
    let row = shown(&env, &run_id);
    assert_eq!(row["interrupted"], true, "{row}");
    assert_eq!(row["outcome"]["verdict"], "ready", "{row}");
}

// ---- case 12: a --then that cannot start ----

#[test]
fn a_then_command_that_cannot_start_stops_the_server() {
    let env = Env::new();
    let empty = env.path("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let server = env.script("server.sh", "echo READY\nexec /bin/sleep 310");
    let mut c = env.cmd();
    c.env("PATH", &empty).args([
        "run",
        "--ready-line",
        "READY",
        "--then",
        "echo hi",
        "--",
        &server,
    ]);
    let out: common::Run = run_bounded(c, BOUND).into();
    let run_id = only_run_id(&env);
    let left = left_of_run(&run_id);
    kill_all(&left);
    assert!(left.is_empty(), "the server was left running: {left:?}");
    assert_eq!(out.code, 2, "{}", explain(&out));
    assert!(
        out.stderr.contains("sh is not on PATH") && out.stderr.contains("none left"),
        "{}",
        explain(&out)
    );
}
