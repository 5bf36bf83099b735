//! Slurm through a login node over SSH (`--host LOGIN` with `run --slurm`, `watch --slurm-job`,
//! `ps`, `stop`): the real binary, the real sshd of tests/common/sshd.rs (the "login node" is
//! this machine reached as another login, its sessions given the cluster's `SLURM_CONF`) and the
//! real single-node Slurm of tests/slurm/cluster.sh. The scheduler's commands, the job's log and
//! the run directory are the login node's (`FIREDUP_REMOTE_STATE_DIR`); this firedup judges.
//! Skipped without a Slurm unless `FIREDUP_TEST_REQUIRE_SLURM=1` (see tests/common/slurm.rs).
//!
//! Every firedup call is bounded (`--timeout`, or a bounded wait); no test asserts a duration.

use crate::common;

use common::slurm::{processes_of, running_job, sh, slurm};
use common::sshd::Sshd;
use common::{Env, Run};

/// A login node: the sshd, and the state directory firedup has there.
struct Login {
    env: Env,
    sshd: Sshd,
}

impl Login {
    fn start() -> Login {
        let conf = std::env::var("SLURM_CONF").unwrap_or_default();
        Login {
            env: Env::new(),
            sshd: Sshd::start_with_env(&[("SLURM_CONF", &conf)]),
        }
    }

    /// `firedup SUBCOMMAND --host fdtest REST...`.
    fn fd(&self, args: &[&str]) -> Run {
        let mut all = vec![args[0], "--host", "fdtest"];
        all.extend(&args[1..]);
        let config = self.sshd.config_path();
        let state = self.env.path("login-state");
        self.env.cmd_json(
            &all,
            &[
                ("FIREDUP_SSH_CONFIG", config.to_str().unwrap()),
                ("FIREDUP_REMOTE_STATE_DIR", state.to_str().unwrap()),
                // Nothing here may reach Slurm but through the login node.
                ("SLURM_CONF", "/nonexistent/slurm.conf"),
            ],
        )
    }

    /// Starts `firedup SUBCOMMAND --host fdtest REST...` with its output captured.
    fn spawn(&self, args: &[&str]) -> std::process::Child {
        let mut c = self.env.cmd();
        c.arg(args[0])
            .args(["--host", "fdtest"])
            .args(&args[1..])
            .env("FIREDUP_SSH_CONFIG", self.sshd.config_path())
            .env("FIREDUP_REMOTE_STATE_DIR", self.env.path("login-state"))
            .env("SLURM_CONF", "/nonexistent/slurm.conf")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c.spawn().expect("firedup starts")
    }

    /// The run directory of `id` on the login node.
    fn run_dir(&self, id: &str) -> std::path::PathBuf {
        self.env.path("login-state").join("runs").join(id)
    }
}

fn job(r: &Run) -> &serde_json::Value {
    &r.json["job"]
}

#[test]
fn a_server_job_through_the_login_node_becomes_ready_and_stop_cancels_it() {
    if !slurm() {
        return;
    }
    let login = Login::start();
    let port = common::free_port().to_string();
    let r = login.fd(&[
        "run",
        "--slurm",
        "--json",
        "--ready-line",
        "Serving HTTP",
        "--timeout",
        "2m",
        "--",
        "python3",
        "-u",
        "-m",
        "http.server",
        &port,
        "--bind",
        "127.0.0.1",
    ]);
    let explain = r.explain();
    assert_eq!(r.verdict(), "ready", "{explain}");
    assert_eq!(r.json["host"], "fdtest", "{explain}");
    assert_eq!(job(&r)["state"], "RUNNING", "{explain}");
    let id = job(&r)["id"].as_str().unwrap_or_default().to_string();
    assert!(!id.is_empty(), "{explain}");
    let run_id = r.run_id().to_string();
    // The run's record, script and log are the login node's.
    let dir = login.run_dir(&run_id);
    assert!(
        dir.join("job.sh").exists(),
        "no job.sh in {dir:?}\n{explain}"
    );
    let meta: serde_json::Value =
        serde_json::from_str(&common::file_text(&dir.join("meta.json"))).unwrap_or_default();
    assert_eq!(
        meta["job"]["id"],
        id.as_str(),
        "the login node's record names the job\n{meta}\n{explain}"
    );
    assert!(!processes_of(&run_id).is_empty(), "{explain}");
    let ps = login.fd(&["ps", "--json"]);
    assert!(
        ps.stdout.contains(&run_id),
        "ps --host lists it: {}",
        ps.explain()
    );
    let stop = login.fd(&["stop", &run_id]);
    assert_eq!(stop.code, 0, "{}", stop.explain());
    assert!(
        stop.stdout.contains(&format!("cancelled Slurm job {id}"))
            && stop.stdout.contains("squeue"),
        "the stop cancels and says what it checked: {}",
        stop.explain()
    );
    let queued = sh(&format!("squeue -h -j {id} -o %T"));
    assert!(
        queued.is_empty() || queued == "CANCELLED",
        "job {id} still queued: {queued}"
    );
    assert_eq!(processes_of(&run_id), Vec::<u32>::new(), "processes left");
    // A later watch of the run, through the login node, judges how it ended.
    let w = login.fd(&["watch", &run_id, "--json", "--timeout", "1m"]);
    assert_eq!(job(&w)["id"], id.as_str(), "{}", w.explain());
    assert_eq!(job(&w)["state"], "CANCELLED", "{}", w.explain());
    assert_eq!(
        w.signature(),
        Some("terminated"),
        "firedup's own cancel: {}",
        w.explain()
    );
    // The history here has the run, its host and its job as the last watch saw it.
    let h = login.fd(&["history", "--json", "--job", &id]);
    let row: serde_json::Value =
        serde_json::from_str(h.stdout.lines().next().unwrap_or_default()).unwrap_or_default();
    assert_eq!(row["run_id"], run_id.as_str(), "{}", h.explain());
    assert_eq!(row["host"], "fdtest", "{}", h.explain());
    assert_eq!(
        row["outcome"]["job"]["state"],
        "CANCELLED",
        "{}",
        h.explain()
    );
}

#[test]
fn an_oom_killed_job_through_the_login_node_is_killed_oom_killed() {
    if !slurm() {
        return;
    }
    let login = Login::start();
    let r = login.fd(&[
        "run",
        "--slurm",
        "--json",
        "--until",
        "exit",
        "--timeout",
        "2m",
        "--sbatch-arg=--mem=100M",
        "--",
        "python3",
        "-c",
        "b = bytearray(1 << 30); print(len(b))",
    ]);
    let explain = r.explain();
    assert_eq!(
        (r.verdict(), r.signature()),
        ("killed", Some("oom_killed")),
        "{explain}"
    );
    assert_eq!(job(&r)["state"], "OUT_OF_MEMORY", "{explain}");
    // The decisive line is slurmstepd's, read from the log on the login node before the end.
    assert!(
        r.json["line"]["text"]
            .as_str()
            .is_some_and(|l| l.contains("oom")),
        "{explain}"
    );
}

#[test]
fn watch_slurm_job_through_the_login_node_follows_a_plain_sbatch_job() {
    if !slurm() {
        return;
    }
    let login = Login::start();
    let out = login.env.path("plain-%j.out");
    let id = sh(&format!(
        "sbatch --parsable -o {} --wrap 'echo attached line; python3 -c \"import no_such_module\"'",
        out.display()
    ));
    assert!(!id.is_empty(), "sbatch submitted");
    let r = login.fd(&[
        "watch",
        "--slurm-job",
        &id,
        "--until",
        "exit",
        "--json",
        "--timeout",
        "2m",
    ]);
    let explain = r.explain();
    assert_eq!(
        (r.verdict(), r.signature()),
        ("failed", Some("import_error")),
        "{explain}"
    );
    assert_eq!(job(&r)["id"], id.as_str(), "{explain}");
    assert_eq!(job(&r)["state"], "FAILED", "{explain}");
    assert_eq!(
        r.json["log"],
        login
            .env
            .path(&format!("plain-{id}.out"))
            .display()
            .to_string(),
        "{explain}"
    );
}

#[test]
fn a_matrix_of_jobs_through_the_login_node_names_each_job_and_cancels_it() {
    if !slurm() {
        return;
    }
    let login = Login::start();
    let r = login.fd(&[
        "matrix",
        "--slurm",
        "--parallel",
        "2",
        "--format",
        "json",
        "--axis",
        "env:A=1,2",
        "--ready-line",
        "cell up",
        "--timeout",
        "2m",
        "--",
        "sh",
        "-c",
        "if [ \"$A\" = 2 ]; then echo 'Segmentation fault (core dumped)'; kill -SEGV $$; fi; echo \"cell up $A\"; sleep 300",
    ]);
    let explain = r.explain();
    assert_eq!(r.code, 1, "one cell is not ready\n{explain}");
    let cells = r.json["cells"].as_array().cloned().unwrap_or_default();
    assert_eq!(cells.len(), 2, "{explain}");
    for c in &cells {
        let run = &c["runs"][0];
        let id = run["job"].as_str().unwrap_or_default();
        assert!(!id.is_empty(), "the cell names its job: {c}");
        let want_ready = c["label"].as_str().is_some_and(|l| l.contains("A=1"));
        assert_eq!(run["verdict"] == "ready", want_ready, "{c}");
        assert_eq!(
            run["clean"], true,
            "teardown verified on the login node: {c}"
        );
        let state = sh(&format!("squeue -h -j {id} -o %T"));
        assert!(
            !matches!(state.as_str(), "RUNNING" | "PENDING" | "COMPLETING"),
            "job {id} left {state}: {c}"
        );
        assert!(
            processes_of(run["run_id"].as_str().unwrap_or_default()).is_empty(),
            "{c}"
        );
    }
}

#[test]
fn a_job_the_login_nodes_slurm_does_not_know_is_one_sentence_and_exit_2() {
    if !slurm() {
        return;
    }
    let login = Login::start();
    let r = login.fd(&["watch", "--slurm-job", "987654321", "--json"]);
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.contains("fdtest") && r.stderr.contains("does not know job 987654321"),
        "{}",
        r.explain()
    );
    assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.explain());
}

#[test]
fn a_failed_server_job_through_the_login_node_is_cancelled_not_left_running() {
    if !slurm() {
        return;
    }
    let login = Login::start();
    // The server prints its fatal line and lives on: the job would hold its allocation.
    let r = login.fd(&[
        "run",
        "--slurm",
        "--json",
        "--ready-line",
        "never printed",
        "--timeout",
        "2m",
        "--",
        "sh",
        "-c",
        "echo 'OSError: [Errno 98] Address already in use'; sleep 300",
    ]);
    let explain = r.explain();
    assert_eq!(
        (r.verdict(), r.signature()),
        ("failed", Some("port_in_use")),
        "{explain}"
    );
    assert_eq!(r.json["server_running"], false, "{explain}");
    let id = job(&r)["id"].as_str().unwrap_or_default().to_string();
    let state = sh(&format!("squeue -h -j {id} -o %T"));
    assert!(
        state.is_empty() || state == "CANCELLED",
        "job {id} left {state}\n{explain}"
    );
    assert_eq!(processes_of(r.run_id()), Vec::<u32>::new(), "{explain}");
}

#[test]
fn ctrl_c_during_a_run_through_the_login_node_cancels_the_job_and_exits_130() {
    if !slurm() {
        return;
    }
    let login = Login::start();
    let name = format!("fdlogin{}", std::process::id());
    let arg = format!("--sbatch-arg=--job-name={name}");
    let child = login.spawn(&[
        "run",
        "--slurm",
        &arg,
        "--ready-line",
        "never",
        "--timeout",
        "2m",
        "--",
        "sh",
        "-c",
        "echo loading; sleep 300",
    ]);
    let id = running_job(&name).expect("the job runs");
    // Interrupted while watching (after the submit, the job is firedup's to end).
    std::thread::sleep(std::time::Duration::from_millis(500));
    let firedup = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(firedup, rustix::process::Signal::INT).unwrap();
    let out = common::bounded::wait_output(child, std::time::Duration::from_secs(90));
    assert_eq!(out.code, 130, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("Slurm job {id}")),
        "the teardown names the job: {}",
        out.stderr
    );
    let state = sh(&format!("squeue -h -j {id} -o %T"));
    assert!(
        state.is_empty() || state == "CANCELLED",
        "job {id} left {state}: {}",
        out.stderr
    );
}

/// The observed lines of an `--events` file (NDJSON), as far as it is written.
fn event_lines(events: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(events)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["kind"] == "line")
        .filter_map(|e| e["text"].as_str().map(String::from))
        .collect()
}

#[test]
fn a_lost_link_during_a_job_is_resumed_without_losing_or_doubling_lines() {
    if !slurm() {
        return;
    }
    let login = Login::start();
    let events = login.env.path("events.ndjson");
    let child = login.spawn(&[
        "run",
        "--slurm",
        "--json",
        "--until",
        "exit",
        "--timeout",
        "2m",
        "--events",
        events.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "i=1; while [ $i -le 30 ]; do echo \"step $i of 30\"; i=$((i+1)); sleep 0.1; done; python3 -c 'import no_such_module'",
    ]);
    let started = common::slurm::wait_for(std::time::Duration::from_secs(60), || {
        (event_lines(&events).len() >= 5).then_some(())
    });
    assert!(started.is_some(), "the watch never got under way");
    // Kill this test's ControlMaster: the agent on the login node goes with it.
    let config = login.sshd.config_path();
    let killed = std::process::Command::new("pkill")
        .args(["-9", "-f", &format!("ssh .*-F {}", config.display())])
        .status()
        .unwrap();
    assert!(killed.success(), "no ControlMaster to kill");
    let out = common::bounded::wait_output(child, std::time::Duration::from_secs(90));
    let json: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
    let explain = format!("{json}\n{}", out.stderr);
    assert_eq!(
        (json["verdict"].as_str(), json["signature"].as_str()),
        (Some("failed"), Some("import_error")),
        "{explain}"
    );
    assert!(out.stderr.contains("lost contact with fdtest"), "{explain}");
    assert!(out.stderr.contains("reconnected to fdtest"), "{explain}");
    let lines = event_lines(&events);
    for k in 1..=30 {
        let want = format!("step {k} of 30");
        let n = lines.iter().filter(|l| **l == want).count();
        assert_eq!(n, 1, "{want:?} seen {n} times: {lines:?}");
    }
}
