//! The fault matrix: injected faults through the real binary, one table, one loop. Every case
//! asserts the verdict, its exit code and the signature (or that there is none). The wait is
//! bounded, generously (`HANG_BOUND`, for loaded CI machines): a firedup still running past it is
//! killed and the case fails saying so. No outcome may be silence or a hang; how fast a verdict
//! comes is measured in `benches/`, not asserted here. Cases run in parallel on a few worker threads, each in
//! its own state directory.
//!
//! What is covered elsewhere and not repeated here: the OOM killer with cgroup evidence
//! (`tests/oom.rs`: SIGKILL *with* OOM evidence is `oom_killed`; here SIGKILL without it is
//! `sigkill`), someone else holding `--port` while the server sleeps (`tests/probes.rs`), the plain
//! rotation of a late log and the 5 MB line (`tests/lifecycle.rs`).
//!
//! The log without inotify events: a file written through the upper directory of an overlay mount
//! is seen through the merged mount with no inotify event on the merged path (overlayfs does not
//! forward fsnotify events from its layers), which is what an NFS or FUSE log looks like to
//! firedup. The case runs firedup in a private mount namespace (`unshare -m`) with such an overlay,
//! so nothing stays mounted; it is skipped, saying so, where mounting is not allowed.

use crate::common;
use common::{Env, alive};

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long one firedup run may take before the case counts it as a hang. Generous: it bounds the
/// wait, it is not a speed requirement.
const HANG_BOUND: Duration = Duration::from_secs(60);

/// What one bounded firedup run gave.
#[derive(Debug, Default)]
struct Outcome {
    /// Exit code; None when it ended by a signal.
    code: Option<i32>,
    json: serde_json::Value,
    stdout: String,
    stderr: String,
    took: Duration,
    /// It did not finish within `HANG_BOUND` and was killed.
    hung: bool,
    /// The run launched the server (so a non-ready verdict must have stopped its tree).
    launched: bool,
    /// Wall time from a case-specific event to firedup's exit (the overlay case).
    latency: Option<Duration>,
    /// Peak resident memory of firedup seen while it ran, in KiB (the big-line case).
    peak_rss_kib: Option<u64>,
    /// The case could not set up its fault (reported as a failure).
    setup_error: Option<String>,
}

impl Outcome {
    fn verdict(&self) -> &str {
        self.json["verdict"].as_str().unwrap_or("<no json>")
    }
    fn explain(&self) -> String {
        let cut = |s: &str| -> String {
            let s = s.trim();
            if s.len() > 3000 {
                format!("...{}", &s[s.len() - 3000..])
            } else {
                s.to_string()
            }
        };
        format!(
            "exit {:?} after {:?}{}\n    stdout: {}\n    stderr: {}",
            self.code,
            self.took,
            if self.hung { " (HUNG, killed)" } else { "" },
            cut(&self.stdout),
            cut(&self.stderr)
        )
    }
}

/// firedup's stderr so far, with a way to wait for a phrase in it.
#[derive(Default)]
struct Said {
    text: Mutex<String>,
    more: Condvar,
}

impl Said {
    fn wait_for(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut text = self.text.lock().unwrap();
        while !text.contains(needle) {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            text = self.more.wait_timeout(text, deadline - now).unwrap().0;
        }
        true
    }
}

/// Handed to a case's `during` hook while firedup runs.
struct Live<'a> {
    pid: u32,
    said: &'a Said,
}

type Hook<'a> = Box<dyn FnOnce(&Live) -> Option<Duration> + Send + 'a>;

/// Runs `program args` (firedup itself unless wrapped) with the env's state dir; kills it if it
/// has not exited within `bound`. `during` runs alongside and may return a latency to record.
fn bounded(
    env: &Env,
    wrap: &[String],
    args: &[String],
    bound: Duration,
    during: Option<Hook>,
) -> Outcome {
    let mut cmd = if wrap.is_empty() {
        env.cmd()
    } else {
        let mut c = Command::new(&wrap[0]);
        c.args(&wrap[1..])
            .arg(env!("CARGO_BIN_EXE_firedup"))
            .env("FIREDUP_STATE_DIR", env.state.path())
            .env("FIREDUP_PLAIN", "1")
            .env("RUST_BACKTRACE", "0")
            .current_dir(env.work.path());
        c
    };
    let started = Instant::now();
    let mut child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("firedup starts");
    let pid = child.id();
    let mut out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let said = Said::default();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let mut o = Outcome {
        launched: args.first().map(String::as_str) == Some("run"),
        ..Default::default()
    };
    std::thread::scope(|s| {
        let stdout = s.spawn(move || {
            let mut text = String::new();
            let mut bytes = Vec::new();
            let _ = out.read_to_end(&mut bytes);
            text.push_str(&String::from_utf8_lossy(&bytes));
            text
        });
        let said = &said;
        s.spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                let mut t = said.text.lock().unwrap();
                t.push_str(&line);
                t.push('\n');
                said.more.notify_all();
            }
        });
        s.spawn(move || {
            let status = child.wait();
            let _ = done_tx.send((status, Instant::now()));
        });
        let hook = during.map(|h| s.spawn(move || h(&Live { pid, said })));
        let (status, ended) = match done_rx.recv_timeout(bound) {
            Ok(r) => r,
            Err(_) => {
                o.hung = true;
                // firedup is our child: end it by its pid.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                done_rx.recv().expect("the waiter reports")
            }
        };
        o.took = ended - started;
        o.code = status.ok().and_then(|s| s.code());
        o.stdout = stdout.join().unwrap();
        if let Some(h) = hook {
            if let Some(at) = h.join().unwrap() {
                o.latency = Some(ended.saturating_duration_since(started + at));
            }
        }
    });
    o.stderr = said.text.into_inner().unwrap();
    o.json = serde_json::from_str(o.stdout.trim()).unwrap_or(serde_json::Value::Null);
    o
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// Waits (bounded) until `path` contains `needle`.
fn wait_file_contains(path: &Path, needle: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if std::fs::read_to_string(path).is_ok_and(|t| t.contains(needle)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A shell snippet that waits (at most 10 s) until FILE contains TEXT.
fn sh_wait_for(file: &Path, text: &str) -> String {
    format!(
        "n=0; until grep -q '{text}' '{}' 2>/dev/null || [ $n -ge 200 ]; do n=$((n+1)); sleep 0.05; done",
        file.display()
    )
}

/// A process started by the test (an attached server); killed and reaped when dropped.
struct Helper(std::process::Child);

impl Helper {
    fn sh(script: &str) -> Helper {
        Helper(
            Command::new("sh")
                .args(["-c", script])
                .stdin(Stdio::null())
                .spawn()
                .expect("sh starts"),
        )
    }
    fn pid(&self) -> String {
        self.0.id().to_string()
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reaps a helper as soon as it exits (so that it is never left a zombie that looks alive).
fn reap_in_background(mut h: Helper) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let _ = h.0.wait();
    })
}

type RunFn = Box<dyn Fn(&Env, Duration) -> Result<Outcome, String> + Send + Sync>;
type CheckFn = fn(&Outcome, &Env) -> Result<(), String>;

#[derive(Debug, Clone, Copy)]
enum Exit {
    Code(i64),
    Signal(i64),
}

struct Case {
    name: &'static str,
    verdict: &'static str,
    signature: Option<&'static str>,
    /// Runs the case; `Err` skips it with the reason.
    run: RunFn,
    /// The recorded exit of the server, where the case knows it.
    exit: Option<Exit>,
    check: CheckFn,
    /// A known bug: the case is expected to fail until it is fixed (printed, not failed).
    known_bug: Option<&'static str>,
}

fn no_check(_: &Outcome, _: &Env) -> Result<(), String> {
    Ok(())
}

/// A plain `firedup ARGS` run.
fn firedup(args: &[&str]) -> RunFn {
    let args = strings(args);
    Box::new(move |env, bound| Ok(bounded(env, &[], &args, bound, None)))
}

/// `firedup run --json --ready-line READY -- sh -c SCRIPT` (server mode) plus `extra` flags.
fn server(extra: &[&str], script: &str) -> RunFn {
    let mut args = strings(&["run", "--json", "--ready-line", "READY"]);
    args.extend(strings(extra));
    args.extend(strings(&["--", "sh", "-c", script]));
    Box::new(move |env, bound| Ok(bounded(env, &[], &args, bound, None)))
}

fn check_line(o: &Outcome, number: u64, contains: &str) -> Result<(), String> {
    let line = &o.json["line"];
    if line["number"] != number || !line["text"].as_str().unwrap_or("").contains(contains) {
        return Err(format!(
            "decisive line should be {number} containing {contains:?}, got {line}"
        ));
    }
    Ok(())
}

/// The pid a script announced with `echo "WORD $!"` (or `$$`) in the run's log.
fn announced_pid(o: &Outcome, word: &str) -> Option<u32> {
    let log = std::fs::read_to_string(o.json["log"].as_str()?).ok()?;
    log.lines()
        .find_map(|l| l.strip_prefix(word)?.trim().parse().ok())
}

fn write_exec(env: &Env, name: &str, bytes: &[u8], mode: u32) -> String {
    let p = env.path(name);
    std::fs::write(&p, bytes).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p.display().to_string()
}

fn exec_case(
    name: &'static str,
    make: fn(&Env) -> String,
    known_bug: Option<&'static str>,
) -> Case {
    Case {
        name,
        verdict: "never_started",
        signature: None,
        run: Box::new(move |env, bound| {
            let cmd = make(env);
            let args = strings(&["run", "--json", "--ready-line", "NEVER-PRINTED", "--", &cmd]);
            Ok(bounded(env, &[], &args, bound, None))
        }),
        exit: None,
        check: |o, _| {
            let reason = o.json["reason"].as_str().unwrap_or("");
            if reason.is_empty() {
                return Err("no reason".into());
            }
            Ok(())
        },
        known_bug,
    }
}

fn signal_case(sig: &'static str, number: i64, signature: Option<&'static str>) -> Case {
    Case {
        name: Box::leak(format!("death/signal_{sig}").into_boxed_str()),
        verdict: "killed",
        signature,
        run: server(
            &[],
            &format!("echo 'Loading weights 1/4'; kill -{sig} $$; sleep 5"),
        ),
        exit: Some(Exit::Signal(number)),
        check: no_check,
        known_bug: None,
    }
}

const OOM_LINE: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.11 GiB of which 6.75 MiB is free.";

fn cases() -> Vec<Case> {
    let mut v = vec![
        // ---- exec failures ----
        exec_case(
            "exec/missing_command",
            |_| "no-such-command-firedup-xyz".into(),
            None,
        ),
        exec_case(
            "exec/mode_0644",
            |env| write_exec(env, "server-0644.sh", b"#!/bin/sh\necho READY\n", 0o644),
            None,
        ),
        exec_case(
            "exec/enoexec_garbage",
            |env| {
                write_exec(
                    env,
                    "garbage",
                    b"\x01\x02\x03\xfe\xff\x00garbage(((\x7f\x80",
                    0o755,
                )
            },
            None,
        ),
        exec_case(
            "exec/directory",
            |env| {
                std::fs::create_dir_all(env.path("a-dir")).unwrap();
                env.path("a-dir").display().to_string()
            },
            None,
        ),
        exec_case(
            "exec/missing_interpreter",
            |env| {
                write_exec(
                    env,
                    "needs-interp",
                    b"#!/nonexistent/bin\necho READY\n",
                    0o755,
                )
            },
            None,
        ),
        // ---- death ----
        Case {
            name: "death/at_once",
            verdict: "exited",
            signature: None,
            run: server(&[], "exit 1"),
            exit: Some(Exit::Code(1)),
            check: no_check,
            known_bug: None,
        },
        Case {
            name: "death/mid_load",
            verdict: "exited",
            signature: None,
            run: server(
                &[],
                "echo 'Loading safetensors checkpoint shards: 25% Completed | 1/4'; echo 'Loading safetensors checkpoint shards: 50% Completed | 2/4'; exit 2",
            ),
            exit: Some(Exit::Code(2)),
            check: no_check,
            known_bug: None,
        },
        Case {
            // Reported at once, not at the end of the 20 s hold window.
            name: "death/sigkill_after_ready_inside_hold",
            verdict: "killed",
            signature: Some("sigkill"),
            run: server(&["--hold", "20s"], "echo READY; sleep 0.5; kill -KILL $$"),
            exit: Some(Exit::Signal(9)),
            check: no_check,
            known_bug: None,
        },
        // A shell's 128+N for a child killed by signal N.
        Case {
            name: "death/shell_128+9_for_a_killed_child",
            verdict: "killed",
            signature: Some("sigkill"),
            run: server(&[], "echo working; sleep 9 & kill -9 $!; wait $!"),
            exit: Some(Exit::Code(137)),
            check: no_check,
            known_bug: None,
        },
        Case {
            name: "death/shell_128+11_for_a_crashed_child",
            verdict: "killed",
            signature: Some("segfault"),
            run: server(&[], "echo working; sleep 9 & kill -SEGV $!; wait $!"),
            exit: Some(Exit::Code(139)),
            check: no_check,
            known_bug: None,
        },
        Case {
            // The parent exits 0 before ready and leaves a daemon behind: in server mode the
            // run goes on in the daemon (issue 11, case 7), which here never gets ready and
            // shows no progress: `stalled`, and the daemon (found by the run's FIREDUP_RUN_ID)
            // is stopped with the rest of the run.
            name: "death/parent_exits_leaving_a_daemon",
            verdict: "stalled",
            signature: None,
            run: server(&["--stall", "1s"], "sleep 300 & echo \"daemon $!\"; exit 0"),
            exit: None,
            check: |o, _| match announced_pid(o, "daemon") {
                Some(pid) if alive(pid as u64) => Err(format!(
                    "the daemon {pid} was left running after the verdict"
                )),
                Some(_) => Ok(()),
                None => Err("no daemon pid in the log".into()),
            },
            known_bug: None,
        },
        Case {
            // Ignores SIGTERM: the teardown must escalate to SIGKILL after --grace.
            name: "death/fails_and_ignores_sigterm",
            verdict: "failed",
            signature: Some("cuda_oom"),
            run: server(
                &["--grace", "1s"],
                &format!("trap '' TERM; echo '{OOM_LINE}'; while :; do sleep 1; done"),
            ),
            exit: None,
            check: no_check,
            known_bug: None,
        },
        // ---- hangs ----
        Case {
            name: "hang/busy_loop_is_not_a_stall",
            verdict: "timed_out",
            signature: None,
            run: server(
                &["--stall", "2s", "--timeout", "5s"],
                "echo loading; while :; do :; done",
            ),
            exit: None,
            check: no_check,
            known_bug: None,
        },
        Case {
            name: "hang/sleeping_with_a_child_stalls",
            verdict: "stalled",
            signature: None,
            run: server(
                &["--stall", "1s", "--timeout", "60s"],
                "echo loading; sleep 300 & echo \"worker $!\"; wait",
            ),
            exit: None,
            check: |o, _| match announced_pid(o, "worker") {
                Some(pid) if alive(pid as u64) => Err(format!("worker {pid} left running")),
                Some(_) => Ok(()),
                None => Err("no worker pid in the log".into()),
            },
            known_bug: None,
        },
        Case {
            name: "hang/heartbeat_only_log_stalls",
            verdict: "stalled",
            signature: None,
            run: server(
                &["--stall", "2s", "--timeout", "60s"],
                "exec python3 -u -c 'import time\ni = 0\nwhile True:\n    i += 1\n    t = time.time()\n    print(time.strftime(\"%Y-%m-%d %H:%M:%S\", time.localtime(t)) + \".%03d heartbeat seq=%d\" % (int(t * 1000) % 1000, i))\n    time.sleep(0.1)'",
            ),
            exit: None,
            check: no_check,
            known_bug: None,
        },
        // ---- the log ----
        Case {
            // Attached to a live process whose log never appears: log-grace does not end it
            // while the process lives; its exit does.
            name: "log/missing_while_the_process_lives",
            verdict: "exited",
            signature: None,
            run: Box::new(|env, bound| {
                let h = Helper::sh("sleep 2; exit 3");
                let pid = h.pid();
                let reaper = reap_in_background(h);
                let log = env.path("never.log").display().to_string();
                let args = strings(&[
                    "watch",
                    "--json",
                    "--log",
                    &log,
                    "--pid",
                    &pid,
                    "--log-grace",
                    "500ms",
                    "--ready-line",
                    "READY",
                ]);
                let o = bounded(env, &[], &args, bound, None);
                reaper.join().unwrap();
                Ok(o)
            }),
            exit: None,
            check: |o, _| {
                if o.took < Duration::from_millis(1500) {
                    return Err(format!(
                        "gave up after {:?}, before the process ended",
                        o.took
                    ));
                }
                Ok(())
            },
            known_bug: None,
        },
        Case {
            name: "log/appears_late_without_a_pid",
            verdict: "ready",
            signature: None,
            run: Box::new(|env, bound| {
                let log = env.path("late/dir/server.log");
                let args = strings(&[
                    "watch",
                    "--json",
                    "--log",
                    log.to_str().unwrap(),
                    "--log-grace",
                    "20s",
                    "--ready-line",
                    "READY",
                ]);
                let hook: Hook = Box::new(move |live| {
                    // Create it once firedup has said that it is missing.
                    live.said.wait_for("does not exist", Duration::from_secs(5));
                    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
                    std::fs::write(&log, "booting\nserver READY\n").unwrap();
                    None
                });
                Ok(bounded(env, &[], &args, bound, Some(hook)))
            }),
            exit: None,
            check: |o, _| check_line(o, 2, "READY"),
            known_bug: None,
        },
        Case {
            name: "log/truncated_then_ready",
            verdict: "ready",
            signature: None,
            run: Box::new(|env, bound| {
                let log = env.path("trunc.log");
                let ev = env.path("events.ndjson");
                let script = format!(
                    "echo 'loading a long line before the truncation'; echo second; {}; : > '{}'; echo READY; exec sleep 300",
                    sh_wait_for(&ev, "second"),
                    log.display()
                );
                let args = strings(&[
                    "run",
                    "--json",
                    "--ready-line",
                    "READY",
                    "--log",
                    log.to_str().unwrap(),
                    "--events",
                    ev.to_str().unwrap(),
                    "--",
                    "sh",
                    "-c",
                    &script,
                ]);
                Ok(bounded(env, &[], &args, bound, None))
            }),
            exit: None,
            check: |o, _| {
                check_line(o, 1, "READY")?;
                if !o.stderr.contains("truncated") {
                    return Err("the truncation was not reported".into());
                }
                Ok(())
            },
            known_bug: None,
        },
        Case {
            // The fatal line is the last line of the old file, written just before the rename:
            // the old file is read to its end before the new one.
            name: "log/rotated_with_the_fatal_line_in_the_old_file",
            verdict: "failed",
            signature: Some("cuda_oom"),
            run: Box::new(|env, bound| {
                let log = env.path("rot.log");
                let ev = env.path("events.ndjson");
                std::fs::write(&log, "booting\n").unwrap();
                let l = log.display();
                let h = Helper::sh(&format!(
                    "{}; echo '{OOM_LINE}' >> {l}; mv {l} {l}.1; echo 'restarting' > {l}; exec sleep 300",
                    sh_wait_for(&ev, "booting")
                ));
                let pid = h.pid();
                let args = strings(&[
                    "watch",
                    "--from-start",
                    "--json",
                    "--log",
                    log.to_str().unwrap(),
                    "--pid",
                    &pid,
                    "--events",
                    ev.to_str().unwrap(),
                    "--ready-line",
                    "READY",
                ]);
                let o = bounded(env, &[], &args, bound, None);
                drop(h);
                Ok(o)
            }),
            exit: None,
            check: |o, _| check_line(o, 2, "CUDA out of memory"),
            known_bug: None,
        },
        Case {
            // The server deletes its log right after the fatal line and lives on.
            name: "log/deleted_while_open",
            verdict: "failed",
            signature: Some("cuda_oom"),
            run: Box::new(|env, bound| {
                let log = env.path("deleted.log");
                let ev = env.path("events.ndjson");
                let script = format!(
                    "echo loading; {}; echo '{OOM_LINE}'; rm '{}'; echo 'written after the deletion'; exec sleep 300",
                    sh_wait_for(&ev, "loading"),
                    log.display()
                );
                let args = strings(&[
                    "run",
                    "--json",
                    "--ready-line",
                    "READY",
                    "--log",
                    log.to_str().unwrap(),
                    "--events",
                    ev.to_str().unwrap(),
                    "--",
                    "sh",
                    "-c",
                    &script,
                ]);
                Ok(bounded(env, &[], &args, bound, None))
            }),
            exit: None,
            check: |o, _| check_line(o, 2, "CUDA out of memory"),
            known_bug: None,
        },
        Case {
            name: "log/replaced_by_a_directory",
            verdict: "monitor_error",
            signature: None,
            run: Box::new(|env, bound| {
                let log = env.path("dir.log");
                let ev = env.path("events.ndjson");
                std::fs::write(&log, "loading\n").unwrap();
                let l = log.display();
                let h = Helper::sh(&format!(
                    "{}; rm {l}; mkdir {l}; exec sleep 300",
                    sh_wait_for(&ev, "loading")
                ));
                let pid = h.pid();
                let args = strings(&[
                    "watch",
                    "--from-start",
                    "--json",
                    "--log",
                    log.to_str().unwrap(),
                    "--pid",
                    &pid,
                    "--events",
                    ev.to_str().unwrap(),
                    "--ready-line",
                    "READY",
                ]);
                let o = bounded(env, &[], &args, bound, None);
                drop(h);
                Ok(o)
            }),
            exit: None,
            check: |o, _| {
                if !o.json["reason"]
                    .as_str()
                    .unwrap_or("")
                    .contains("directory")
                {
                    return Err(format!(
                        "reason should name the directory: {}",
                        o.json["reason"]
                    ));
                }
                Ok(())
            },
            known_bug: None,
        },
        Case {
            // No inotify event for the write (see the module comment): the 1 s safety-net poll
            // must find the ready line within about a second.
            name: "log/no_inotify_events_safety_poll",
            verdict: "ready",
            signature: None,
            run: Box::new(no_inotify_run),
            exit: None,
            // Without the poll the line is never seen and the verdict is `timed_out`; how soon it
            // is seen is a speed question, not asserted here.
            check: |o, _| match o.latency {
                Some(_) => Ok(()),
                None => Err("the ready line was never written (setup)".into()),
            },
            known_bug: None,
        },
        // ---- bytes ----
        Case {
            name: "bytes/invalid_utf8_in_the_fatal_line",
            verdict: "failed",
            signature: Some("cuda_oom"),
            run: server(
                &[],
                "echo loading; printf 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB \\377\\376 \\300\\n'; exit 1",
            ),
            exit: None,
            check: |o, _| check_line(o, 2, "\u{fffd}"),
            known_bug: None,
        },
        Case {
            name: "bytes/nul_bytes_inside_the_fatal_line",
            verdict: "failed",
            signature: Some("cuda_error"),
            run: server(
                &[],
                "echo loading; printf 'RuntimeError: CUDA error: an illegal\\000 memory access was encountered\\000\\n'; exit 1",
            ),
            exit: None,
            check: |o, _| {
                check_line(o, 2, "an illegal memory access")?;
                if o.json["line"]["text"].as_str().unwrap_or("").contains('\0') {
                    return Err("a NUL byte was kept".into());
                }
                Ok(())
            },
            known_bug: None,
        },
        Case {
            name: "bytes/100MB_single_line_then_ready",
            verdict: "ready",
            signature: None,
            run: Box::new(|env, bound| {
                let args = strings(&[
                    "run",
                    "--json",
                    "--ready-line",
                    "^READY$",
                    "--",
                    "sh",
                    "-c",
                    "head -c 100000000 /dev/zero | tr '\\0' x; printf '\\nREADY\\n'; exec sleep 300",
                ]);
                let peak = Arc::new(Mutex::new(0u64));
                let seen = peak.clone();
                let hook: Hook = Box::new(move |live| {
                    // VmHWM is firedup's peak resident set so far; read it until firedup ends.
                    let status = format!("/proc/{}/status", live.pid);
                    while let Ok(s) = std::fs::read_to_string(&status) {
                        if let Some(kib) = s
                            .lines()
                            .find_map(|l| l.strip_prefix("VmHWM:"))
                            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                        {
                            *seen.lock().unwrap() = kib;
                        }
                        if s.contains("State:\tZ") {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    None
                });
                let mut o = bounded(env, &[], &args, bound, Some(hook));
                o.peak_rss_kib = Some(*peak.lock().unwrap());
                Ok(o)
            }),
            exit: None,
            check: |o, _| {
                check_line(o, 2, "READY")?;
                match o.peak_rss_kib {
                    Some(k) if k > 256 * 1024 => Err(format!("firedup's memory peaked at {k} KiB")),
                    _ => Ok(()),
                }
            },
            known_bug: None,
        },
        Case {
            name: "bytes/cr_storm_of_1M_progress_updates_then_ready",
            verdict: "ready",
            signature: None,
            run: server(
                &["--timeout", "120s"],
                "awk 'BEGIN { for (i = 1; i <= 1000000; i++) printf \"Capturing batches %d/1000000\\r\", i; printf \"\\nREADY\\n\" }'; exec sleep 300",
            ),
            exit: None,
            check: |o, _| check_line(o, 2, "READY"),
            known_bug: None,
        },
        // ---- the port ----
        Case {
            // The test holds the port; the server's own bind then fails.
            name: "port/taken_then_the_server_fails_to_bind",
            verdict: "failed",
            signature: Some("port_in_use"),
            run: Box::new(|env, bound| {
                let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let port = squatter.local_addr().unwrap().port().to_string();
                let script = format!(
                    "echo 'starting on port {port}'; exec python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", {port})); s.listen()'"
                );
                let args = strings(&[
                    "run",
                    "--json",
                    "--port",
                    &port,
                    "--ready-line",
                    "READY",
                    "--",
                    "sh",
                    "-c",
                    &script,
                ]);
                let o = bounded(env, &[], &args, bound, None);
                drop(squatter);
                Ok(o)
            }),
            exit: None,
            check: |o, _| {
                if !o.json["line"]["text"]
                    .as_str()
                    .unwrap_or("")
                    .contains("Address already in use")
                {
                    return Err(format!("decisive line: {}", o.json["line"]));
                }
                Ok(())
            },
            known_bug: None,
        },
        // ---- judgement ----
        Case {
            name: "judge/fatal_line_then_recovery_text_and_ready",
            verdict: "failed",
            signature: Some("cuda_oom"),
            run: server(
                &[],
                &format!(
                    "echo loading; echo '{OOM_LINE}'; echo 'Recovered: retrying with a smaller batch'; echo 'all good now'; echo READY; exec sleep 300"
                ),
            ),
            exit: None,
            check: |o, _| check_line(o, 2, "CUDA out of memory"),
            known_bug: None,
        },
        Case {
            // firedup is SIGKILLed inside the settle window of a failure; `watch RUN_ID` then
            // reaches the same verdict from the log and the exit record.
            name: "reattach/sigkill_in_the_settle_window_then_watch",
            verdict: "failed",
            signature: Some("cuda_oom"),
            run: Box::new(sigkill_in_settle_window),
            exit: None,
            check: |o, _| check_line(o, 2, "CUDA out of memory"),
            known_bug: None,
        },
        Case {
            name: "watch/firedup_events_file_cannot_be_created",
            verdict: "usage",
            signature: None,
            run: firedup(&[
                "run",
                "--json",
                "--ready-line",
                "READY",
                "--events",
                "/nonexistent-dir/ev",
                "--",
                "sh",
                "-c",
                "echo READY; exec sleep 300",
            ]),
            exit: None,
            check: |o, _| {
                if !o.stderr.contains("--events") {
                    return Err("the error should name --events".into());
                }
                Ok(())
            },
            known_bug: None,
        },
    ];
    // firedup started as a background job of a script (`firedup run ... &`): SIGINT and SIGQUIT
    // are ignored in its environment; the server must still start with default dispositions.
    v.push(Case {
        name: "death/signal_INT_with_firedup_run_as_a_background_job",
        verdict: "killed",
        signature: Some("terminated"),
        run: Box::new(|env, bound| {
            let wrap = strings(&["sh", "-c", "\"$@\" & wait $!", "sh"]);
            let args = strings(&[
                "run",
                "--json",
                "--ready-line",
                "READY",
                "--",
                "sh",
                "-c",
                "echo 'Loading weights 1/4'; kill -INT $$; sleep 30",
            ]);
            Ok(bounded(env, &wrap, &args, bound, None))
        }),
        exit: Some(Exit::Signal(2)),
        check: no_check,
        known_bug: None,
    });
    for (sig, n, signature) in [
        ("HUP", 1, Some("terminated")),
        ("INT", 2, Some("terminated")),
        ("QUIT", 3, None),
        ("ILL", 4, Some("illegal_instruction")),
        ("ABRT", 6, Some("abort")),
        ("FPE", 8, None),
        ("KILL", 9, Some("sigkill")),
        ("USR1", 10, None),
        ("SEGV", 11, Some("segfault")),
        ("PIPE", 13, None),
        ("TERM", 15, Some("terminated")),
    ] {
        v.push(signal_case(sig, n, signature));
    }
    v
}

/// The overlay case: firedup in a private mount namespace follows `merged/server.log`; the ready
/// line is appended through the upper directory, which gives no inotify event on the merged path.
fn no_inotify_run(env: &Env, bound: Duration) -> Result<Outcome, String> {
    let root = env.work.path().join("ovl");
    for d in ["lower", "upper", "work", "merged"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        root.join("lower").display(),
        root.join("upper").display(),
        root.join("work").display()
    );
    let merged = root.join("merged");
    let mount = format!(
        "mount -t overlay overlay -o {opts} {} && exec \"$@\"",
        merged.display()
    );
    let probe = Command::new("unshare")
        .args(["-m", "sh", "-c", &mount, "sh", "true"])
        .stderr(Stdio::piped())
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            return Err(format!(
                "cannot mount an overlay in a private mount namespace here: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        Err(e) => return Err(format!("no unshare: {e}")),
    }
    let upper_log = root.join("upper/server.log");
    std::fs::write(&upper_log, "loading\n").unwrap();
    let ev = env.path("events.ndjson");
    let wrap = strings(&["unshare", "-m", "sh", "-c", &mount, "sh"]);
    let args = strings(&[
        "watch",
        "--from-start",
        "--json",
        "--log",
        merged.join("server.log").to_str().unwrap(),
        "--events",
        ev.to_str().unwrap(),
        "--ready-line",
        "READY",
        "--stall",
        "off",
        "--timeout",
        "20s",
    ]);
    let started = Instant::now();
    let hook: Hook = Box::new(move |_live| {
        // Once firedup has read the first line (so it follows the file), and a little more
        // (so the write does not coincide with a wake-up it had anyway)...
        if !wait_file_contains(&ev, "\"text\":\"loading\"", Duration::from_secs(5)) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(300));
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&upper_log)
            .unwrap();
        let at = started.elapsed();
        f.write_all(b"server READY\n").unwrap();
        Some(at)
    });
    Ok(bounded(env, &wrap, &args, bound, Some(hook)))
}

/// Starts a failing server, SIGKILLs firedup as soon as the fatal line is in its events (inside
/// the settle window), then judges the run again with `firedup watch RUN_ID`.
fn sigkill_in_settle_window(env: &Env, bound: Duration) -> Result<Outcome, String> {
    let ev = env.path("events.ndjson");
    let script = format!(
        "echo loading; {}; echo '{OOM_LINE}'; exec sleep 300",
        sh_wait_for(&ev, "loading")
    );
    let args = strings(&[
        "run",
        "--json",
        "--ready-line",
        "READY",
        "--events",
        ev.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let ev2 = ev.clone();
    let hook: Hook = Box::new(move |live| {
        if wait_file_contains(&ev2, "cuda_oom", Duration::from_secs(5)) {
            unsafe { libc::kill(live.pid as i32, libc::SIGKILL) };
        }
        None
    });
    let first = bounded(env, &[], &args, bound, Some(hook));
    if first.code.is_some() {
        let mut first = first;
        first.setup_error = Some("firedup was not killed in the settle window".into());
        return Ok(first);
    }
    let runs: Vec<String> = std::fs::read_dir(env.state.path().join("runs"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    assert_eq!(runs.len(), 1, "one run: {runs:?}");
    let mut o = bounded(
        env,
        &[],
        &strings(&["watch", "--json", &runs[0]]),
        bound,
        None,
    );
    // `watch` is an observer: it leaves the server as it is (clean_up stops it).
    o.launched = false;
    Ok(o)
}

fn code_of(verdict: &str) -> i32 {
    match verdict {
        "ready" | "succeeded" => 0,
        "failed" => 1,
        "usage" => 2,
        "exited" => 3,
        "killed" => 4,
        "never_started" => 5,
        "stalled" => 6,
        "timed_out" => 124,
        "monitor_error" => 7,
        v => panic!("unknown verdict {v}"),
    }
}

/// Checks one finished case; returns what is wrong.
fn judge_case(case: &Case, env: &Env, o: &Outcome) -> Vec<String> {
    let mut wrong = Vec::new();
    if o.hung {
        wrong.push(format!(
            "firedup did not exit within {HANG_BOUND:?}: killed (a hang)"
        ));
        return wrong;
    }
    if let Some(e) = &o.setup_error {
        wrong.push(format!("setup: {e}"));
    }
    let code = code_of(case.verdict);
    if o.code != Some(code) {
        wrong.push(format!("exit code {:?}, want {code}", o.code));
    }
    if case.verdict != "usage" {
        if o.verdict() != case.verdict {
            wrong.push(format!("verdict {}, want {}", o.verdict(), case.verdict));
        }
        let sig = o.json["signature"].as_str();
        if sig != case.signature {
            wrong.push(format!("signature {sig:?}, want {:?}", case.signature));
        }
        if o.json["reason"].as_str().unwrap_or("").is_empty() {
            wrong.push("no reason given".into());
        }
    }
    if o.stderr.contains("panicked") {
        wrong.push("firedup panicked".into());
    }
    match case.exit {
        Some(Exit::Code(c)) if o.json["exit"]["code"] != c => {
            wrong.push(format!("exit should be code {c}: {}", o.json["exit"]))
        }
        Some(Exit::Signal(n)) if o.json["exit"]["signal"] != n => {
            wrong.push(format!("exit should be signal {n}: {}", o.json["exit"]))
        }
        _ => {}
    }
    if let Err(e) = (case.check)(o, env) {
        wrong.push(e);
    }
    // A launched server is stopped on every verdict but ready.
    if o.launched && case.verdict != "ready" {
        if let Some(pid) = o.json["pid"].as_u64() {
            if alive(pid) {
                wrong.push(format!("the server {pid} was left running"));
            }
        }
    }
    wrong
}

/// Stops whatever the case's runs left (ready servers, or anything after a hang).
fn clean_up(env: &Env) {
    let Ok(runs) = std::fs::read_dir(env.state.path().join("runs")) else {
        return;
    };
    for run in runs.filter_map(|e| e.ok()) {
        let id = run.file_name().to_string_lossy().into_owned();
        let _ = env
            .cmd()
            .args(["stop", "--grace", "1s", &id])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

#[test]
fn fault_matrix() {
    let cases = cases();
    assert!(cases.len() >= 30, "{} cases", cases.len());
    let mut names: Vec<&str> = cases.iter().map(|c| c.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), cases.len(), "case names are unique");

    // FIREDUP_FAULTS=WORD runs only the cases whose name contains WORD (while debugging one).
    let only = std::env::var("FIREDUP_FAULTS").unwrap_or_default();
    let queue = Mutex::new(
        cases
            .into_iter()
            .filter(|c| c.name.contains(&only))
            .collect::<VecDeque<_>>(),
    );
    let results = Mutex::new(Vec::new());
    let workers = std::env::var("FIREDUP_FAULT_WORKERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let Some(case) = queue.lock().unwrap().pop_front() else {
                        break;
                    };
                    let env = Env::new();
                    let result = match (case.run)(&env, HANG_BOUND) {
                        Ok(o) => {
                            let wrong = judge_case(&case, &env, &o);
                            Ok((o, wrong))
                        }
                        Err(skip) => Err(skip),
                    };
                    clean_up(&env);
                    results.lock().unwrap().push((case, result));
                }
            });
        }
    });

    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(c, _)| c.name);
    let mut failures = Vec::new();
    for (case, result) in &results {
        match result {
            Err(skip) => eprintln!("SKIP {:<55} {skip}", case.name),
            Ok((o, wrong)) => {
                let status = match (wrong.is_empty(), case.known_bug) {
                    (true, None) => "ok",
                    (true, Some(_)) => "ok (known bug no longer shows: remove the mark)",
                    (false, Some(_)) => "KNOWN BUG",
                    (false, None) => "FAIL",
                };
                eprintln!(
                    "{status:<9} {:<55} {:>13} {:<16} {:>6.2}s",
                    case.name,
                    o.verdict(),
                    o.json["signature"].as_str().unwrap_or("-"),
                    o.took.as_secs_f64(),
                );
                if let Some(bug) = case.known_bug {
                    if !wrong.is_empty() {
                        eprintln!("          {bug}: {}", wrong.join("; "));
                    }
                } else if !wrong.is_empty() {
                    failures.push(format!(
                        "{}: {}\n    {}",
                        case.name,
                        wrong.join("; "),
                        o.explain()
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} fault case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
