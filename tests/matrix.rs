//! `firedup matrix` through the real binary: the scripted 2 x 2 sglang diagnostic, real Redis and
//! Postgres matrices with their real bench tools, verified teardown (a server ignoring SIGTERM, GPU
//! memory that is never released), dry run, repeat, parallel slots, resume, ordered axes, fail-fast
//! and Ctrl-C. Every wait is bounded.

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Env, free_port};

fn server_fixture(name: &str) -> String {
    common::fixture(&format!("servers/{name}"))
}

/// Runs `firedup matrix FILE --format json` (bounded).
fn matrix_json(env: &Env, file: &Path, vars: &[(&str, &str)]) -> common::Run {
    bounded(
        env,
        &["matrix", file.to_str().unwrap(), "--format", "json"],
        vars,
        BOUND,
    )
}

/// Writes a matrix file into the work dir.
fn matrix_file(env: &Env, name: &str, text: &str) -> PathBuf {
    let file = env.path(name);
    std::fs::write(&file, text).unwrap();
    file
}

/// Runs `firedup ARGS` bounded by `bound`: killed and failed past it.
fn bounded(env: &Env, args: &[&str], vars: &[(&str, &str)], bound: Duration) -> common::Run {
    let started = Instant::now();
    let mut c = env.cmd();
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in vars {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("firedup starts");
    let (tx, rx) = std::sync::mpsc::channel();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut o = String::new();
        let mut e = String::new();
        let t = std::thread::spawn(move || {
            use std::io::Read;
            let _ = err.read_to_string(&mut e);
            e
        });
        use std::io::Read;
        let _ = out.read_to_string(&mut o);
        let e = t.join().unwrap_or_default();
        let _ = tx.send(());
        (o, e)
    });
    if rx.recv_timeout(bound).is_err() {
        let _ = child.kill();
        let (o, e) = reader.join().unwrap();
        panic!("firedup {args:?} ran past {bound:?}\nstdout: {o}\nstderr: {e}");
    }
    let status = child.wait().unwrap();
    let (stdout, stderr) = reader.join().unwrap();
    common::Run {
        code: status.code().unwrap_or(-1),
        json: serde_json::from_str(stdout.trim()).unwrap_or(serde_json::Value::Null),
        stdout,
        stderr,
        took: started.elapsed(),
    }
}

const BOUND: Duration = Duration::from_secs(120);

/// The history rows of one matrix, as JSON.
fn history_of(env: &Env, matrix_id: &str) -> Vec<serde_json::Value> {
    let r = env
        .fd("history")
        .opt("matrix", matrix_id)
        .json()
        .opt("limit", "0")
        .output();
    assert_eq!(r.code, 0, "{}", r.explain());
    r.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn sglang_matrix(env: &Env, port: u16, extra: &str) -> PathBuf {
    let file = env.path("sglang.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[base]
command = ["python3", "{server}", "--model-path", "Qwen/Qwen2.5-7B-Instruct", "--port", "{{port}}", "--step", "0.02"]
profile = "sglang"
vars = {{ port = "{port}" }}
stall = "2s"
timeout = "60s"
grace = "2s"

[[axis]]
name = "FLASHMLA"
env = "SGLANG_SM120_MMA_FLASHMLA"
values = [0, 1]

[[axis]]
name = "torch.compile"
flag = "--enable-torch-compile"

[bench]
command = "python3 {bench} 20"
timeout = "30s"
metrics = {{ throughput = 'Output token throughput \(tok/s\):\s+([0-9.]+)' }}
{extra}
"#,
            server = server_fixture("fake_sglang_server.py"),
            bench = server_fixture("fake_bench.py"),
        ),
    )
    .unwrap();
    file
}

#[test]
fn the_two_by_two_diagnostic_is_one_command_with_a_grouped_table() {
    let env = Env::new();
    let file = sglang_matrix(&env, free_port(), "");
    let r = bounded(&env, &["matrix", file.to_str().unwrap()], &[], BOUND);
    // Not every cell became ready: exit 1, and the table says why for each.
    assert_eq!(r.code, 1, "{}", r.explain());
    let sentences = [
        "1 cell failed with cuda_oom during load_weights: FLASHMLA=1 torch.compile=off",
        "1 cell failed with graph_capture during capture_cuda_graph: FLASHMLA=1 torch.compile=on",
        "1 cell stalled during capture_cuda_graph: FLASHMLA=0 torch.compile=on",
        "1 cell became ready: FLASHMLA=0 torch.compile=off",
    ];
    for s in sentences {
        assert!(r.stdout.contains(s), "missing {s:?}\n{}", r.explain());
    }
    // The live rows came on stderr while it ran, one per cell.
    assert_eq!(
        r.stderr.matches("| teardown clean").count(),
        4,
        "{}",
        r.explain()
    );
    // Metrics of the ready cell landed in the history, with the cell's place in the matrix.
    let id = r
        .stdout
        .split("matrix ")
        .nth(1)
        .and_then(|s| s.split(':').next())
        .unwrap()
        .to_string();
    let rows = history_of(&env, &id);
    assert_eq!(rows.len(), 4);
    let ready: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| r["outcome"]["verdict"] == "ready")
        .collect();
    assert_eq!(ready.len(), 1);
    assert!(ready[0]["metrics"]["throughput"].as_f64().unwrap() > 0.0);
    assert_eq!(ready[0]["cell"]["label"], "FLASHMLA=0 torch.compile=off");
    assert_eq!(ready[0]["kind"], "matrix");
    assert!(
        rows.iter()
            .all(|r| r["teardown"].as_str().unwrap().starts_with("clean")),
        "{rows:?}"
    );
}

#[test]
fn every_format_is_machine_readable() {
    let env = Env::new();
    let file = sglang_matrix(
        &env,
        free_port(),
        "[[exclude]]\n\"torch.compile\" = \"on\"\n",
    );
    let r = matrix_json(&env, &file, &[]);
    assert_eq!(r.code, 1, "{}", r.explain());
    let cells = r.json["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 2);
    assert_eq!(cells[0]["runs"][0]["verdict"], "ready");
    assert_eq!(cells[1]["runs"][0]["signature"], "cuda_oom");
    assert_eq!(r.json["state"], "done");

    let csv = bounded(
        &env,
        &["matrix", file.to_str().unwrap(), "--format", "csv"],
        &[],
        BOUND,
    );
    let mut lines = csv.stdout.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("cell,FLASHMLA,torch.compile,verdict,signature,phase,runs,ready_s"),
        "{}",
        csv.explain()
    );
    assert!(lines.next().unwrap().starts_with("1,0,off,ready,,"));
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("2,1,off,failed,cuda_oom,load_weights,1,")
    );
}

#[test]
fn dry_run_prints_the_cells_and_launches_nothing() {
    let env = Env::new();
    let file = sglang_matrix(&env, 30999, "");
    let r = bounded(
        &env,
        &[
            "matrix",
            file.to_str().unwrap(),
            "--dry-run",
            "--repeat",
            "3",
        ],
        &[],
        BOUND,
    );
    assert_eq!(r.code, 0, "{}", r.explain());
    assert!(
        r.stdout
            .contains("4 cells × 3 repeats = 12 runs, 1 at a time"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("--port 30999 --step 0.02 --enable-torch-compile"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("env      SGLANG_SM120_MMA_FLASHMLA=1"),
        "{}",
        r.stdout
    );
    assert!(
        !env.state.path().join("runs").exists(),
        "a dry run launched something"
    );
}

#[test]
fn usage_mistakes_launch_nothing_and_exit_2() {
    let env = Env::new();
    let table: Vec<(Vec<&str>, &str)> = vec![
        (vec!["matrix", "--axis", "env:A=1,2"], "no command"),
        (
            vec!["matrix", "--axis", "nope", "--", "true"],
            "--axis \"nope\"",
        ),
        (
            vec!["matrix", "--axis", "env:A=1", "--", "sh", "-c", "{missing}"],
            "unknown variable {missing}",
        ),
        (
            vec!["matrix", "--axis", "env:A=1", "--", "sleep", "1"],
            "no readiness condition",
        ),
        (
            vec!["matrix", "/nonexistent/m.toml"],
            "cannot read the matrix file",
        ),
        (
            vec![
                "matrix", "--axis", "env:A=1", "--metric", "x=(1)", "--", "true",
            ],
            "--metric needs a bench command",
        ),
    ];
    for (args, want) in table {
        let r = bounded(&env, &args, &[], BOUND);
        assert_eq!(r.code, 2, "{args:?}: {}", r.explain());
        assert!(r.stderr.contains(want), "{args:?}: {}", r.explain());
    }
    assert!(!env.state.path().join("runs").exists());
}

/// A server that is ready at once and records its slot and cell.
fn quick_server_matrix(env: &Env, extra: &str) -> PathBuf {
    let file = env.path("quick.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[base]
command = ["sh", "-c", "echo cell={{cell}} slot=$SLOT_NAME mode=$MODE; sleep 0.2; echo serving; sleep 300"]
ready_lines = ["serving"]
timeout = "30s"
grace = "2s"

[[axis]]
env = "MODE"
values = ["a", "b", "c"]

{extra}
"#
        ),
    )
    .unwrap();
    file
}

#[test]
fn repeat_and_parallel_slots_report_medians_and_use_every_slot() {
    let env = Env::new();
    let file = quick_server_matrix(
        &env,
        "[[slot]]\nenv = { SLOT_NAME = \"gpu0\" }\n[[slot]]\nenv = { SLOT_NAME = \"gpu1\" }\n\n[bench]\ncommand = \"echo rate=$((40 + ${FIREDUP_PID} % 3))\"\nmetrics = { rate = 'rate=([0-9]+)' }\n",
    );
    let r = bounded(
        &env,
        &[
            "matrix",
            file.to_str().unwrap(),
            "--repeat",
            "2",
            "--format",
            "json",
        ],
        &[],
        BOUND,
    );
    assert_eq!(r.code, 0, "{}", r.explain());
    let cells = r.json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3);
    for c in cells {
        assert_eq!(c["state"], "done");
        assert_eq!(c["runs"].as_array().unwrap().len(), 2, "{c}");
        for run in c["runs"].as_array().unwrap() {
            let rate = run["metrics"]["rate"].as_f64().unwrap();
            assert!((40.0..=42.0).contains(&rate), "{run}");
        }
    }
    // Both slots ran cells, each with its own env.
    let rows = history_of(&env, r.json["matrix_id"].as_str().unwrap());
    assert_eq!(rows.len(), 6);
    let slots: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| r["env"]["SLOT_NAME"].as_str().unwrap())
        .collect();
    assert_eq!(slots.into_iter().collect::<Vec<_>>(), ["gpu0", "gpu1"]);
    // Two slots ran at the same time: some runs overlap.
    let spans: Vec<(f64, f64)> = rows
        .iter()
        .map(|r| {
            (
                r["started_at"].as_f64().unwrap(),
                r["ended_at"].as_f64().unwrap(),
            )
        })
        .collect();
    let overlap = spans
        .iter()
        .enumerate()
        .any(|(i, a)| spans.iter().skip(i + 1).any(|b| a.0 < b.1 && b.0 < a.1));
    assert!(overlap, "no two runs overlapped: {spans:?}");
    // The table shows medians and spread for the repeats (e.g. `41.0 (40.0–42.0)` or `41.0`).
    let cells_md = bounded(
        &env,
        &[
            "matrix",
            file.to_str().unwrap(),
            "--resume",
            "--repeat",
            "2",
            "--format",
            "md",
        ],
        &[],
        BOUND,
    );
    assert!(cells_md.stdout.contains("| rate"), "{}", cells_md.explain());
    assert!(
        cells_md.stdout.contains("ready 2/2"),
        "{}",
        cells_md.explain()
    );
}

#[test]
fn resume_runs_only_what_is_missing() {
    let env = Env::new();
    // Cell b fails; with --fail-fast, c is not run.
    let file = matrix_file(
        &env,
        "resume.toml",
        r#"
[base]
command = ["sh", "-c", "if [ \"$MODE\" = b ]; then echo 'RuntimeError: CUDA error: an illegal memory access was encountered'; exit 1; fi; echo serving; sleep 300"]
ready_lines = ["serving"]
timeout = "30s"
grace = "2s"

[[axis]]
env = "MODE"
values = ["a", "b", "c"]
"#,
    );
    let first = bounded(
        &env,
        &["matrix", file.to_str().unwrap(), "--fail-fast"],
        &[],
        BOUND,
    );
    assert_eq!(first.code, 1, "{}", first.explain());
    assert!(
        first
            .stdout
            .contains("not run: --fail-fast after cell 2 (failed)"),
        "{}",
        first.explain()
    );
    let resumed = bounded(
        &env,
        &[
            "matrix",
            file.to_str().unwrap(),
            "--resume",
            "--format",
            "json",
        ],
        &[],
        BOUND,
    );
    assert_eq!(resumed.code, 1, "{}", resumed.explain());
    assert!(
        resumed.stderr.contains("2 runs already done"),
        "{}",
        resumed.explain()
    );
    let cells = resumed.json["cells"].as_array().unwrap();
    let resumed_flags: Vec<bool> = cells
        .iter()
        .map(|c| c["runs"][0]["resumed"].as_bool().unwrap())
        .collect();
    assert_eq!(resumed_flags, [true, true, false]);
    assert_eq!(cells[2]["runs"][0]["verdict"], "ready");
    assert_eq!(cells[1]["runs"][0]["signature"], "cuda_error");
    // One matrix in the history, three runs: nothing ran twice.
    let rows = history_of(&env, resumed.json["matrix_id"].as_str().unwrap());
    assert_eq!(rows.len(), 3);
}

#[test]
fn an_ordered_axis_stops_after_the_first_cuda_oom() {
    let env = Env::new();
    let port = free_port();
    let file = env.path("ordered.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[base]
command = ["python3", "{server}", "--port", "{port}", "--step", "0.01"]
profile = "sglang"
stall = "5s"
grace = "2s"

[[axis]]
arg = "--mem-fraction-static"
values = ["0.80", "0.85", "0.90", "0.95"]
ordered = true
stop_on = ["cuda_oom"]
"#,
            server = server_fixture("fake_sglang_server.py"),
        ),
    )
    .unwrap();
    let r = matrix_json(&env, &file, &[]);
    assert_eq!(r.code, 1, "{}", r.explain());
    let cells = r.json["cells"].as_array().unwrap();
    let states: Vec<String> = cells
        .iter()
        .map(|c| {
            c["runs"][0]["signature"]
                .as_str()
                .or(c["runs"][0]["verdict"].as_str())
                .unwrap_or(c["state"].as_str().unwrap())
                .to_string()
        })
        .collect();
    assert_eq!(states, ["ready", "ready", "cuda_oom", "skipped"]);
    assert_eq!(
        cells[3]["reason"],
        "not run: mem-fraction-static stopped at 0.90 (cuda_oom)"
    );
}

#[test]
fn teardown_kills_a_server_that_ignores_sigterm_and_says_so() {
    let env = Env::new();
    let port = free_port();
    let file = sglang_matrix(
        &env,
        port,
        "[[exclude]]\nFLASHMLA = 1\n[[exclude]]\n\"torch.compile\" = \"on\"\n",
    );
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "grace = \"2s\"",
        "grace = \"1s\"\nenv = { FAKE_IGNORE_SIGTERM = \"1\" }",
    );
    std::fs::write(&file, text).unwrap();
    let r = matrix_json(&env, &file, &[]);
    assert_eq!(r.code, 0, "{}", r.explain());
    let run = &r.json["cells"][0]["runs"][0];
    assert_eq!(run["verdict"], "ready");
    assert_eq!(run["clean"], true);
    assert!(
        run["teardown"]
            .as_str()
            .unwrap()
            .contains("SIGKILL after the 1.0s grace"),
        "{run}"
    );
    // The port is free again: the next cell could bind it.
    TcpListener::bind(("127.0.0.1", port)).expect("the port was released");
}

/// A stand-in nvidia-smi that reports GPU memory for the pid in $FAKE_GPU_PIDFILE, forever (a
/// driver that never releases it).
fn stuck_gpu(env: &Env) -> (String, String) {
    let bin = env.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let pidfile = env.path("gpu.pid").display().to_string();
    let smi = bin.join("nvidia-smi");
    std::fs::write(
        &smi,
        "#!/bin/sh\n[ -s \"$FAKE_GPU_PIDFILE\" ] && echo \"$(cat \"$FAKE_GPU_PIDFILE\"), 20480\"\nexit 0\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    (path, pidfile)
}

#[test]
fn gpu_memory_never_released_stops_the_matrix_unless_allowed() {
    let env = Env::new();
    let (path, pidfile) = stuck_gpu(&env);
    let file = env.path("gpu.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[base]
command = ["sh", "-c", "echo $$ > {pidfile}; echo serving; exec sleep 300"]
ready_lines = ["serving"]
grace = "1s"

[[axis]]
env = "MODE"
values = ["a", "b"]
"#
        ),
    )
    .unwrap();
    let vars = [
        ("PATH", path.as_str()),
        ("FAKE_GPU_PIDFILE", pidfile.as_str()),
    ];
    let r = matrix_json(&env, &file, &vars);
    assert_eq!(r.code, 7, "{}", r.explain());
    let cells = r.json["cells"].as_array().unwrap();
    assert_eq!(cells[0]["runs"][0]["clean"], false);
    assert!(
        cells[0]["runs"][0]["teardown"]
            .as_str()
            .unwrap()
            .contains("20480 MiB of GPU memory still held"),
        "{}",
        r.explain()
    );
    assert_eq!(cells[1]["state"], "skipped");
    assert!(
        cells[1]["reason"]
            .as_str()
            .unwrap()
            .starts_with("not run: cell 1 left the machine dirty"),
        "{}",
        r.explain()
    );
    assert_eq!(r.json["state"], "stopped");

    let allowed = bounded(
        &env,
        &[
            "matrix",
            file.to_str().unwrap(),
            "--allow-dirty",
            "--format",
            "json",
        ],
        &vars,
        BOUND,
    );
    assert_eq!(allowed.code, 0, "{}", allowed.explain());
    assert_eq!(allowed.json["cells"][1]["state"], "done");
}

/// Runs `firedup matrix FILE --format json`, sends it SIGINT once a stderr line satisfies `when`,
/// and returns its exit code (None for a signal) and JSON; it must end within 60 s.
fn interrupt_once(
    env: &Env,
    file: &Path,
    vars: &[(&str, &str)],
    when: impl Fn(&str) -> bool,
) -> (Option<i32>, serde_json::Value) {
    signal_once(env, file, vars, "INT", when)
}

/// [`interrupt_once`] with another signal (`kill -SIGNAL`).
fn signal_once(
    env: &Env,
    file: &Path,
    vars: &[(&str, &str)],
    signal: &str,
    when: impl Fn(&str) -> bool,
) -> (Option<i32>, serde_json::Value) {
    let mut cmd = env.cmd();
    cmd.args(["matrix", file.to_str().unwrap(), "--format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the awaited line should come");
        if when(&line) {
            break;
        }
    }
    Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    // Bounded, generously: past it the matrix is killed and the test fails as a hang.
    let out = common::bounded::wait_output(child, Duration::from_secs(60));
    (
        Some(out.code).filter(|c| *c != -1),
        serde_json::from_str(out.stdout.trim()).unwrap_or_default(),
    )
}

#[test]
fn ctrl_c_tears_down_the_running_cell_and_keeps_the_finished_ones() {
    let env = Env::new();
    let file = matrix_file(
        &env,
        "ctrlc.toml",
        r#"
[base]
command = ["sh", "-c", "if [ \"$MODE\" = slow ]; then echo loading; exec sleep 300; fi; echo serving; exec sleep 300"]
ready_lines = ["serving"]
stall = "off"
grace = "2s"

[[axis]]
env = "MODE"
values = ["quick", "slow", "never"]
"#,
    );
    let (code, json) = interrupt_once(&env, &file, &[], |l| {
        l.contains("cell 2/3") && l.contains("following")
    });
    assert_eq!(code, Some(130), "{json}");
    assert_eq!(json["state"], "interrupted");
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells[0]["state"], "done");
    assert_eq!(cells[0]["runs"][0]["verdict"], "ready");
    assert_eq!(cells[1]["state"], "skipped");
    assert_eq!(cells[2]["reason"], "not run: interrupted (Ctrl-C)");
    // Only the finished cell is in the history; the interrupted one will run again on --resume.
    assert_eq!(
        history_of(&env, json["matrix_id"].as_str().unwrap()).len(),
        1
    );
    // Nothing of the interrupted cell is left running.
    let ps = env.fd("ps").flag("all").json().output();
    let runs = ps.json.as_array().expect("ps --json").clone();
    assert_eq!(runs.len(), 2, "{}", ps.explain());
    for r in runs {
        let pid = r["pid"].as_u64().unwrap();
        assert!(!common::alive(pid), "{r} is still running");
    }
}

/// A closed SSH terminal (SIGHUP) or a `kill` (SIGTERM) ends a matrix as Ctrl-C does: the running
/// cell's server is stopped, not left holding the machine (before: SIGHUP killed the matrix and
/// left the cell's server running).
#[test]
fn sighup_and_sigterm_tear_down_the_running_cell_as_ctrl_c_does() {
    for (signal, code) in [("HUP", 129), ("TERM", 143)] {
        let env = Env::new();
        let file = matrix_file(
            &env,
            "hangup.toml",
            r#"
[base]
command = ["sh", "-c", "echo loading; exec sleep 300"]
ready_lines = ["serving"]
stall = "off"
grace = "2s"

[[axis]]
env = "MODE"
values = ["slow", "never"]
"#,
        );
        let (got, json) = signal_once(&env, &file, &[], signal, |l| {
            l.contains("cell 1/2") && l.contains("following")
        });
        assert_eq!(got, Some(code), "SIG{signal}: {json}");
        assert_eq!(json["state"], "interrupted", "SIG{signal}");
        let ps = env.fd("ps").flag("all").json().output();
        let runs = ps.json.as_array().expect("ps --json").clone();
        assert_eq!(runs.len(), 1, "SIG{signal}: {}", ps.explain());
        let pid = runs[0]["pid"].as_u64().unwrap();
        assert!(
            !common::alive(pid),
            "SIG{signal}: {} is still running",
            runs[0]
        );
    }
}

#[test]
fn a_gpu_process_that_escaped_the_tree_is_found_by_teardown() {
    let env = Env::new();
    let (path, pidfile) = stuck_gpu(&env);
    // The server double-forks a worker into a session of its own: it is no longer in the
    // server's process tree, but it is the cell's, and it holds the GPU.
    let file = matrix_file(
        &env,
        "escape.toml",
        &format!(
            r#"
[base]
command = ["sh", "-c", "(setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' &); echo serving; exec sleep 300"]
ready_lines = ["serving"]
grace = "1s"

[[axis]]
env = "MODE"
values = ["a", "b"]
"#
        ),
    );
    let vars = [
        ("PATH", path.as_str()),
        ("FAKE_GPU_PIDFILE", pidfile.as_str()),
    ];
    let r = matrix_json(&env, &file, &vars);
    let escaped: u32 = std::fs::read_to_string(&pidfile)
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or(0);
    let survived = escaped > 0 && common::alive(escaped as u64);
    if escaped > 0 {
        let _ = Command::new("kill")
            .args(["-9", &escaped.to_string()])
            .status();
    }
    // The escaped worker carries the run's FIREDUP_RUN_ID: teardown stops it too, and the (fake)
    // driver that still lists its memory is reported.
    assert!(!survived, "the escaped worker {escaped} survived teardown");
    assert_eq!(r.code, 7, "{}", r.explain());
    let teardown = r.json["cells"][0]["runs"][0]["teardown"].as_str().unwrap();
    assert!(
        teardown.contains(&format!("pid {escaped} (exited) 20480 MiB")),
        "{}",
        r.explain()
    );
    assert_eq!(r.json["cells"][1]["state"], "skipped");
}

#[test]
fn in_parallel_a_cell_is_not_blamed_for_another_slots_gpu_process() {
    let env = Env::new();
    let (path, pidfile) = stuck_gpu(&env);
    // Slot 1's cell starts a GPU process a second in; slot 0's cell is torn down two seconds in,
    // while that process runs. Only its own processes count against slot 0's cell.
    let file = matrix_file(
        &env,
        "parallel-gpu.toml",
        &format!(
            r#"
[base]
command = ["sh", "-c", "if [ $MODE = other ]; then sleep 1; echo $$ > {pidfile}; fi; echo serving; exec sleep 300"]
ready_lines = ["serving"]
grace = "1s"

[[axis]]
env = "MODE"
values = ["quick", "other"]

[[slot]]
[[slot]]

[bench]
command = "sleep 2"
"#
        ),
    );
    let vars = [
        ("PATH", path.as_str()),
        ("FAKE_GPU_PIDFILE", pidfile.as_str()),
    ];
    let r = matrix_json(&env, &file, &vars);
    let cells = r.json["cells"].as_array().expect("cells");
    assert_eq!(cells[0]["runs"][0]["clean"], true, "{}", r.explain());
    // The other cell's own process is still listed by the stuck driver: that one is its dirt.
    assert_eq!(cells[1]["runs"][0]["clean"], false, "{}", r.explain());
    assert_eq!(r.code, 7, "{}", r.explain());
}

#[test]
fn a_cell_torn_down_by_ctrl_c_still_reports_a_dirty_machine() {
    let env = Env::new();
    let (path, pidfile) = stuck_gpu(&env);
    let file = matrix_file(
        &env,
        "ctrlc-dirty.toml",
        &format!(
            r#"
[base]
command = ["sh", "-c", "echo $$ > {pidfile}; echo loading; exec sleep 300"]
ready_lines = ["serving"]
stall = "off"
grace = "1s"

[[axis]]
env = "MODE"
values = ["a", "b"]
"#
        ),
    );
    let vars = [
        ("PATH", path.as_str()),
        ("FAKE_GPU_PIDFILE", pidfile.as_str()),
    ];
    let (code, json) = interrupt_once(&env, &file, &vars, |l| {
        l.contains("cell 1/2") && l.contains("following")
    });
    assert_eq!(code, Some(130), "{json}");
    assert_eq!(json["state"], "interrupted; a cell left the machine DIRTY");
    let reason = json["cells"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("not recorded; DIRTY: 20480 MiB"),
        "{reason}"
    );
    assert_eq!(json["cells"][1]["reason"], "not run: interrupted (Ctrl-C)");
}
