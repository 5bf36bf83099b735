//! Shared helpers for integration tests: run the real binary with its own state directory.
#![allow(dead_code)]

pub mod bounded;
pub mod cgroup;
pub mod gpu_recordings;
pub mod invocation;
pub mod live;
pub mod llama;
pub mod llama_cpp_python;
pub mod nodes;
pub mod old_glibc;
pub mod other_user;
pub mod pg;
pub mod recorded_logs;
pub mod server_groups;
pub mod slurm;
pub mod sshd;
pub mod vllm;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub struct Env {
    pub state: tempfile::TempDir,
    pub work: tempfile::TempDir,
}

pub struct Run {
    pub code: i32,
    pub json: serde_json::Value,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

/// A run a test left running (a server it saw `ready`, a test that failed before its end) is
/// stopped with the test's environment: a test's servers do not outlive it (seen: the fake LLM
/// servers of the probe tests, still running after the test binary had ended).
impl Drop for Env {
    fn drop(&mut self) {
        // Said on stderr when it fails, never a panic in a drop (a test failing already).
        let runs: serde_json::Value = match self.cmd().args(["ps", "--json"]).output() {
            Ok(out) => serde_json::from_slice(&out.stdout).unwrap_or_default(),
            Err(e) => {
                eprintln!("test environment: cannot list its runs to stop them: {e}");
                return;
            }
        };
        for id in runs
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["run_id"].as_str())
        {
            match self.cmd().args(["stop", id]).output() {
                Ok(out) if out.status.success() => {}
                Ok(out) => eprintln!(
                    "test environment: `firedup stop {id}` left something: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                Err(e) => eprintln!("test environment: cannot stop {id}: {e}"),
            }
        }
    }
}

impl Env {
    pub fn new() -> Env {
        Env {
            state: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_firedup"));
        // firedup keeps a signal ignored at its start ignored (issue 24, item 6): started as
        // from a terminal, whatever the test runner ignores (a CI job under nohup, a background
        // job's SIGINT), so the tests that send it signals see what a user's Ctrl-C does.
        // SAFETY: signal(2) only, between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            c.pre_exec(|| {
                for s in [libc::SIGINT, libc::SIGHUP, libc::SIGTERM] {
                    libc::signal(s, libc::SIG_DFL);
                }
                Ok(())
            });
        }
        c.env("FIREDUP_STATE_DIR", self.state.path())
            .env("FIREDUP_PLAIN", "1")
            .env("RUST_BACKTRACE", "0")
            .current_dir(self.work.path());
        c
    }

    /// Runs firedup with `args`; parses stdout as JSON when it is JSON.
    pub fn firedup(&self, args: &[&str]) -> Run {
        self.cmd_json(args, &[])
    }

    /// A `vllm` executable in the work dir (so a command line reads `./vllm serve MODEL --port
    /// P`) that runs the scripted server `tests/fixtures/servers/fake_llm_server.py`.
    pub fn fake_vllm(&self) -> String {
        self.script(
            "vllm",
            &format!(
                "exec python3 {} \"$@\"",
                fixture("servers/fake_llm_server.py")
            ),
        )
    }

    /// Writes an executable shell script into the work dir.
    pub fn script(&self, name: &str, body: &str) -> String {
        let p = self.path(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p.display().to_string()
    }
}

impl Run {
    pub fn verdict(&self) -> &str {
        self.json["verdict"].as_str().unwrap_or("<no json>")
    }
    pub fn signature(&self) -> Option<&str> {
        self.json["signature"].as_str()
    }
    pub fn run_id(&self) -> &str {
        self.json["run_id"].as_str().unwrap_or("")
    }
    pub fn explain(&self) -> String {
        format!(
            "exit {} after {:?}\nstdout: {}\nstderr: {}",
            self.code, self.took, self.stdout, self.stderr
        )
    }
}

/// A file under `tests/fixtures/`, as an absolute path.
pub fn fixture(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
        .display()
        .to_string()
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn alive(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s.rsplit(')').next().unwrap_or("").trim().chars().next();
            state != Some('Z') && state != Some('X')
        }
        Err(_) => false,
    }
}

/// The process that does the work of the `firedup run` or `firedup watch` whose pid the caller
/// holds: its only child (the process the caller started waits for it; `src/front.rs`), once it
/// exists. Bounded by the caller.
#[allow(dead_code)] // Not every test module stops or inspects the watcher itself.
pub fn watcher_of(front: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{front}/task/{front}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

pub fn file_text(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

impl Env {
    /// `firedup run --json --until exit -- sh tests/fixtures/replay.sh LOG EXIT`: a recorded log
    /// printed as a command's output, which then exits with `exit` (a number, or `hang`).
    #[allow(dead_code)] // Not every test binary that includes `common` replays logs.
    pub fn replay(&self, log: &str, exit: &str) -> Run {
        let replay = fixture("replay.sh");
        self.cmd_json(
            &[
                "run", "--json", "--until", "exit", "--", "sh", &replay, log, exit,
            ],
            &[],
        )
    }

    /// Like `firedup`, with extra environment variables for firedup (and so for the command).
    pub fn cmd_json(&self, args: &[&str], vars: &[(&str, &str)]) -> Run {
        let started = Instant::now();
        let mut c = self.cmd();
        for (k, v) in vars {
            c.env(k, v);
        }
        let out = c.args(args).output().expect("firedup runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let json = serde_json::from_str(stdout.trim()).unwrap_or(serde_json::Value::Null);
        Run {
            code: out.status.code().unwrap_or(-1),
            json,
            stdout,
            stderr,
            took: started.elapsed(),
        }
    }
}

/// Writes a log of 64 MiB of start-up chatter ending in `last`: far more than one read of the
/// follower, for the tests of a reader that falls behind.
pub fn write_long_log(path: &Path, last: &str) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let filler = format!("{}\n", "loading: ".repeat(113));
    for _ in 0..(64 << 20) / filler.len() {
        f.write_all(filler.as_bytes()).unwrap();
    }
    writeln!(f, "{last}").unwrap();
}
