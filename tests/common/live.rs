//! The harness of the live inference-server tests (`tests/live_vllm.rs`, `tests/live_sglang.rs`):
//! firedup's JSON as a [`Run`], a [`Stopper`] that stops a run whatever the test found, the
//! decisive-line check, the process tree of a run and its titled processes, and bounded waits
//! (hang bounds, never speed checks).

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use super::bounded::{Out, run_bounded, wait_output};
use super::{Env, Run};

/// The longest one firedup command may take before the test kills it.
pub const BOUND: Duration = Duration::from_secs(900);

/// A finished firedup command, its stdout read as JSON.
pub fn to_run(out: Out) -> Run {
    let json = serde_json::from_str(out.stdout.trim()).unwrap_or(serde_json::Value::Null);
    Run {
        code: out.code,
        json,
        stdout: out.stdout,
        stderr: out.stderr,
        took: out.took,
    }
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

/// The decisive line's text.
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

/// The process of `tree` whose title (its command line's first word) begins `title`: servers
/// rename their children (vLLM's `VLLM::EngineCore`, sglang's `sglang::scheduler`).
pub fn titled(tree: &[u32], title: &str) -> Option<u32> {
    tree.iter().copied().find(|p| {
        std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
            c.split(|b| *b == 0)
                .next()
                .is_some_and(|first| first.starts_with(title.as_bytes()))
        })
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

/// Waits (bounded) for an event whose JSON text holds `needle`; the watched pid from the
/// `started` event.
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

/// A background firedup command's result (bounded).
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

/// Another HTTP server (`python3 -m http.server`) holding `port` on 127.0.0.1, answering once this
/// returns (bounded); killed and reaped on drop.
pub struct OtherHttpServer(Child);

impl OtherHttpServer {
    pub fn start(env: &Env, port: u16) -> OtherHttpServer {
        let child = std::process::Command::new("python3")
            .args([
                "-m",
                "http.server",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .current_dir(env.work.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let other = OtherHttpServer(child);
        let answering = wait_until(BOUND, || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()
        });
        assert!(answering.is_some(), "http.server never answered on {port}");
        other
    }
}

impl Drop for OtherHttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
