//! The adversarial check of issue 11: twelve cases in which a monitor is easily fooled (a reused
//! log, someone else's HTTP server, a bind error right after the ready line, log rotation, a
//! daemonizing server, an escaped `setsid` process, Ctrl-C, a FIFO as the log, a 1 s job's time,
//! secrets by value, a re-attach after a crash), each through the real binary. Each asserts the
//! TRUE verdict and that afterwards no process carrying the run's `FIREDUP_RUN_ID` is left (found
//! by scanning `/proc/*/environ`, so a daemon or an escaped grandchild counts too).
//!
//! The cases run side by side, each in its own state directory; every wait is bounded (60 s, the
//! firedup process killed past it) and nothing asserts how fast anything was. Each case reports
//! its own failure; the test fails listing all of them.

use crate::common;
use common::{Env, Run, free_port};

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long any one firedup command may take before the case calls it a hang.
const BOUND: Duration = Duration::from_secs(60);

type Outcome = Result<(), String>;

/// A script under `tests/fixtures/adversarial/`.
fn script(name: &str) -> String {
    common::fixture(&format!("adversarial/{name}"))
}

/// Runs firedup with `args` (and extra environment `vars`), bounded by `BOUND`.
fn firedup(env: &Env, args: &[&str]) -> Result<Run, String> {
    let mut cmd = env.cmd();
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start firedup: {e}"))?;
    finish(child, &format!("firedup {}", args.join(" ")))
}

/// Waits (bounded) for a spawned firedup with piped stdout and stderr.
fn finish(child: Child, what: &str) -> Result<Run, String> {
    let started = Instant::now();
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(BOUND) {
        Ok(Ok(out)) => {
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            Ok(Run {
                code: out.status.code().unwrap_or(-1),
                json: serde_json::from_str(stdout.trim()).unwrap_or(serde_json::Value::Null),
                stdout,
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                took: started.elapsed(),
            })
        }
        Ok(Err(e)) => Err(format!("waiting for {what}: {e}")),
        Err(_) => {
            // SAFETY: kill(2) on our own child, not yet reaped (its waiter is blocked in wait).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            Err(format!(
                "{what} still running after {BOUND:?}: killed (a hang)"
            ))
        }
    }
}

/// `Err` with the run's output unless `cond`.
fn want(cond: bool, what: &str, r: &Run) -> Outcome {
    if cond {
        Ok(())
    } else {
        Err(format!(
            "{what}\n    {}",
            r.explain().replace('\n', "\n    ")
        ))
    }
}

/// Checks exit code and verdict (and the signature, where given).
fn verdict(r: &Run, code: i32, verdict: &str, signature: Option<&str>) -> Outcome {
    let got = (r.code, r.verdict(), r.signature());
    want(
        got == (code, verdict, signature),
        &format!("got {got:?}, want {:?}", (code, verdict, signature)),
        r,
    )
}

/// Pids of the live processes whose environment holds `FIREDUP_RUN_ID=<run_id>`.
fn processes_of(run_id: &str) -> Vec<u32> {
    let marker = format!("FIREDUP_RUN_ID={run_id}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|kv| kv == marker.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

/// The run ids in `env`'s state directory: every run a case made, even one whose firedup hung.
fn run_ids(env: &Env) -> Vec<String> {
    std::fs::read_dir(env.state.path().join("runs"))
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// After a case: no process of any of its runs may be left. A process on its way out (already
/// signalled) gets a bounded moment; survivors are listed, then killed so the suite leaves none.
fn nothing_left(env: &Env) -> Outcome {
    let ids = run_ids(env);
    let left = || -> Vec<(String, u32, String)> {
        ids.iter()
            .flat_map(|id| processes_of(id).into_iter().map(move |p| (id.clone(), p)))
            .map(|(id, p)| {
                let cmd = std::fs::read(format!("/proc/{p}/cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                    .unwrap_or_default();
                (id, p, cmd)
            })
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut survivors = left();
    while !survivors.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        survivors = left();
    }
    for (_, pid, _) in &survivors {
        // SAFETY: kill(2) on a process this case's run started (it carries the run's marker).
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
    if survivors.is_empty() {
        Ok(())
    } else {
        Err(format!("processes of the run left behind: {survivors:?}"))
    }
}

/// Stops a run that is (or may be) still going; its own result is checked by the caller.
fn stop(env: &Env, run_id: &str) -> Result<Run, String> {
    firedup(env, &["stop", run_id])
}

/// Waits (bounded) until `path` exists.
fn wait_for_file(path: &Path) -> Outcome {
    let deadline = Instant::now() + BOUND;
    while !path.exists() {
        if Instant::now() > deadline {
            return Err(format!("{} never appeared", path.display()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------- cases

/// (1) A reused `--log` holding an old ready line: the new server is still loading, so the old
/// line must not make it `ready`; its own ready line does, later.
fn reused_log_with_an_old_ready_line(env: &Env) -> Outcome {
    let log = env.path("server.log");
    std::fs::write(&log, "loading weights\nserver READY old\n").unwrap();
    let r = firedup(
        env,
        &[
            "run",
            "--json",
            "--log",
            log.to_str().unwrap(),
            "--ready-line",
            "READY",
            "--timeout",
            "120s",
            "--",
            "sh",
            &script("slow_ready.sh"),
            "3",
        ],
    )?;
    let judged = verdict(&r, 0, "ready", None).and_then(|()| {
        let line = r.json["line"]["text"].as_str().unwrap_or("");
        want(
            line.contains("READY new"),
            &format!("decisive line {line:?}, want the new one"),
            &r,
        )?;
        // The new ready line comes 3 s after the launch: not before.
        let at = r.json["elapsed_s"].as_f64().unwrap_or(0.0);
        want(
            at >= 3.0,
            &format!("ready at {at} s, before the new server said so"),
            &r,
        )
    });
    let stopped = stop(env, r.run_id()).map(|_| ());
    judged.and(stopped)
}

/// (2) A reused log holding an old OOM line: the healthy new server must become `ready`.
fn reused_log_with_an_old_oom_line(env: &Env) -> Outcome {
    let log = env.path("server.log");
    std::fs::write(
        &log,
        "loading weights\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. \
         GPU 0 has a total capacity of 79.11 GiB\n",
    )
    .unwrap();
    let r = firedup(
        env,
        &[
            "run",
            "--json",
            "--log",
            log.to_str().unwrap(),
            "--ready-line",
            "READY",
            "--timeout",
            "120s",
            "--",
            "sh",
            &script("slow_ready.sh"),
            "1",
        ],
    )?;
    let judged = verdict(&r, 0, "ready", None);
    let stopped = stop(env, r.run_id()).map(|_| ());
    judged.and(stopped)
}

/// (3) Someone else's HTTP server on the port given to `--http`, while the real server loads and
/// never binds: not `ready`; the reason names the foreign owner.
fn foreign_http_server(env: &Env) -> Outcome {
    let port = free_port();
    let mut foreign = Command::new("python3")
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
        .map_err(|e| format!("cannot start python3 -m http.server: {e}"))?;
    let result = (|| {
        let deadline = Instant::now() + BOUND;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err("the foreign http.server never listened".to_string());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let url = format!("http://127.0.0.1:{port}/");
        let r = firedup(
            env,
            &[
                "run",
                "--json",
                "--http",
                &url,
                "--timeout",
                "5s",
                "--",
                "sh",
                &script("loading_forever.sh"),
            ],
        )?;
        if r.verdict() == "ready" {
            // Wrongly ready: stop it, so that only what firedup itself left behind is reported.
            let _ = stop(env, r.run_id());
        }
        verdict(&r, 124, "timed_out", None)?;
        let reason = r.json["reason"].as_str().unwrap_or("").to_lowercase();
        let foreign_pid = foreign.id().to_string();
        want(
            reason.contains("foreign") || reason.contains(&format!("pid {foreign_pid}")),
            "the reason should say the HTTP server is someone else's (foreign, or its pid)",
            &r,
        )
    })();
    let _ = foreign.kill();
    let _ = foreign.wait();
    result
}

/// (4) uvicorn's order: `Application startup complete.`, then the bind fails (`[Errno 98]`) and
/// the server exits 1. The ready line did not mean it serves: `failed` with `port_in_use`.
fn bind_error_right_after_the_ready_line(env: &Env) -> Outcome {
    let r = firedup(
        env,
        &[
            "run",
            "--json",
            "--profile",
            "vllm",
            "--no-probe",
            "--timeout",
            "120s",
            "--",
            "sh",
            &script("uvicorn_bind_error.sh"),
        ],
    )?;
    verdict(&r, 1, "failed", Some("port_in_use"))?;
    let line = r.json["line"]["text"].as_str().unwrap_or("");
    want(
        line.contains("[Errno 98]"),
        &format!("decisive line {line:?}"),
        &r,
    )
}

/// (5) A healthy job whose log is rotated by rename + create while it keeps writing to the file
/// it has open: it is working, so not `stalled`; `succeeded` once it exits 0.
fn log_rotated_by_rename_and_create(env: &Env) -> Outcome {
    let log = env.path("job.log");
    let log = log.to_str().unwrap();
    let r = firedup(
        env,
        &[
            "run",
            "--json",
            "--until",
            "exit",
            "--log",
            log,
            "--stall",
            "4s",
            "--timeout",
            "120s",
            "--",
            "sh",
            &script("rotating_job.sh"),
            log,
        ],
    )?;
    verdict(&r, 0, "succeeded", None)
}

/// (6) A daemonizing server: the launcher forks a `setsid` daemon and exits 0; the daemon says
/// ready and serves. `ready` (a launcher's exit 0 is not the end of the server), and `stop`
/// leaves nothing.
fn daemonizing_server(env: &Env) -> Outcome {
    let r = firedup(
        env,
        &[
            "run",
            "--json",
            "--ready-line",
            "Ready to accept connections",
            "--timeout",
            "120s",
            "--",
            "sh",
            &script("daemonizing.sh"),
        ],
    )?;
    let judged = verdict(&r, 0, "ready", None);
    let run_id = if r.run_id().is_empty() {
        run_ids(env).pop().unwrap_or_default()
    } else {
        r.run_id().to_string()
    };
    let s = stop(env, &run_id)?;
    judged?;
    want(s.code == 0, "stop should succeed (nothing left)", &s)
}

/// (7) A `setsid` grandchild escapes the process group and session; the server then fails.
/// `failed` (cuda_error), and the teardown must also end the escaped one.
fn setsid_grandchild_escapes(env: &Env) -> Outcome {
    let r = firedup(
        env,
        &[
            "run",
            "--json",
            "--ready-line",
            "READY",
            "--timeout",
            "120s",
            "--",
            "sh",
            &script("escape_then_crash.sh"),
        ],
    )?;
    verdict(&r, 1, "failed", Some("cuda_error"))
}

/// (8) Ctrl-C (SIGINT) to `firedup run` while the server loads: the server is stopped and the
/// teardown verified, one line says so, exit 130.
fn ctrl_c_while_loading(env: &Env) -> Outcome {
    let log = env.path("server.log");
    let mut cmd = env.cmd();
    cmd.args([
        "run",
        "--log",
        log.to_str().unwrap(),
        "--ready-line",
        "READY",
        "--timeout",
        "120s",
        "--",
        "sh",
        &script("loading_forever.sh"),
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start firedup: {e}"))?;
    let pid = child.id();
    // Loading: its first line is in the log.
    let deadline = Instant::now() + BOUND;
    while !common::file_text(&log).contains("loading") {
        if Instant::now() > deadline {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            return Err("the server never started loading".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) on our own child, not yet reaped (finish() reaps it below).
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let r = finish(child, "firedup run (after SIGINT)")?;
    want(r.code == 130, "Ctrl-C should exit 130", &r)?;
    let said = r.stderr.to_lowercase();
    want(
        said.contains("interrupt") || said.contains("ctrl-c") || said.contains("sigint"),
        "one line should say that the run was interrupted and the server stopped",
        &r,
    )
}

/// (9) A FIFO as `--log`: refused with one sentence, exit 2, nothing launched.
fn fifo_as_the_log(env: &Env) -> Outcome {
    let fifo = env.path("server.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        return Err("mkfifo failed".into());
    }
    let launched = env.path("launched");
    let body = format!("touch {}; echo READY; exec sleep 60", launched.display());
    let r = firedup(
        env,
        &[
            "run",
            "--json",
            "--log",
            fifo.to_str().unwrap(),
            "--ready-line",
            "READY",
            "--timeout",
            "120s",
            "--",
            "sh",
            "-c",
            &body,
        ],
    )?;
    want(
        r.code == 2,
        "a FIFO as the log should be a usage error (exit 2)",
        &r,
    )?;
    let said = r.stderr.trim();
    want(
        !said.is_empty() && said.lines().count() == 1,
        "the refusal should be one sentence on stderr",
        &r,
    )?;
    want(!launched.exists(), "the command was launched", &r)
}

/// (10) A 1 s job: `succeeded`, and its time counts from the launch (at least the second it slept).
fn one_second_job(env: &Env) -> Outcome {
    let r = firedup(
        env,
        &["run", "--json", "--until", "exit", "--", "sleep", "1"],
    )?;
    verdict(&r, 0, "succeeded", None)?;
    let at = r.json["elapsed_s"].as_f64().unwrap_or(0.0);
    want(
        at >= 1.0,
        &format!("elapsed_s {at}: less than the 1 s the job slept"),
        &r,
    )
}

/// (11) Secrets by value: a URL with a password in `--env`, an API key in argv. Never in the
/// `--json` output, `ps --json`, the run's meta.json or `history --json`.
fn secrets_by_value(env: &Env) -> Outcome {
    const KEY: &str = "sk-abc123def456ghi789jkl012mno345";
    const URL_SECRET: &str = "u:pw@h";
    let r = firedup(
        env,
        &[
            "run",
            "--json",
            "--ready-line",
            "READY",
            "--timeout",
            "120s",
            "--env",
            "DATABASE_URL=postgres://u:pw@h/db",
            "--",
            "sh",
            &script("slow_ready.sh"),
            "0",
            "--api-key",
            KEY,
        ],
    )?;
    let mut leaks = Vec::new();
    let mut look = |place: &str, text: &str| {
        for secret in [KEY, URL_SECRET] {
            if text.contains(secret) {
                leaks.push(format!("{secret} in {place}"));
            }
        }
    };
    look("run --json", &r.stdout);
    let ps = firedup(env, &["ps", "--json"])?;
    look("ps --json", &ps.stdout);
    for id in run_ids(env) {
        let meta = env.state.path().join("runs").join(&id).join("meta.json");
        look("meta.json", &common::file_text(&meta));
    }
    let stopped = stop(env, r.run_id());
    let history = firedup(env, &["history", "--json"])?;
    look("history --json", &history.stdout);
    verdict(&r, 0, "ready", None)?;
    stopped?;
    want(
        ps.code == 0 && history.code == 0,
        "ps/history failed",
        &history,
    )?;
    want(leaks.is_empty(), &format!("secrets shown: {leaks:?}"), &r)
}

/// (12) Re-attach to a run that became ready and then crashed (exit 1 after a CUDA error line):
/// `watch RUN_ID` tells the present truth, `failed` with `cuda_error`, not `ready`.
fn reattach_after_a_crash(env: &Env) -> Outcome {
    let trigger = env.path("crash-now");
    let r = firedup(
        env,
        &[
            "run",
            "--json",
            "--ready-line",
            "READY",
            "--timeout",
            "120s",
            "--",
            "sh",
            &script("crash_on_trigger.sh"),
            trigger.to_str().unwrap(),
        ],
    )?;
    verdict(&r, 0, "ready", None).map_err(|e| format!("(before the crash) {e}"))?;
    let run_dir = env.state.path().join("runs").join(r.run_id());
    std::fs::write(&trigger, "").unwrap();
    wait_for_file(&run_dir.join("exit.json"))?;
    let w = firedup(env, &["watch", "--json", r.run_id()])?;
    verdict(&w, 1, "failed", Some("cuda_error"))?;
    let line = w.json["line"]["text"].as_str().unwrap_or("");
    want(
        line.contains("illegal memory access"),
        &format!("decisive line {line:?}"),
        &w,
    )
}

#[test]
fn twelve_adversarial_cases_end_in_the_true_verdict_and_leave_nothing() {
    let cases: [(&str, fn(&Env) -> Outcome); 12] = [
        (
            "1 reused log with an old ready line",
            reused_log_with_an_old_ready_line,
        ),
        (
            "2 reused log with an old OOM line",
            reused_log_with_an_old_oom_line,
        ),
        (
            "3 foreign HTTP server on the --http port",
            foreign_http_server,
        ),
        (
            "4 bind error right after the ready line",
            bind_error_right_after_the_ready_line,
        ),
        (
            "5 log rotated by rename + create",
            log_rotated_by_rename_and_create,
        ),
        ("6 daemonizing server", daemonizing_server),
        ("7 setsid grandchild escapes", setsid_grandchild_escapes),
        ("8 Ctrl-C while loading", ctrl_c_while_loading),
        ("9 FIFO as --log", fifo_as_the_log),
        ("10 1 s job's elapsed time", one_second_job),
        ("11 secrets by value", secrets_by_value),
        ("12 re-attach after a crash", reattach_after_a_crash),
    ];
    // FIREDUP_ADVERSARIAL=WORD runs only the cases whose name contains WORD (while fixing one).
    let only = std::env::var("FIREDUP_ADVERSARIAL").unwrap_or_default();
    let results: Vec<(&str, Outcome)> = std::thread::scope(|s| {
        let handles: Vec<_> = cases
            .iter()
            .filter(|(name, _)| name.contains(&only))
            .map(|&(name, case)| {
                (
                    name,
                    s.spawn(move || {
                        let env = Env::new();
                        // A panic inside a case is that case's failure, not the test's.
                        let judged =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(&env)))
                                .unwrap_or_else(|p| Err(format!("panicked: {}", panic_text(&p))));
                        // Both are reported: a wrong verdict does not hide a process left behind.
                        match (judged, nothing_left(&env)) {
                            (Err(a), Err(b)) => Err(format!("{a}\n  also: {b}")),
                            (judged, left) => judged.and(left),
                        }
                    }),
                )
            })
            .collect();
        handles
            .into_iter()
            .map(|(name, h)| {
                (
                    name,
                    h.join().unwrap_or_else(|_| Err("case thread died".into())),
                )
            })
            .collect()
    });
    let mut failures = Vec::new();
    for (name, result) in &results {
        match result {
            Ok(()) => eprintln!("ok    {name}"),
            Err(e) => {
                eprintln!("FAIL  {name}");
                failures.push(format!("{name}: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} adversarial cases failed:\n{}",
        failures.len(),
        results.len(),
        failures.join("\n\n")
    );
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn the_run_marker_scan_finds_a_process_by_its_environment() {
    // The check above is only as good as this scan: a process carrying a marker is found, and
    // one that has ended is not.
    let id = format!("adversarial-scan-{}", std::process::id());
    let mut child = Command::new("sleep")
        .arg("60")
        .env("FIREDUP_RUN_ID", &id)
        .spawn()
        .unwrap();
    // Bounded: the scan reads /proc, where the new process may not show its environment yet.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut found = processes_of(&id);
    while found.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        found = processes_of(&id);
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(found, vec![child.id()]);
    assert!(processes_of(&id).is_empty());
}
