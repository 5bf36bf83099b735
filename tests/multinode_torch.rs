//! A real two-node torchrun job on the CPU (gloo) as one multi-node run (issue 27): two real
//! sshd on this machine are the nodes (tests/common/nodes.rs), each runs `torchrun --nnodes 2
//! --node_rank {node_rank} --master_addr {master_addr} --master_port {master_port}` with one
//! rank, node 0's rank 0 and node 1's rank 1 in one gloo group. All succeed; node 1's rank
//! raises an OOM while node 0's waits in a collective; node 1's processes are SIGKILLed; node 1
//! hangs before the collective (with two ranks a node, and with one: the rank named from the
//! ranks' places compared across the nodes; also of a node still silent, not yet stalled, when
//! the group decides); firedup is interrupted (every node torn down,
//! checked in /proc).
//!
//! PyTorch comes from `FIREDUP_TEST_TORCH_PYTHON` (CI installs it, see `.ci/run`); without it
//! the tests say so and pass without running.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::Env;
use common::nodes::Nodes;
use common::sshd::wait_bounded;

/// A hang bound, not a speed check: torch's import alone takes seconds on a loaded machine.
const BOUND: Duration = Duration::from_secs(600);

fn torch_python() -> Option<PathBuf> {
    let python = std::env::var_os("FIREDUP_TEST_TORCH_PYTHON")
        .map(PathBuf::from)
        .filter(|p| p.exists());
    if python.is_none() {
        eprintln!(
            "note: no PyTorch (set FIREDUP_TEST_TORCH_PYTHON to a python with torch): not run"
        );
    }
    python
}

/// The job: every rank joins a gloo group (each says so in a file under `dir`); then rank
/// `odd` does `code` while the others wait in an all_reduce.
fn script(dir: &Path, odd: u32, code: &str) -> String {
    format!(
        "import datetime, os, signal, sys, time
import torch, torch.distributed as dist
dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=900))
rank = dist.get_rank()
print(f'rank {{rank}} joined', flush=True)
mark = os.path.join('{dir}', f'joined-{{rank}}')
open(mark + '.tmp', 'w').write(f'{{os.getpid()}} {{os.getppid()}}')
os.rename(mark + '.tmp', mark)  # whole, never read half-written
if rank == {odd}:
    {code}
t = torch.ones(4)
dist.all_reduce(t)
print('all_reduce done', flush=True)
# Leave together: a rank that exits while its peer's gloo threads still talk can abort
# ('terminate called without an active exception', SIGABRT), a real torch teardown race.
dist.barrier()
dist.destroy_process_group()
",
        dir = dir.display()
    )
}

/// `firedup run --json --until exit --host node0 --host node1 -- torchrun ... job.py`, one
/// rank per node.
fn run_args(nodes: &Nodes, python: &Path, job: &Path) -> Vec<String> {
    run_args_ranks(nodes, python, job, 1)
}

/// As [`run_args`], with `per_node` ranks on each node.
fn run_args_ranks(nodes: &Nodes, python: &Path, job: &Path, per_node: u32) -> Vec<String> {
    let torchrun = python.with_file_name("torchrun");
    let mut a: Vec<String> = ["run", "--json", "--until", "exit", "--grace", "3s"]
        .map(String::from)
        .to_vec();
    a.extend(nodes.host_args());
    a.push("--".into());
    a.push(torchrun.display().to_string());
    for x in [
        "--nnodes",
        "2",
        "--nproc-per-node",
        &per_node.to_string(),
        "--node_rank",
        "{node_rank}",
        "--master_addr",
        "{master_addr}",
        "--master_port",
        "{master_port}",
    ] {
        a.push(x.into());
    }
    a.push(job.display().to_string());
    a
}

fn job(env: &Env, rank1: &str) -> PathBuf {
    job_with(env, 1, rank1)
}

/// The job with rank `odd` doing `code`.
fn job_with(env: &Env, odd: u32, code: &str) -> PathBuf {
    let p = env.path("job.py");
    std::fs::write(&p, script(env.work.path(), odd, code)).unwrap();
    p
}

/// The pids a rank wrote once it joined: its own and its launcher's.
fn joined(env: &Env, rank: u32) -> Option<(i32, i32)> {
    let text = std::fs::read_to_string(env.path(&format!("joined-{rank}"))).ok()?;
    let mut it = text.split_whitespace().map(|w| w.parse().ok());
    Some((it.next()??, it.next()??))
}

fn wait_joined(env: &Env, rank: u32) -> (i32, i32) {
    let deadline = Instant::now() + BOUND;
    loop {
        if let Some(p) = joined(env, rank) {
            return p;
        }
        assert!(Instant::now() < deadline, "rank {rank} never joined");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Processes whose command line names `needle`.
fn processes_naming(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.bytes().all(|b| b.is_ascii_digit()) || name == std::process::id().to_string() {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(needle) {
            found.push(format!("{name}: {text}"));
        }
    }
    found
}

#[test]
fn all_ranks_on_both_nodes_succeed() {
    let Some(python) = torch_python() else { return };
    let env = Env::new();
    let nodes = Nodes::start(&env, 2);
    let job = job(&env, "pass");
    let r = nodes.fd(&env, &run_args(&nodes, &python, &job));
    assert_eq!((r.code, r.verdict()), (0, "succeeded"), "{}", r.explain());
    let listed = r.json["nodes"].as_array().expect("nodes");
    for (i, n) in listed.iter().enumerate() {
        assert_eq!(
            (&n["node_rank"], &n["exit"]["code"]),
            (&serde_json::json!(i), &serde_json::json!(0)),
            "{n}"
        );
        let log = std::fs::read_to_string(n["log"].as_str().unwrap()).unwrap();
        assert!(log.contains("all_reduce done"), "node {i}'s log:\n{log}");
    }
}

#[test]
fn an_oom_on_node_1_is_the_cause_while_node_0_waits_in_the_collective() {
    let Some(python) = torch_python() else { return };
    let env = Env::new();
    let nodes = Nodes::start(&env, 2);
    let job = job(
        &env,
        "time.sleep(3); raise RuntimeError('CUDA out of memory. Tried to allocate 20.00 GiB (GPU 1; 79.15 GiB total capacity)')",
    );
    let r = nodes.fd(&env, &run_args(&nodes, &python, &job));
    assert_eq!((r.code, r.verdict()), (1, "failed"), "{}", r.explain());
    assert_eq!(
        (&r.json["node"], &r.json["rank"], &r.json["signature"]),
        (
            &serde_json::json!("node1"),
            &serde_json::json!(1),
            &serde_json::json!("cuda_oom")
        ),
        "{}",
        r.explain()
    );
    let line = r.json["line"]["text"].as_str().unwrap_or_default();
    assert!(line.contains("CUDA out of memory"), "{}", r.explain());
    assert_eq!(r.json["log"], r.json["nodes"][1]["log"], "{}", r.explain());
    // Node 0, still in the collective, had looked past the cause: decided on that (issue 27).
    assert_eq!(r.json["settled"]["by"], "evidence", "{}", r.explain());
    eprintln!(
        "verdict: node {} rank {} line {line:?}",
        r.json["node"], r.json["rank"]
    );
}

#[test]
fn node_1s_processes_killed_is_killed_naming_node_1() {
    let Some(python) = torch_python() else { return };
    let env = Env::new();
    let nodes = Nodes::start(&env, 2);
    let job = job(&env, "time.sleep(300)");
    let mut child = nodes.spawn(&env, &run_args(&nodes, &python, &job));
    wait_joined(&env, 0);
    let (rank1, launcher1) = wait_joined(&env, 1);
    for pid in [launcher1, rank1] {
        // SAFETY: kill(2) on a pid this test's job wrote.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let status = wait_bounded(&mut child, BOUND).expect("firedup ends");
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let explain = format!(
        "{status}\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_default();
    assert_eq!(
        (status.code(), &json["verdict"], &json["node"]),
        (
            Some(4),
            &serde_json::json!("killed"),
            &serde_json::json!("node1")
        ),
        "{explain}"
    );
    eprintln!(
        "verdict: node {} rank {} reason {}",
        json["node"], json["rank"], json["reason"]
    );
    assert!(
        processes_naming(&job.display().to_string()).is_empty(),
        "{explain}"
    );
}

#[test]
fn ctrl_c_tears_down_every_node() {
    let Some(python) = torch_python() else { return };
    let env = Env::new();
    let nodes = Nodes::start(&env, 2);
    let job = job(&env, "time.sleep(300)");
    let mut child = nodes.spawn(&env, &run_args(&nodes, &python, &job));
    wait_joined(&env, 0);
    wait_joined(&env, 1);
    let job_text = job.display().to_string();
    // Two launchers, two ranks (and firedup, whose COMMAND names the job too).
    let running = processes_naming(&job_text);
    if running.len() < 4 {
        let _ = child.kill();
        panic!("{running:?}");
    }
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_bounded(&mut child, BOUND).expect("firedup ends");
    let out = child.wait_with_output().unwrap();
    let explain = format!(
        "{status}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(status.code(), Some(130), "{explain}");
    // Each node's stop was verified before firedup exited: nothing of the job, nor any node's
    // supervisor (its run directory is under the remote state dir), is left.
    assert!(processes_naming(&job_text).is_empty(), "{explain}");
    // firedup's own bookkeeping may still be on its way out: a node's watch thread that saw its
    // run stopped records that verdict on the node (`ssh … __record-verdict`); SIGINT's exit
    // waits for it only so long (15 s). That is no process of the run, but it must end too.
    let state = nodes.remote_state.display().to_string();
    let supervisors: Vec<String> = processes_naming(&state)
        .into_iter()
        .filter(|p| !p.contains("__record-verdict"))
        .collect();
    assert!(supervisors.is_empty(), "{supervisors:?}\n{explain}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !processes_naming(&state).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left = processes_naming(&state);
    assert!(left.is_empty(), "{left:?}\n{explain}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for node in ["node 0 (node0)", "node 1 (node1)"] {
        assert!(stderr.contains(node), "{explain}");
    }
}

/// A two-ranks-a-node job whose rank 2 (on node 1) does `code` outside the collective its peers
/// wait in, watched with `--stall 20s`: `stalled`, naming node 1 and rank 2, and nothing of the
/// job left.
fn stalled_naming_node_1_rank_2(code: &str, stall: &str) {
    let Some(python) = torch_python() else { return };
    let env = Env::new();
    let nodes = Nodes::start(&env, 2);
    let job = job_with(&env, 2, code);
    let mut a = run_args_ranks(&nodes, &python, &job, 2);
    a.splice(2..2, ["--stall".to_string(), stall.to_string()]);
    let r = nodes.fd(&env, &a);
    eprintln!(
        "verdict: node {} rank {} reason {} settled {}",
        r.json["node"], r.json["rank"], r.json["reason"], r.json["settled"]
    );
    assert_eq!((r.code, r.verdict()), (6, "stalled"), "{}", r.explain());
    assert_eq!(
        (&r.json["node"], &r.json["rank"]),
        (&serde_json::json!("node1"), &serde_json::json!(2)),
        "{}\n{}",
        r.explain(),
        node_records(&r.json)
    );
    assert!(
        processes_naming(&job.display().to_string()).is_empty(),
        "{}",
        r.explain()
    );
}

/// Each node's log and recorded verdict (its run directory beside the log), for a failure's
/// message: what a node saw and when, which the group's own verdict summarizes.
fn node_records(group: &serde_json::Value) -> String {
    let mut out = String::new();
    for n in group["nodes"].as_array().into_iter().flatten() {
        let log = std::path::PathBuf::from(n["log"].as_str().unwrap_or_default());
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_else(|e| format!("({e})"));
        out += &format!(
            "--- {} log {}:\n{}\n--- its verdict.json:\n{}\n",
            n["node"],
            log.display(),
            read(&log),
            read(&log.with_file_name("verdict.json"))
        );
    }
    out
}

#[test]
fn node_1_hanging_before_the_collective_is_stalled_naming_node_1() {
    // Two ranks a node: node 1's rank 2 sleeps outside the collective its peers wait in (its
    // node's stacks tell it from rank 3, inside); node 0's ranks both wait inside.
    stalled_naming_node_1_rank_2("time.sleep(300)", "20s");
}

/// Node 1 shows a sign of life 12 s after node 0's last (its rank 2 prints, then sleeps): node
/// 0 stalls first, and when the group decides (10 s on), node 1 is still silent, its ranks'
/// places read but its own stall window not over. Its places count all the same: node 1's rank
/// 2 is named (were node 1 to stall first on a loaded machine, its own verdict names it too).
/// With a 30 s stall window node 1's stacks are read 15 s into its silence (five samples of 3
/// s), 13 s before the group decides; with 20 s the margin was 8 s. A loaded CI machine twice
/// gave node 1's tree a busy CPU sample about 10 s after its print (its launcher, torchrun's
/// agent, polling: the ranks were idle), which restarted the ranks' silence and pushed the read
/// past the group's decision (`stalled`, node 0, rank null: true, but the rank not named). Only
/// the ranks' own CPU restarts their silence now (`RankWatch::ranks_ticks`).
#[test]
fn node_1_silent_but_not_yet_stalled_when_the_group_decides_is_named_from_its_ranks_places() {
    stalled_naming_node_1_rank_2(
        "time.sleep(12); print('rank 2 still loading', flush=True); time.sleep(300)",
        "30s",
    );
}

#[test]
fn node_1s_only_rank_hanging_before_the_collective_is_stalled_naming_node_1_and_rank_1() {
    let Some(python) = torch_python() else { return };
    let env = Env::new();
    let nodes = Nodes::start(&env, 2);
    // One rank a node: node 1's rank 1 sleeps outside the collective node 0's rank 0 waits in.
    // Neither node has a second rank to compare its own against: the group compares them.
    let job = job_with(&env, 1, "time.sleep(300)");
    let mut a = run_args(&nodes, &python, &job);
    a.splice(2..2, ["--stall".to_string(), "20s".to_string()]);
    let r = nodes.fd(&env, &a);
    eprintln!(
        "verdict: node {} rank {} reason {}",
        r.json["node"], r.json["rank"], r.json["reason"]
    );
    assert_eq!((r.code, r.verdict()), (6, "stalled"), "{}", r.explain());
    assert_eq!(
        (&r.json["node"], &r.json["rank"]),
        (&serde_json::json!("node1"), &serde_json::json!(1)),
        "{}",
        r.explain()
    );
    let reason = r.json["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("rank 1 is not inside a collective") && reason.contains("rank 0 "),
        "the reason gives the evidence of both nodes: {}",
        r.explain()
    );
    for n in r.json["nodes"].as_array().expect("nodes") {
        assert_eq!(n["teardown"]["clean"], serde_json::json!(true), "{n}");
    }
    assert!(
        processes_naming(&job.display().to_string()).is_empty(),
        "{}",
        r.explain()
    );
}
