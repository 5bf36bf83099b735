//! Running a helper process with a hard bound: killed, and the test failed, past it.

use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl From<Out> for super::Run {
    /// The same outcome, stdout parsed as JSON when it is JSON.
    fn from(out: Out) -> super::Run {
        super::Run {
            json: serde_json::from_str(out.stdout.trim()).unwrap_or(serde_json::Value::Null),
            code: out.code,
            stdout: out.stdout,
            stderr: out.stderr,
            took: out.took,
        }
    }
}

/// Runs `cmd` to completion, killing it if it outlives `bound`.
pub fn run_bounded(mut cmd: Command, bound: Duration) -> Out {
    let what = format!("{cmd:?}");
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    wait_output(child, bound)
}

/// Waits for a spawned `child` (stdout/stderr piped or null) to finish, killing it past `bound`.
pub fn wait_output(child: std::process::Child, bound: Duration) -> Out {
    let started = Instant::now();
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(bound) {
        Ok(Ok(out)) => Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            took: started.elapsed(),
        },
        Ok(Err(e)) => panic!("waiting for pid {pid}: {e}"),
        Err(_) => {
            // SAFETY: kill(2) on the pid of our own child, not yet reaped (its waiter thread is
            // still blocked in wait).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("pid {pid} ran past the bound of {bound:?}");
        }
    }
}

/// Waits (polling every 20 ms, at most `bound`) until `what` yields a value; the test fails
/// past the bound, naming what it waited for.
pub fn wait_for<T>(what: &str, bound: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "waited {bound:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
