//! A multi-node Slurm job through the real binary and a real two-node Slurm
//! (tests/slurm/two_node_cluster.sh: fdnode1 and fdnode2, each slurmd in its own network, UTS and
//! mount namespace; .ci/run starts it and exports its slurm.conf as FIREDUP_TEST_SLURM2_CONF).
//! Issue 27: the verdict names the node (from srun's own report of its tasks) beside the rank,
//! and the job is cancelled with no task left on either node. Without that cluster each test
//! says so and passes, unless `FIREDUP_TEST_REQUIRE_SLURM=1` (CI), which makes it fail.
//!
//! Every firedup call is bounded (`--timeout`); no test asserts a duration.

use crate::common;

use std::time::Duration;

use common::Env;
use common::slurm::{processes_of, wait_for};

/// The two-node cluster's slurm.conf, if one answers here.
fn two_nodes() -> Option<String> {
    let conf = std::env::var("FIREDUP_TEST_SLURM2_CONF").ok().filter(|c| {
        std::process::Command::new("sinfo")
            .env("SLURM_CONF", c)
            .args(["-h", "-o", "%n"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("fdnode2"))
    });
    if conf.is_none() {
        assert!(
            std::env::var("FIREDUP_TEST_REQUIRE_SLURM").as_deref() != Ok("1"),
            "FIREDUP_TEST_REQUIRE_SLURM=1 but no two-node Slurm answers: start one with `bash tests/slurm/two_node_cluster.sh start DIR` and export FIREDUP_TEST_SLURM2_CONF=DIR/slurm.conf"
        );
        eprintln!("skipped: no two-node Slurm here (tests/slurm/two_node_cluster.sh)");
    }
    conf
}

#[test]
fn a_task_failing_on_the_second_node_is_named_with_its_node_and_the_job_is_gone_from_both() {
    let Some(conf) = two_nodes() else {
        return;
    };
    // (case, what task 1 on fdnode2 does, verdict, signature)
    let cases = [
        (
            "an OOM printed by task 1",
            "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2; exit 3",
            "failed",
            Some("cuda_oom"),
        ),
        (
            "task 1 killed by SIGKILL, silent",
            "kill -9 $$",
            "killed",
            Some("sigkill"),
        ),
    ];
    for (case, task1, verdict, signature) in cases {
        let env = Env::new();
        let script = env.script(
            "job.sh",
            &format!(
                "srun -l sh -c 'echo on $(hostname) task $SLURM_PROCID; sleep 2; if [ $SLURM_PROCID = 1 ]; then {task1}; fi; echo task $SLURM_PROCID waits in all_reduce; sleep 30'",
                task1 = task1.replace('\'', "'\\''")
            ),
        );
        let r = env.cmd_json(
            &[
                "run",
                "--slurm",
                "--json",
                "--sbatch-arg=--nodes=2",
                "--until",
                "exit",
                "--timeout",
                "3m",
                "--",
                &script,
            ],
            &[("SLURM_CONF", &conf)],
        );
        let explain = format!("{case}: {}", r.explain());
        assert_eq!(r.verdict(), verdict, "{explain}");
        assert_eq!(r.signature(), signature, "{explain}");
        assert_eq!(r.json["rank"], 1, "{explain}");
        assert_eq!(r.json["node"], "fdnode2", "{explain}");
        assert_eq!(
            r.json["job"]["nodes"],
            serde_json::json!(["fdnode1", "fdnode2"]),
            "{explain}"
        );
        // Cancelled, and verified: no task of the run on either node (both nodes' processes
        // are this machine's, in their own namespaces).
        let run_id = r.json["run_id"].as_str().unwrap_or_default().to_string();
        let left = wait_for(Duration::from_secs(60), || {
            processes_of(&run_id).is_empty().then_some(())
        });
        assert!(
            left.is_some(),
            "{explain}\nprocesses of the run left: {:?}",
            processes_of(&run_id)
        );
    }
}
