//! Issue 27's figure, not a test (ignored; BENCHMARKS.md): how long a failed two-node group
//! takes from its cause to its verdict, with the binary under test and `FIREDUP_BENCH_BEFORE`
//! (another build of firedup) run in turn on the same two sshd nodes. Node 1 writes the Unix
//! time, then its CUDA OOM line, and exits 1; node 0 keeps printing. Prints one row per run:
//! which binary, seconds from the cause to firedup's exit (its verdict printed), the verdict's
//! node and `settled`, and the load average. Asserts nothing about time.
//!
//! `FIREDUP_BENCH_BEFORE=/path/to/old/firedup FIREDUP_BENCH_RUNS=5 cargo test --release --test
//! main group_settle_bench -- --ignored --nocapture`

use crate::common;

use common::Env;
use common::nodes::{Nodes, args};

#[test]
#[ignore = "a benchmark: run by hand, see BENCHMARKS.md"]
fn cause_to_verdict_of_a_failed_two_node_group() {
    let before = std::env::var("FIREDUP_BENCH_BEFORE").expect("FIREDUP_BENCH_BEFORE");
    let runs: usize = std::env::var("FIREDUP_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let env = Env::new();
    let nodes = Nodes::start(&env, 2);
    let cause = env.path("cause_at");
    let script = env.script(
        "job.sh",
        &format!(
            "if [ \"$FIREDUP_NODE_RANK\" = 1 ]; then sleep 2; date +%s.%N > {c}; echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB'; exit 1; fi\n\
             while true; do echo 'node 0 waits in all_reduce'; sleep 0.2; done",
            c = cause.display()
        ),
    );
    let after = env!("CARGO_BIN_EXE_firedup").to_string();
    let mut a = args(&["run", "--json", "--until", "exit", "--grace", "2s"]);
    a.extend(nodes.host_args());
    a.extend(args(&["--", &script]));
    for i in 0..runs {
        for (name, bin) in [("before", &before), ("after", &after)] {
            let _ = std::fs::remove_file(&cause);
            let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            let mut c = std::process::Command::new(bin);
            c.env("FIREDUP_STATE_DIR", env.state.path())
                .env("FIREDUP_PLAIN", "1")
                .env("FIREDUP_SSH_CONFIG", &nodes.config)
                .env("FIREDUP_REMOTE_STATE_DIR", &nodes.remote_state)
                .current_dir(env.work.path())
                .args(&a);
            let out = c.output().expect("firedup runs");
            let ended = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            let json: serde_json::Value =
                serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
            let cause_at: f64 = std::fs::read_to_string(&cause)
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(f64::NAN);
            println!(
                "run {i} {name}: cause to verdict {:.2} s; verdict {} node {} settled {} after {}; load {}",
                ended - cause_at,
                json["verdict"],
                json["node"],
                json["settled"]["by"],
                json["settled"]["after_s"],
                load.split_whitespace()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
    }
}
