//! Live ranks through the real binary, on a real `torchrun --nproc-per-node 2` (PyTorch, gloo, on
//! the CPU): the first rank process to die is observed with its rank and how it ended, and when
//! every rank is silent, the one outside the collective its peer waits in is named.
//!
//! PyTorch comes from `FIREDUP_TEST_TORCH_PYTHON` (CI installs it, see `.ci/run`), else
//! `/work/torchvenv/bin/python`; without either the tests say so and pass without running.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::Env;
use common::bounded::run_bounded;

/// A hang bound, not a speed check: torch's import alone takes seconds on a loaded machine.
const BOUND: Duration = Duration::from_secs(600);

fn torch_python() -> Option<PathBuf> {
    let python = std::env::var_os("FIREDUP_TEST_TORCH_PYTHON")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/work/torchvenv/bin/python")))
        .filter(|p| p.exists());
    if python.is_none() {
        eprintln!(
            "note: no PyTorch (set FIREDUP_TEST_TORCH_PYTHON to a python with torch): not run"
        );
    }
    python
}

/// The launcher: the `torchrun` beside the python, else `python -m torch.distributed.run`.
fn torchrun(python: &Path, port: u16) -> Vec<String> {
    let beside = python.with_file_name("torchrun");
    let mut argv = if beside.exists() {
        vec![beside.display().to_string()]
    } else {
        vec![
            python.display().to_string(),
            "-m".into(),
            "torch.distributed.run".into(),
        ]
    };
    for a in [
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
    ] {
        argv.push(a.into());
    }
    argv.push(port.to_string());
    argv
}

/// Two ranks join a gloo group; rank 0 blocks in an all_reduce while rank 1 does `rank1`.
fn script(rank1: &str) -> String {
    format!(
        "import datetime, os, signal, time
import torch, torch.distributed as dist
dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=900))
rank = dist.get_rank()
print(f'rank {{rank}} joined', flush=True)
if rank == 1:
    {rank1}
t = torch.ones(4)
dist.all_reduce(t)
print('all_reduce done', flush=True)
"
    )
}

/// Runs the script under torchrun through `firedup run --until exit`; the verdict's JSON and the
/// `--events` stream.
fn run_ranks(
    env: &Env,
    python: &Path,
    rank1: &str,
    extra: &[&str],
) -> (serde_json::Value, Vec<serde_json::Value>, String) {
    let py = env.path("ranks.py");
    std::fs::write(&py, script(rank1)).unwrap();
    let events = env.path("events.jsonl");
    let mut cmd = env.cmd();
    cmd.args(["run", "--json", "--until", "exit", "--events"])
        .arg(&events)
        .args(extra)
        .arg("--")
        .args(torchrun(python, common::free_port()))
        .arg(&py);
    let out = run_bounded(cmd, BOUND);
    let json = serde_json::from_str(out.stdout.trim()).unwrap_or(serde_json::Value::Null);
    let stream: Vec<serde_json::Value> = common::file_text(&events)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let explain = format!(
        "exit {} after {:?}\nstdout: {}\nstderr: {}",
        out.code, out.took, out.stdout, out.stderr
    );
    (json, stream, explain)
}

fn of_kind<'a>(events: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

#[test]
fn the_first_rank_to_die_is_observed_with_its_signal() {
    let Some(python) = torch_python() else { return };
    let env = Env::new();
    // Long enough after joining for the observer's scan (every 2 s) to have seen both ranks.
    let (json, events, explain) = run_ranks(
        &env,
        &python,
        "time.sleep(8); os.kill(os.getpid(), signal.SIGKILL)",
        &[],
    );
    let ended = of_kind(&events, "rank_ended");
    assert!(!ended.is_empty(), "no rank_ended event\n{explain}");
    let first = ended[0];
    assert_eq!(first["rank"], 1, "{first}\n{explain}");
    assert_eq!(first["exit"]["signal"], 9, "{first}\n{explain}");
    // Once per rank: rank 0, ended by the launcher afterwards, comes later if at all.
    let ranks: Vec<&serde_json::Value> = ended.iter().map(|e| &e["rank"]).collect();
    assert_eq!(
        ranks.iter().filter(|r| **r == 1).count(),
        1,
        "{ranks:?}\n{explain}"
    );
    assert_eq!(
        (&json["verdict"], &json["signature"], &json["rank"]),
        (
            &serde_json::json!("killed"),
            &serde_json::json!("sigkill"),
            &serde_json::json!(1)
        ),
        "{explain}"
    );
}

/// Whether the kernel shows where a sleeping process waits (its wait channel or kernel stack),
/// or py-spy is installed: the comparison needs one of them.
fn stacks_visible() -> bool {
    let on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("py-spy").is_file()));
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = sleeper.id();
    let mut seen = String::new();
    for _ in 0..50 {
        let wchan = common::file_text(Path::new(&format!("/proc/{pid}/wchan")));
        let stack = common::file_text(Path::new(&format!("/proc/{pid}/stack")));
        seen = format!("{wchan} {stack}");
        if seen.contains("nanosleep") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let visible = on_path || seen.contains("nanosleep");
    if !visible {
        eprintln!(
            "note: the kernel hides wait channels here ({seen:?}) and py-spy is not installed: not run"
        );
    }
    visible
}

#[test]
fn the_silent_rank_outside_the_collective_is_named() {
    let Some(python) = torch_python() else { return };
    if !stacks_visible() {
        return;
    }
    let env = Env::new();
    let (json, events, explain) =
        run_ranks(&env, &python, "time.sleep(100000)", &["--stall", "20s"]);
    assert_eq!(json["verdict"], "stalled", "{explain}");
    assert_eq!(
        json["rank"], 1,
        "the stall names the rank outside the collective\n{explain}"
    );
    let outside = of_kind(&events, "rank_outside_collective");
    assert!(
        !outside.is_empty(),
        "no rank_outside_collective event\n{explain}"
    );
    assert_eq!(outside[0]["rank"], 1, "{}\n{explain}", outside[0]);
    let evidence = outside[0]["evidence"].as_str().unwrap_or("");
    assert!(evidence.starts_with("rank 1 "), "{evidence}");
    assert!(evidence.contains("rank 0 "), "{evidence}");
    assert!(
        of_kind(&events, "rank_ended")
            .iter()
            .all(|e| e["t"].as_f64() >= outside[0]["t"].as_f64()),
        "no rank ended before the stall\n{explain}"
    );
}
