//! The same scenarios on both hosts: each test body below runs once on this machine and once
//! over SSH (a real sshd, tests/common/sshd.rs; the "remote" host is this machine reached as
//! another login), so `run`, `watch`, `stop` and a matrix cell, written once against the `Host`
//! seam, are held to one behaviour whatever the host. Only how firedup is invoked differs
//! (`--host fdtest`) and where the run directories are.

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::sshd::Sshd;
use common::{Env, Run};

/// Where a scenario runs: here, or on the sshd's host.
struct On {
    env: Env,
    sshd: Option<Sshd>,
}

impl On {
    fn local() -> On {
        On {
            env: Env::new(),
            sshd: None,
        }
    }

    fn ssh() -> On {
        On {
            env: Env::new(),
            sshd: Some(Sshd::start()),
        }
    }

    /// Runs `firedup SUBCOMMAND [--host fdtest] REST...`.
    fn fd(&self, args: &[&str]) -> Run {
        let mut all: Vec<&str> = vec![args[0]];
        let mut vars = Vec::new();
        let config;
        let remote_state = self.env.path("remote-state");
        if let Some(sshd) = &self.sshd {
            all.extend(["--host", "fdtest"]);
            config = sshd.config_path();
            vars.push(("FIREDUP_SSH_CONFIG", config.to_str().unwrap()));
            vars.push(("FIREDUP_REMOTE_STATE_DIR", remote_state.to_str().unwrap()));
        }
        all.extend(&args[1..]);
        self.env.cmd_json(&all, &vars)
    }

    /// Starts `firedup SUBCOMMAND [--host fdtest] REST...` with its output captured.
    fn spawn(&self, args: &[&str]) -> std::process::Child {
        let mut c = self.env.cmd();
        c.arg(args[0]);
        if let Some(sshd) = &self.sshd {
            c.args(["--host", "fdtest"])
                .env("FIREDUP_SSH_CONFIG", sshd.config_path())
                .env("FIREDUP_REMOTE_STATE_DIR", self.env.path("remote-state"));
        }
        c.args(&args[1..])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// The runs directory on whichever host it is (both are this machine).
    fn runs_root(&self) -> PathBuf {
        match &self.sshd {
            Some(_) => self.env.path("remote-state").join("runs"),
            None => self.env.state.path().join("runs"),
        }
    }

    /// The run directory of `id`.
    fn run_dir(&self, id: &str) -> PathBuf {
        self.runs_root().join(id)
    }

    fn script(&self, name: &str, body: &str) -> String {
        self.env.script(name, body)
    }
}

/// Every scenario, as a test on each host.
macro_rules! on_both_hosts {
    ($($scenario:ident),* $(,)?) => {
        mod local {
            $(#[test] fn $scenario() { super::$scenario(&super::On::local()) })*
        }
        mod ssh {
            $(#[test] fn $scenario() { super::$scenario(&super::On::ssh()) })*
        }
    };
}

on_both_hosts!(
    a_ready_server_keeps_running_until_stop_which_leaves_nothing,
    a_failure_is_named_and_the_server_stopped,
    keep_leaves_a_failed_server_running,
    a_job_runs_to_success,
    a_crash_after_ready_is_what_watch_run_id_reports,
    watch_by_log_reaches_the_verdict_of_what_writes_it,
    stopping_an_unknown_run_is_one_sentence_and_exit_2,
    a_matrix_cell_is_benched_and_torn_down_clean,
    ctrl_c_during_run_stops_the_server_and_exits_130,
);

fn a_ready_server_keeps_running_until_stop_which_leaves_nothing(on: &On) {
    let server = on.script(
        "server.sh",
        "echo 'Load weight begin'; sleep 0.2; echo 'fired up and ready to roll'; sleep 60",
    );
    let r = on.fd(&[
        "run",
        "--json",
        "--ready-line",
        "ready to roll",
        "--",
        &server,
    ]);
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert_eq!(r.json["server_running"], true, "{}", r.explain());
    assert_eq!(
        r.json["host"].as_str(),
        on.sshd.as_ref().map(|_| "fdtest"),
        "{}",
        r.explain()
    );
    let id = r.run_id().to_string();
    let pid = r.json["pid"].as_u64().unwrap();
    assert!(common::alive(pid), "the server is not running");
    let stop = on.fd(&["stop", &id, "--grace", "2s"]);
    assert_eq!(stop.code, 0, "{}", stop.explain());
    assert!(
        stop.stdout.starts_with(&format!("{id}: stopped ")) && stop.stdout.contains("none left"),
        "{}",
        stop.explain()
    );
    assert!(!common::alive(pid), "still running after stop");
    // Watched again: firedup's stop is how it ended, named as firedup's (issue 23, item 4), at
    // the times recorded while it ran (item 8). Not `ready` (exit 0): the server is gone.
    let w = on.fd(&["watch", "--json", &id]);
    assert_eq!(
        (w.code, w.verdict(), w.signature()),
        (4, "killed", Some("terminated")),
        "{}",
        w.explain()
    );
    let reason = w.json["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("stopped it") && !reason.contains("someone else"),
        "{reason}"
    );
    assert_eq!(w.json["ready_s"], r.json["ready_s"], "{}", w.explain());
    assert_eq!(w.json["timeline"], r.json["timeline"], "{}", w.explain());
    assert_eq!(w.json["server_running"], false, "{}", w.explain());
    // Stopping it again finds nothing, and says so.
    let again = on.fd(&["stop", &id]);
    assert_eq!(again.code, 0, "{}", again.explain());
    assert!(
        again.stdout.contains("nothing left to stop"),
        "{}",
        again.explain()
    );
}

fn a_failure_is_named_and_the_server_stopped(on: &On) {
    let server = on.script(
        "oom.sh",
        "echo 'Capture cuda graph begin'; echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.'; sleep 60",
    );
    let r = on.fd(&[
        "run",
        "--json",
        "--ready-line",
        "never",
        "--grace",
        "2s",
        "--",
        &server,
    ]);
    assert_eq!((r.code, r.verdict()), (1, "failed"), "{}", r.explain());
    assert_eq!(r.signature(), Some("cuda_oom"), "{}", r.explain());
    assert_eq!(r.json["server_running"], false, "{}", r.explain());
    let pid = r.json["pid"].as_u64().unwrap();
    assert!(!common::alive(pid), "the failed server was not stopped");
}

fn keep_leaves_a_failed_server_running(on: &On) {
    let server = on.script("fatal.sh", "echo 'FATAL: config is wrong'; sleep 60");
    let r = on.fd(&[
        "run",
        "--keep",
        "--ready-line",
        "never",
        "--fail-line",
        "FATAL",
        "--",
        &server,
    ]);
    assert_eq!(r.code, 1, "{}", r.explain());
    assert!(
        r.stdout.contains("kept running (--keep)"),
        "{}",
        r.explain()
    );
    let runs = on.fd(&["ps", "--json"]);
    let id = runs.json[0]["run_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let pid = runs.json[0]["pid"].as_u64().unwrap_or_default();
    assert!(
        common::alive(pid),
        "--keep did not keep it: {}",
        runs.explain()
    );
    let stop = on.fd(&["stop", &id, "--grace", "2s"]);
    assert_eq!(stop.code, 0, "{}", stop.explain());
    assert!(!common::alive(pid));
}

fn a_job_runs_to_success(on: &On) {
    let job = on.script("job.sh", "echo 'step 1'; echo 'step 2'; exit 0");
    let r = on.fd(&["run", "--json", "--until", "exit", "--", &job]);
    assert_eq!((r.code, r.verdict()), (0, "succeeded"), "{}", r.explain());
    assert_eq!(r.json["exit"]["code"], 0, "{}", r.explain());
    assert_eq!(r.json["server_running"], false, "{}", r.explain());
}

fn a_crash_after_ready_is_what_watch_run_id_reports(on: &On) {
    // The server crashes when the test says so, after `run` has reported it ready.
    let crash = on.env.path("crash-now");
    let server = on.script(
        "crash_later.sh",
        &format!(
            "echo 'listening on :8000'; while [ ! -e '{}' ]; do sleep 0.05; done; \
             echo 'RuntimeError: CUDA error: an illegal memory access was encountered'; exit 1",
            crash.display()
        ),
    );
    let r = on.fd(&[
        "run",
        "--json",
        "--ready-line",
        "listening on",
        "--",
        &server,
    ]);
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    let id = r.run_id().to_string();
    std::fs::write(&crash, "").unwrap();
    let exit_json = on.run_dir(&id).join("exit.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !exit_json.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(exit_json.exists(), "the crash was never recorded");
    let w = on.fd(&["watch", "--json", &id]);
    assert_eq!(
        (w.code, w.verdict(), w.signature()),
        (1, "failed", Some("cuda_error")),
        "{}",
        w.explain()
    );
    assert_eq!(w.json["exit"]["code"], 1, "{}", w.explain());
    assert_eq!(w.json["run_id"], id.as_str(), "{}", w.explain());
}

fn watch_by_log_reaches_the_verdict_of_what_writes_it(on: &On) {
    let log = on.env.path("started-elsewhere.log");
    let mut writer = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "sleep 0.3; echo 'warming up' >> '{0}'; sleep 0.3; echo 'accepting connections' >> '{0}'; sleep 60",
            log.display()
        ))
        .spawn()
        .unwrap();
    let pid = writer.id().to_string();
    let r = on.fd(&[
        "watch",
        "--json",
        "--log",
        log.to_str().unwrap(),
        "--pid",
        &pid,
        "--ready-line",
        "accepting connections",
    ]);
    let _ = writer.kill();
    let _ = writer.wait();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert_eq!(r.json["server_running"], true, "{}", r.explain());
    assert_eq!(r.json["log"], log.to_str().unwrap(), "{}", r.explain());
}

fn stopping_an_unknown_run_is_one_sentence_and_exit_2(on: &On) {
    let r = on.fd(&["stop", "no-such-run"]);
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.starts_with("firedup: no run 'no-such-run'") && r.stderr.lines().count() == 1,
        "{}",
        r.explain()
    );
}

fn a_matrix_cell_is_benched_and_torn_down_clean(on: &On) {
    let server = on.script(
        "cell.sh",
        "echo \"mode $MODE\"; sleep 0.2; echo 'ready to serve'; sleep 60",
    );
    let file = on.env.path("cells.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[base]
command = ["{server}"]
ready_lines = ["ready to serve"]
grace = "2s"

[[axis]]
name = "MODE"
env = "MODE"
values = ["a", "b"]

[bench]
command = "echo \"tps = 41.5 ($MODE)\""
metrics = {{ tps = 'tps = ([0-9.]+)' }}
"#
        ),
    )
    .unwrap();
    let r = on.fd(&["matrix", file.to_str().unwrap(), "--format", "json"]);
    assert_eq!(r.code, 0, "{}", r.explain());
    let cells = r.json["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 2, "{}", r.explain());
    for c in cells {
        let run = &c["runs"][0];
        assert_eq!(run["verdict"], "ready", "{}", r.explain());
        assert_eq!(run["metrics"]["tps"], 41.5, "{}", r.explain());
        assert_eq!(run["clean"], true, "{}", r.explain());
        // The bench ran where the server runs: its output is in the run directory there.
        let id = run["run_id"].as_str().unwrap();
        let bench = std::fs::read_to_string(on.run_dir(id).join("bench.log")).unwrap_or_default();
        assert!(bench.contains("tps = 41.5"), "{id}: {bench}");
    }
}

fn ctrl_c_during_run_stops_the_server_and_exits_130(on: &On) {
    let server = on.script("loading.sh", "echo 'Loading weights'; sleep 60");
    let child = on.spawn(&[
        "run",
        "--ready-line",
        "never",
        "--grace",
        "2s",
        "--",
        &server,
    ]);
    // The server is launched once its process is recorded.
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid = loop {
        let recorded = std::fs::read_dir(on.runs_root())
            .into_iter()
            .flatten()
            .flatten()
            .find_map(|d| std::fs::read_to_string(d.path().join("process.json")).ok());
        if let Some(text) = recorded {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            break v["pid"].as_u64().unwrap();
        }
        assert!(Instant::now() < deadline, "the server was never launched");
        std::thread::sleep(Duration::from_millis(50));
    };
    // Interrupted while watching (after the launch, the run is firedup's to end).
    std::thread::sleep(Duration::from_millis(500));
    let firedup = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(firedup, rustix::process::Signal::INT).unwrap();
    let out = common::bounded::wait_output(child, Duration::from_secs(60));
    let stderr = out.stderr;
    assert_eq!(out.code, 130, "{stderr}");
    assert!(
        stderr.contains("firedup: interrupted (SIGINT) after ") && stderr.contains("none left"),
        "{stderr}"
    );
    assert!(!common::alive(pid), "the server survived Ctrl-C");
}
