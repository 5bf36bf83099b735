//! Slurm through the real binary and a real Slurm (tests/slurm/cluster.sh: one node, cgroup
//! memory limits): every end state the issue names, each test with its own state directory, so
//! they run in parallel. Without a Slurm here (`SLURM_CONF` unset or `sinfo` failing) each test
//! says so and passes, unless `FIREDUP_TEST_REQUIRE_SLURM=1` (CI), which makes it fail.
//!
//! Every firedup call is bounded (`--timeout`, or a bounded wait); no test asserts a duration.

use crate::common;

use common::slurm::{node, processes_of, running_job, sh, slurm};
use common::{Env, Run};

/// `firedup run --slurm --json ARGS`.
fn run(env: &Env, args: &[&str]) -> Run {
    let mut all = vec!["run", "--slurm", "--json"];
    all.extend_from_slice(args);
    env.firedup(&all)
}

fn job(r: &Run) -> &serde_json::Value {
    &r.json["job"]
}

#[test]
fn a_completed_job_succeeds_and_says_where_it_ran() {
    if !slurm() {
        return;
    }
    let env = Env::new();
    let r = run(
        &env,
        &[
            "--until",
            "exit",
            "--timeout",
            "2m",
            "--",
            "sh",
            "-c",
            "echo hello from the job; sleep 1",
        ],
    );
    let explain = r.explain();
    assert_eq!(r.verdict(), "succeeded", "{explain}");
    assert_eq!(r.code, 0, "{explain}");
    let j = job(&r);
    assert_eq!(j["scheduler"], "slurm", "{explain}");
    assert!(
        j["id"].as_str().is_some_and(|id| !id.is_empty()),
        "{explain}"
    );
    assert_eq!(j["state"], "COMPLETED", "{explain}");
    assert_eq!(j["nodes"], serde_json::json!([node()]), "{explain}");
    assert!(j["reason"].is_null(), "{explain}");
    let log = r.json["log"].as_str().unwrap_or_default();
    assert!(
        common::file_text(log.as_ref()).contains("hello from the job"),
        "{explain}"
    );
}

#[test]
fn a_server_job_becomes_ready_and_stop_cancels_it_and_proves_it_gone() {
    if !slurm() {
        return;
    }
    let env = Env::new();
    let port = common::free_port().to_string();
    let r = run(
        &env,
        &[
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
        ],
    );
    let explain = r.explain();
    assert_eq!(r.verdict(), "ready", "{explain}");
    assert_eq!(job(&r)["state"], "RUNNING", "{explain}");
    let id = job(&r)["id"].as_str().unwrap_or_default().to_string();
    let run_id = r.run_id().to_string();
    assert!(
        !processes_of(&run_id).is_empty(),
        "the job's processes carry the run id\n{explain}"
    );
    let ps = env.fd("ps").json().output();
    assert!(
        ps.stdout.contains(&run_id),
        "ps lists the live job run: {}",
        ps.stdout
    );
    let stop = env.fd("stop").arg(&run_id).output();
    assert_eq!(stop.code, 0, "{}", stop.explain());
    assert!(
        stop.stdout.contains(&format!("cancelled Slurm job {id}")),
        "{}",
        stop.explain()
    );
    assert!(
        stop.stdout.contains("squeue"),
        "the stop says what it checked: {}",
        stop.stdout
    );
    let queued = sh(&format!("squeue -h -j {id} -o %T"));
    assert!(
        queued.is_empty() || queued == "CANCELLED",
        "job {id} still queued: {queued}"
    );
    assert_eq!(
        processes_of(&run_id),
        Vec::<u32>::new(),
        "processes left after stop"
    );
}

#[test]
fn an_oom_kill_by_slurm_is_killed_oom_killed() {
    if !slurm() {
        return;
    }
    let env = Env::new();
    let r = run(
        &env,
        &[
            "--until",
            "exit",
            "--timeout",
            "2m",
            "--sbatch-arg=--mem=100M",
            "--",
            "python3",
            "-c",
            "b = bytearray(1 << 30); print(len(b))",
        ],
    );
    let explain = r.explain();
    assert_eq!(
        (r.verdict(), r.signature()),
        ("killed", Some("oom_killed")),
        "{explain}"
    );
    assert_eq!(job(&r)["state"], "OUT_OF_MEMORY", "{explain}");
}

#[test]
fn a_failing_srun_task_is_named_with_its_exit_code() {
    if !slurm() {
        return;
    }
    let env = Env::new();
    let script = env.script(
        "tasks.sh",
        "#SBATCH -n 2\nsrun -n2 sh -c '[ \"$SLURM_PROCID\" = 1 ] && exit 7; sleep 60'",
    );
    let r = run(&env, &["--until", "exit", "--timeout", "3m", "--", &script]);
    let explain = r.explain();
    assert_eq!(r.json["rank"], 1, "{explain}");
    assert!(
        r.json["reason"].as_str().unwrap_or_default().contains('7'),
        "{explain}"
    );
    assert_ne!(r.verdict(), "succeeded", "{explain}");
    assert_eq!(job(&r)["state"], "FAILED", "{explain}");
}

#[test]
fn a_job_at_its_time_limit_is_killed_time_limit() {
    if !slurm() {
        return;
    }
    let env = Env::new();
    let r = run(
        &env,
        &[
            "--until",
            "exit",
            "--timeout",
            "5m",
            "--sbatch-arg=--time=1",
            "--",
            "sleep",
            "600",
        ],
    );
    let explain = r.explain();
    assert_eq!(
        (r.verdict(), r.signature()),
        ("killed", Some("time_limit")),
        "{explain}"
    );
    assert_eq!(job(&r)["state"], "TIMEOUT", "{explain}");
}

#[test]
fn a_request_the_cluster_can_never_satisfy_never_starts() {
    if !slurm() {
        return;
    }
    let env = Env::new();
    // One node: two can never be given. Slurm 22.05 queues it (PartitionConfig or
    // PartitionNodeLimit, never to start); other configurations refuse it at submit
    // ("Requested node configuration is not available").
    let r = run(
        &env,
        &[
            "--until",
            "exit",
            "--timeout",
            "2m",
            "--sbatch-arg=--nodes=2",
            "--",
            "true",
        ],
    );
    let explain = r.explain();
    assert_eq!(r.verdict(), "never_started", "{explain}");
    let reason = r.json["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("Partition") || reason.contains("node configuration"),
        "{explain}"
    );
    if let Some(id) = job(&r)["id"].as_str() {
        let queued = sh(&format!("squeue -h -j {id} -o %T"));
        assert!(
            queued.is_empty() || queued == "CANCELLED",
            "the job was left queued: {queued}"
        );
    }
}

#[test]
fn sbatch_refusing_the_job_is_never_started_with_its_own_words() {
    if !slurm() {
        return;
    }
    let env = Env::new();
    let r = run(
        &env,
        &[
            "--until",
            "exit",
            "--timeout",
            "1m",
            "--sbatch-arg=--partition=no-such-partition",
            "--",
            "true",
        ],
    );
    let explain = r.explain();
    assert_eq!(r.verdict(), "never_started", "{explain}");
    let reason = r.json["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("sbatch") && reason.contains("partition"),
        "{explain}"
    );
}

#[test]
fn a_missing_output_directory_is_never_started_saying_so() {
    if !slurm() {
        return;
    }
    let env = Env::new();
    let out = env.path("no-such-dir/job.out");
    let arg = format!("--sbatch-arg=--output={}", out.display());
    // The bound is generous: the job only fails once slurmd gets to launch it, and a loaded
    // machine's slurmd was seen handling a batch launch 60 s after the allocation (a cold CI run
    // beside four builds); until then Slurm says RUNNING, and a 1m bound ended the watch first.
    let r = run(
        &env,
        &[
            "--until",
            "exit",
            "--timeout",
            "5m",
            &arg,
            "--",
            "echo",
            "hi",
        ],
    );
    let explain = r.explain();
    assert_eq!(r.verdict(), "never_started", "{explain}");
    assert_eq!(r.json["log"], out.display().to_string(), "{explain}");
    assert!(
        r.json["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("director"),
        "{explain}"
    );
}

#[test]
fn a_job_cancelled_by_someone_else_is_killed_cancelled() {
    if !slurm() {
        return;
    }
    let env = Env::new();
    let name = format!("fdcancel{}", std::process::id());
    let arg = format!("--sbatch-arg=--job-name={name}");
    let child = env
        .cmd()
        .args([
            "run",
            "--slurm",
            "--json",
            "--until",
            "exit",
            "--timeout",
            "2m",
            &arg,
            "--",
            "sleep",
            "300",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("firedup starts");
    let id = running_job(&name).expect("the job runs");
    sh(&format!("scancel {id}"));
    let out = child.wait_with_output().expect("firedup ends");
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    let explain = format!("{json}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        (json["verdict"].as_str(), json["signature"].as_str()),
        (Some("killed"), Some("cancelled")),
        "{explain}"
    );
    assert_eq!(json["job"]["state"], "CANCELLED", "{explain}");
}

#[test]
fn watch_attaches_to_a_job_submitted_with_plain_sbatch() {
    if !slurm() {
        return;
    }
    let env = Env::new();
    let out = env.path("plain-%j.out");
    let id = sh(&format!(
        "sbatch --parsable -o {} --wrap 'echo attached line; sleep 2; exit 3'",
        out.display()
    ));
    assert!(!id.is_empty(), "sbatch submitted");
    let r = env
        .fd("watch")
        .opt("slurm-job", &id)
        .until("exit")
        .json()
        .timeout("2m")
        .output();
    let explain = r.explain();
    assert_eq!(r.verdict(), "exited", "{explain}");
    assert_eq!(r.json["exit"]["code"], 3, "{explain}");
    assert_eq!(job(&r)["id"], id.as_str(), "{explain}");
    assert_eq!(job(&r)["state"], "FAILED", "{explain}");
    assert_eq!(
        r.json["log"],
        env.path(&format!("plain-{id}.out")).display().to_string(),
        "{explain}"
    );
}

#[test]
fn a_requeued_job_is_judged_to_its_end_and_the_requeue_is_said() {
    if !slurm() {
        return;
    }
    let env = Env::new();
    let name = format!("fdrequeue{}", std::process::id());
    let arg = format!("--sbatch-arg=--job-name={name}");
    let child = env
        .cmd()
        .args([
            "run",
            "--slurm",
            "--json",
            "--until",
            "exit",
            "--timeout",
            "6m",
            &arg,
            "--",
            "sh",
            "-c",
            "echo run $SLURM_RESTART_COUNT; sleep 8; echo finished",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("firedup starts");
    let id = running_job(&name).expect("the job runs");
    sh(&format!("scontrol requeue {id}"));
    let out = child.wait_with_output().expect("firedup ends");
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let explain = format!("{json}\n{stderr}");
    assert_eq!(json["verdict"], "succeeded", "{explain}");
    assert_eq!(json["job"]["state"], "COMPLETED", "{explain}");
    assert!(
        stderr.contains("requeued") || json.to_string().contains("requeued"),
        "the requeue is said: {explain}"
    );
}

#[test]
fn a_matrix_of_jobs_judges_each_cell_names_its_job_and_cancels_it() {
    if !slurm() {
        return;
    }
    let env = Env::new();
    let r = env.fd("matrix").flag("slurm").opt("parallel", "2").opt("format", "json").opt("axis", "env:A=1,2").opt("axis", "env:B=1,2").ready_line("cell up").timeout("2m").shell("if [ \"$A$B\" = 22 ]; then echo \"ModuleNotFoundError: No module named 'flash_attn'\"; exit 1; fi; echo \"cell up $A $B\"; sleep 300").output();
    let explain = r.explain();
    assert_eq!(r.code, 1, "one cell is not ready\n{explain}");
    let cells = r.json["cells"].as_array().cloned().unwrap_or_default();
    assert_eq!(cells.len(), 4, "{explain}");
    let mut jobs = Vec::new();
    for c in &cells {
        let run = &c["runs"][0];
        let failing = c["label"]
            .as_str()
            .is_some_and(|l| l.contains("A=2") && l.contains("B=2"));
        let want = if failing {
            ("failed", Some("import_error"))
        } else {
            ("ready", None)
        };
        assert_eq!(
            (
                run["verdict"].as_str().unwrap_or_default(),
                run["signature"].as_str()
            ),
            want,
            "{c}"
        );
        assert_eq!(run["clean"], true, "teardown verified: {c}");
        let id = run["job"].as_str().unwrap_or_default().to_string();
        assert!(!id.is_empty(), "every cell names its job: {c}");
        let state = sh(&format!("squeue -h -j {id} -o %T"));
        assert!(
            state.is_empty() || state == "CANCELLED" || state == "FAILED",
            "job {id} left {state}: {c}"
        );
        jobs.push((id, run["run_id"].as_str().unwrap_or_default().to_string()));
    }
    jobs.sort();
    jobs.dedup_by(|a, b| a.0 == b.0);
    assert_eq!(jobs.len(), 4, "four distinct jobs: {jobs:?}");
    // The table shows them too.
    let (id, run_id) = &jobs[0];
    let history = env.fd("history").json().opt("job", id).output();
    let row: serde_json::Value =
        serde_json::from_str(history.stdout.lines().next().unwrap_or_default()).unwrap_or_default();
    assert_eq!(row["run_id"], run_id.as_str(), "{}", history.explain());
    assert_eq!(
        row["outcome"]["job"]["id"],
        id.as_str(),
        "{}",
        history.explain()
    );
    assert_eq!(
        row["outcome"]["job"]["nodes"],
        serde_json::json!([node()]),
        "{}",
        history.explain()
    );
    let show = env.fd("show").arg(run_id).output();
    assert!(
        show.stdout.contains(&format!("job       slurm job {id}: ")),
        "{}",
        show.explain()
    );
    let table = env.fd("history").output();
    assert!(
        table.stdout.contains(&format!("slurm job {id}")),
        "{}",
        table.explain()
    );
}
