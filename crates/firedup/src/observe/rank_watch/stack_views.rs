//! How each rank's stack is read for the comparison of [`super::RankWatch::check_silence`]:
//! `py-spy dump` where it is on the PATH (bounded by [`PY_SPY_BOUND`]), else the kernel's view of
//! the main thread. The ranks are read in parallel, so a comparison takes as long as its slowest
//! rank, not their sum: deadlines wait for it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::super::{Wake, WakeTx};
use crate::process;
use crate::rank_stacks::{self, RankStack, View};

/// How long `py-spy dump` may take before the kernel's view is used instead.
pub(super) const PY_SPY_BOUND: Duration = Duration::from_secs(10);

/// Ends a comparison when dropped: clears its flag and wakes the judge loop, which decides no
/// deadline while the flag is set. On drop, so that a panic cannot leave it set.
pub(super) struct ComparisonDone {
    checking: Arc<AtomicBool>,
    tx: WakeTx,
}

impl ComparisonDone {
    pub(super) fn new(checking: Arc<AtomicBool>, tx: WakeTx) -> ComparisonDone {
        ComparisonDone { checking, tx }
    }
}

impl Drop for ComparisonDone {
    fn drop(&mut self) {
        self.checking.store(false, Ordering::Relaxed);
        let _ = self.tx.send(Wake::Fs);
    }
}

/// Each `(rank, pid)`'s stack, read in parallel.
pub(super) fn read_stacks(ranks: &[(u32, u32)]) -> Vec<RankStack> {
    let py_spy = on_path("py-spy");
    std::thread::scope(|scope| {
        let reads: Vec<_> = ranks
            .iter()
            .map(|&(rank, pid)| {
                let py_spy = py_spy.as_ref();
                scope.spawn(move || RankStack {
                    rank,
                    view: py_spy
                        .and_then(|p| python_view(p, pid))
                        .unwrap_or_else(|| kernel_view(pid)),
                })
            })
            .collect();
        reads.into_iter().filter_map(|r| r.join().ok()).collect()
    })
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The main thread's Python stack by `py-spy dump`, bounded; `None` when it fails.
fn python_view(py_spy: &PathBuf, pid: u32) -> Option<View> {
    let mut child = std::process::Command::new(py_spy)
        .args(["dump", "--pid", &pid.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    // Read on a thread of its own: a dump larger than the pipe must not block py-spy.
    let mut out = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut text);
        text
    });
    let deadline = Instant::now() + PY_SPY_BOUND;
    let exited = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.success(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break false;
            }
        }
    };
    let text = reader.join().ok()?;
    if !exited {
        return None;
    }
    let frames = rank_stacks::parse_py_spy_dump(&text).filter(|f| !f.is_empty())?;
    Some(View::Python(frames))
}

/// The kernel's view of the main thread: its state, wait channel and kernel stack (the stack is
/// readable as root only; the wait channel is enough).
pub(super) fn kernel_view(pid: u32) -> View {
    let task = format!("/proc/{pid}/task/{pid}");
    let read = |f: &str| std::fs::read_to_string(format!("{task}/{f}")).unwrap_or_default();
    View::Kernel {
        state: process::parse_stat(&read("stat")).map_or('?', |s| s.state),
        wchan: read("wchan").trim().to_string(),
        stack: rank_stacks::parse_kernel_stack(&read("stack")),
    }
}
