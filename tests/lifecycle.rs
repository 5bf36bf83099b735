//! The run's life around the verdict: re-attaching after firedup dies, `--then`, `--hold`, `logs`,
//! the run directory's contents and permissions, and awkward log content.

use crate::common;
use common::{Env, alive};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

fn only_run_id(env: &Env) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let runs: Vec<_> = std::fs::read_dir(env.state.path().join("runs"))
            .map(|d| d.filter_map(|e| e.ok()).collect())
            .unwrap_or_default();
        if let Some(e) = runs.iter().find(|e| e.path().join("process.json").exists()) {
            return e.file_name().to_string_lossy().into_owned();
        }
        assert!(Instant::now() < deadline, "no run appeared");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn firedup_killed_mid_watch_then_watch_run_id_reaches_the_verdict() {
    let env = Env::new();
    let gate = env.path("gate");
    let script = format!(
        "echo loading; while [ ! -e {} ]; do sleep 0.05; done; echo 'server READY'; exec sleep 300",
        gate.display()
    );
    let mut child = env
        .cmd()
        .args([
            "run",
            "--json",
            "--ready-line",
            "READY",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .spawn()
        .unwrap();
    let id = only_run_id(&env);
    child.kill().unwrap(); // SIGKILL firedup, not the server
    child.wait().unwrap();
    std::fs::write(&gate, "").unwrap();
    let r = env.fd("watch").json().arg(&id).output();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    let pid = r.json["pid"].as_u64().unwrap();
    assert!(alive(pid), "the server outlived firedup");
    let s = env.fd("stop").arg(&id).output();
    assert_eq!(s.code, 0, "{}", s.explain());
    assert!(!alive(pid));
    // The log is complete: both lines the server wrote are there.
    let log = std::fs::read_to_string(env.state.path().join("runs").join(&id).join("output.log"))
        .unwrap();
    assert_eq!(log, "loading\nserver READY\n");
}

#[test]
fn a_job_that_ended_while_firedup_was_gone_is_judged_from_its_exit_record() {
    let env = Env::new();
    let gate = env.path("gate");
    let script = format!(
        "echo working; while [ ! -e {} ]; do sleep 0.05; done; exit 3",
        gate.display()
    );
    let mut child = env
        .cmd()
        .args([
            "run", "--json", "--until", "exit", "--", "sh", "-c", &script,
        ])
        .spawn()
        .unwrap();
    let id = only_run_id(&env);
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::write(&gate, "").unwrap();
    let exit_json = env.state.path().join("runs").join(&id).join("exit.json");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !exit_json.exists() {
        assert!(
            Instant::now() < deadline,
            "the supervisor never recorded the exit"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let r = env.fd("watch").json().until("exit").arg(&id).output();
    assert_eq!((r.code, r.verdict()), (3, "exited"), "{}", r.explain());
    assert_eq!(r.json["exit"]["code"], 3);
}

#[test]
fn then_runs_after_ready_with_the_run_in_its_env_and_stops_the_server() {
    let env = Env::new();
    let r = env
        .run()
        .ready_line("READY")
        .opt(
            "then",
            "echo \"pid=$FIREDUP_PID run=$FIREDUP_RUN_ID\" > then.out; exit 7",
        )
        .shell("echo READY; exec sleep 300")
        .output();
    // The exit code is the verdict's (issue 29: `exit 3` read as `exited`); CMD's status is
    // said beside it.
    assert_eq!(r.code, 0, "exit with the verdict's code: {}", r.explain());
    assert!(
        r.stdout.contains("FAILED: exit code 7"),
        "the then: line says CMD's status: {}",
        r.explain()
    );
    // Under --json: CMD's status is `then.exit_code`, and stderr says it failed.
    let j = env
        .run()
        .json()
        .ready_line("READY")
        .opt("then", "exit 3")
        .shell("echo READY; exec sleep 300")
        .output();
    assert_eq!((j.code, j.verdict()), (0, "ready"), "{}", j.explain());
    assert_eq!(j.json["then"]["exit_code"], 3, "{}", j.explain());
    assert!(
        j.stderr
            .contains("--then 'exit 3' failed with exit code 3; firedup exits 0"),
        "{}",
        j.explain()
    );
    let out = std::fs::read_to_string(env.path("then.out")).unwrap();
    let pid: u64 = out
        .split("pid=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(out.contains("run=sh-"), "{out}");
    assert!(!alive(pid), "the server is stopped after --then");
    assert!(r.stdout.contains("teardown: stopped"), "{}", r.stdout);
}

#[test]
fn hold_catches_a_crash_after_ready() {
    let env = Env::new();
    let r = env
        .run()
        .json()
        .opt("hold", "5s")
        .ready_line("READY")
        .shell("echo READY; sleep 0.3; kill -SEGV $$")
        .output();
    assert_eq!(
        (r.code, r.verdict(), r.signature()),
        (4, "killed", Some("segfault")),
        "{}",
        r.explain()
    );
    let r = env
        .run()
        .json()
        .opt("hold", "500ms")
        .ready_line("READY")
        .shell("echo READY; exec sleep 300")
        .output();
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    env.fd("stop").arg(r.run_id()).output();
}

#[test]
fn run_directory_is_private_and_secrets_are_redacted() {
    let env = Env::new();
    let r = env
        .run()
        .json()
        .until("exit")
        .opt("env", "HF_TOKEN=hf_supersecret")
        .opt("env", "MODE=fast")
        .shell("test ${#HF_TOKEN} -eq 14 && echo \"mode $MODE\"")
        .output();
    assert_eq!(
        r.verdict(),
        "succeeded",
        "the command sees the real values: {}",
        r.explain()
    );
    let dir = env.state.path().join("runs").join(r.run_id());
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let meta = std::fs::read_to_string(dir.join("meta.json")).unwrap();
    assert!(!meta.contains("hf_supersecret"), "{meta}");
    assert!(
        meta.contains("<redacted>") && meta.contains("fast"),
        "{meta}"
    );
    assert!(!r.stdout.contains("hf_supersecret") && !r.stderr.contains("hf_supersecret"));
}

#[test]
fn logs_prints_the_log_and_meaningful_drops_noise_and_redraws() {
    let env = Env::new();
    let r = env
        .run()
        .json()
        .until("exit")
        .shell("echo start; echo; printf 'shards 10%%\\rshards 50%%\\rshards 100%%\\n'; echo done")
        .output();
    assert_eq!(r.verdict(), "succeeded", "{}", r.explain());
    // The log as it is: its blank line kept and the redrawn line one line, so that line N here
    // is the verdict's line N (issue 29: blank lines were dropped, the numbers shifted).
    let all = env.fd("logs").arg(r.run_id()).output();
    assert_eq!(all.code, 0);
    assert_eq!(
        all.stdout,
        "start\n\nshards 10%\rshards 50%\rshards 100%\ndone\n"
    );
    // The progress bar in its last state (it was its first, 10%), no blank lines.
    let m = env.fd("logs").flag("meaningful").arg(r.run_id()).output();
    assert_eq!(
        m.stdout, "start\nshards 100%\ndone\n",
        "one line per progress bar, no blank lines"
    );
}

#[test]
fn awkward_log_content_is_read_without_loss_or_panic() {
    let env = Env::new();
    // Invalid UTF-8, NUL bytes, ANSI colour, a 5 MB line, then the ready line.
    let r = env.run().json().ready_line("^READY$").shell("printf 'bad \\377\\376 utf8\\n'; printf 'nul\\000byte\\n'; printf '\\033[32mREADY\\033[0m'; head -c 5000000 /dev/zero | tr '\\0' x; printf '\\nREADY\\n'; exec sleep 300").output();
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    assert_eq!(r.json["line"]["number"], 4);
    env.fd("stop").arg(r.run_id()).output();
}

#[test]
fn watch_follows_a_log_that_appears_late_and_is_rotated() {
    let env = Env::new();
    let log = env.path("late/server.log");
    let events = env.path("events.ndjson");
    // Each step waits (bounded) until firedup has seen the one before, whatever the load: the log
    // missing, then its first line, and only then the rotation.
    let wait_for = |needle: &str| {
        format!(
            "i=0; until grep -q '{needle}' {e} 2>/dev/null || [ $i -ge 600 ]; do sleep 0.1; i=$((i+1)); done",
            e = events.display()
        )
    };
    let script = format!(
        "{missing}; mkdir -p {d}; echo booting > {l}; {booting}; mv {l} {l}.1; echo 'now READY' > {l}; sleep 300",
        missing = wait_for("Missing"),
        booting = wait_for("booting"),
        d = log.parent().unwrap().display(),
        l = log.display()
    );
    let mut server = std::process::Command::new("sh")
        .args(["-c", &script])
        .spawn()
        .unwrap();
    let pid = server.id().to_string();
    let r = env
        .fd("watch")
        .json()
        .opt("log", log.to_str().unwrap())
        .opt("pid", &pid)
        .ready_line("READY")
        .opt("events", events.to_str().unwrap())
        .output();
    server.kill().unwrap();
    server.wait().unwrap();
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    assert!(
        r.stderr.contains("rotated") || r.stderr.contains("does not exist"),
        "{}",
        r.stderr
    );
}

#[test]
fn an_attached_pid_that_dies_is_seen_at_once() {
    let env = Env::new();
    let log = env.path("attached.log");
    std::fs::write(&log, "starting\n").unwrap();
    let mut server = std::process::Command::new("sleep")
        .arg("0.5")
        .spawn()
        .unwrap();
    let pid = server.id().to_string();
    let reaper = std::thread::spawn(move || server.wait());
    let r = env
        .fd("watch")
        .json()
        .flag("from-start")
        .opt("log", log.to_str().unwrap())
        .opt("pid", &pid)
        .ready_line("READY")
        .output();
    reaper.join().unwrap().unwrap();
    assert_eq!((r.code, r.verdict()), (3, "exited"), "{}", r.explain());
}

#[test]
fn events_stream_is_ndjson() {
    let env = Env::new();
    let events = env.path("events.ndjson");
    let r = env
        .run()
        .json()
        .until("exit")
        .opt("events", events.to_str().unwrap())
        .shell("echo one; echo two")
        .output();
    assert_eq!(r.verdict(), "succeeded");
    let text = std::fs::read_to_string(&events).unwrap();
    let kinds: Vec<String> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(
        kinds.contains(&"line".to_string()) && kinds.contains(&"exited".to_string()),
        "{kinds:?}"
    );
    assert_eq!(kinds.last().map(String::as_str), Some("verdict"));
}

#[test]
fn watch_by_log_alone_finds_the_process_writing_it() {
    let env = Env::new();
    let log = env.path("writer.log");
    let gate = env.path("gate");
    let script = format!(
        "exec >> {}; echo starting; while [ ! -e {} ]; do sleep 0.05; done; exit 9",
        log.display(),
        gate.display()
    );
    let mut server = std::process::Command::new("sh")
        .args(["-c", &script])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while common::file_text(&log).is_empty() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut watch = env
        .cmd()
        .args([
            "watch",
            "--json",
            "--from-start",
            "--log",
            log.to_str().unwrap(),
            "--ready-line",
            "READY",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Open the gate only once firedup says which process it attached to.
    use std::io::BufRead;
    let mut stderr = std::io::BufReader::new(watch.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("which writes") {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "firedup ended without naming the writer: {said}"
        );
        said.push_str(&line);
    }
    std::fs::write(&gate, "").unwrap();
    server.wait().unwrap();
    let out = watch.wait_with_output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["verdict"], "exited", "{json} {said}");
    assert_eq!(json["pid"].as_u64(), Some(server.id() as u64));
}

#[test]
fn the_log_is_byte_identical_to_what_the_server_wrote_across_firedup_crashes() {
    let env = Env::new();
    // 4 MB of arbitrary bytes (a fixed xorshift stream: NULs, \r, invalid UTF-8, everything).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let data: Vec<u8> = (0..4_000_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    let expected = env.path("expected.bin");
    std::fs::write(&expected, &data).unwrap();
    let writer = format!(
        "import sys, time\nd = open({:?}, 'rb').read()\nfor i in range(0, len(d), 100000):\n    sys.stdout.buffer.write(d[i:i+100000]); sys.stdout.flush(); time.sleep(0.03)\nsys.stdout.write('\\nREADY\\n'); sys.stdout.flush(); time.sleep(300)\n",
        expected.display().to_string()
    );
    std::fs::write(env.path("writer.py"), writer).unwrap();
    let writer = env.path("writer.py").display().to_string();
    let mut first = env
        .cmd()
        .args([
            "run",
            "--json",
            "--ready-line",
            "^READY$",
            "--",
            "python3",
            &writer,
        ])
        .spawn()
        .unwrap();
    let id = only_run_id(&env);
    // firedup dies twice while the server writes; the log is the server's, not firedup's.
    first.kill().unwrap();
    first.wait().unwrap();
    let mut second = env.cmd().args(["watch", &id]).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    second.kill().unwrap();
    second.wait().unwrap();
    let r = env.fd("watch").json().arg(&id).output();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    let log = std::fs::read(env.state.path().join("runs").join(&id).join("output.log")).unwrap();
    let mut want = data.clone();
    want.extend_from_slice(b"\nREADY\n");
    assert_eq!(log.len(), want.len(), "bytes lost or added");
    assert!(log == want, "the log differs from what the server wrote");
    let s = env.fd("stop").arg(&id).output();
    assert_eq!(s.code, 0, "{}", s.explain());
}

/// Issue 15: `firedup stop` of a server whose tree was SIGSTOPped (a debugger, `kill -STOP`): its
/// SIGTERM is sent with SIGCONT, so the tree ends by the SIGTERM; before, the SIGTERM stayed
/// pending and the stop waited the whole grace, then needed SIGKILL.
#[test]
fn stop_ends_a_stopped_server_by_its_sigterm() {
    let env = Env::new();
    let r = env
        .run()
        .json()
        .ready_line("READY")
        .shell("echo READY; sleep 300 & wait")
        .output();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    let pid = r.json["pid"].as_u64().expect("a pid");
    // The whole group stopped (the server is its group's leader).
    let group = rustix::process::Pid::from_raw(pid as i32).expect("a pid");
    rustix::process::kill_process_group(group, rustix::process::Signal::STOP).unwrap();
    let s = env.fd("stop").opt("grace", "60s").arg(r.run_id()).output();
    assert_eq!(s.code, 0, "{}", s.explain());
    let said = format!("{}{}", s.stdout, s.stderr);
    assert!(said.contains("with SIGTERM in"), "{said}");
    assert!(
        !said.contains("SIGKILL"),
        "the stopped tree needed SIGKILL: {said}"
    );
    assert!(!alive(pid));
}

/// The tests' own hygiene (`tests/common`, `Env`'s drop): a server a test saw `ready` and left
/// running is stopped when the test's environment goes.
#[test]
fn a_server_a_test_left_running_is_stopped_with_its_environment() {
    let env = Env::new();
    let pid_file = env.path("server.pid");
    let r = env
        .run()
        .json()
        .opt("ready-line", "serving")
        .shell(&format!(
            "echo $$ > '{}'; echo serving; exec sleep 300",
            pid_file.display()
        ))
        .output();
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    let pid: u64 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid), "the server runs on after ready");
    drop(env);
    // `stop` verified it gone; its supervisor reaps it: waited for, bounded.
    common::bounded::wait_for("the server gone", Duration::from_secs(60), || {
        (!alive(pid)).then_some(())
    });
}
