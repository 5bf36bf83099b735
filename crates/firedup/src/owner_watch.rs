//! The supervisor's watch over the run's owner (`run --owner PID`): when the owner ends, however
//! it ends (SIGKILL included), the run is stopped and checked gone, also when no other firedup
//! is alive (the supervisor is the run's parent and outlives the `firedup run` that launched it).
//!
//! A thread blocks in `poll` on the owner's pidfd (the supervisor's main thread blocks in
//! `waitpid`). An owner already gone when the watch begins (no such pid, or another process
//! with its pid: the start time differs) counts as ended at once. On the owner's end the thread
//! first records it in the run directory (`owner_gone.json`: whoever judges the SIGTERM that
//! follows learns it was firedup's, because the owner ended), then stops the run
//! ([`crate::stop::stop_run`]: SIGTERM, grace, SIGKILL, verify) and records what the stop found.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::rundir::{Owner, OwnerGone, RunDir, now_unix};

/// How often the owner's liveness is read where no pidfd can be had (a kernel before 5.3).
const POLL_WITHOUT_PIDFD: Duration = Duration::from_millis(500);

/// The grace of the owner's stop when the launch recorded none.
const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// The run's command, as the supervisor started it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Command {
    pub pid: u32,
    pub start_ticks: u64,
}

/// A running watch over the owner.
#[derive(Debug)]
pub(crate) struct OwnerWatch {
    stopping: Arc<AtomicBool>,
    thread: JoinHandle<Vec<String>>,
}

impl OwnerWatch {
    /// Starts watching `owner` for run `run`, whose command is `command`; `grace_ms` is the
    /// launch's `--grace`.
    pub(crate) fn start(
        owner: Owner,
        run: RunDir,
        command: Command,
        grace_ms: Option<u64>,
    ) -> OwnerWatch {
        let stopping = Arc::new(AtomicBool::new(false));
        let flag = stopping.clone();
        let grace = grace_ms.map(Duration::from_millis).unwrap_or(DEFAULT_GRACE);
        let thread = std::thread::spawn(move || {
            wait_for_end(owner);
            flag.store(true, Ordering::SeqCst);
            stop_for_owner(owner, &run, command, grace)
        });
        OwnerWatch { stopping, thread }
    }

    /// Called when the supervisor has nothing left to wait for: a stop under way is waited for
    /// (its record is written before the supervisor ends); an owner still alive is left (the
    /// run ended on its own). Returns what went wrong recording the stop.
    pub(crate) fn finish(self) -> Vec<String> {
        if self.stopping.load(Ordering::SeqCst) {
            self.thread.join().unwrap_or_default()
        } else {
            Vec::new()
        }
    }
}

/// Blocks until `owner` has ended (at once when it has already).
fn wait_for_end(owner: Owner) {
    let Some(pid) = rustix::process::Pid::from_raw(owner.pid as i32) else {
        return;
    };
    match rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
        Ok(fd) => {
            // The pidfd names whatever process has the pid now: it is the owner only if the
            // start time still matches (checked after the open, so a reuse cannot slip between).
            if !owner.is_alive() {
                return;
            }
            let fd = fd.as_fd();
            loop {
                let mut fds = [rustix::event::PollFd::new(
                    &fd,
                    rustix::event::PollFlags::IN,
                )];
                match rustix::event::poll(&mut fds, None) {
                    Ok(n) if n > 0 => return,
                    Ok(_) | Err(rustix::io::Errno::INTR) => continue,
                    Err(_) => break,
                }
            }
        }
        Err(rustix::io::Errno::SRCH) => return,
        Err(_) => {}
    }
    // No pidfd: the safety net, a liveness read now and then.
    while owner.is_alive() {
        std::thread::sleep(POLL_WITHOUT_PIDFD);
    }
}

/// Records the owner's end, stops the run, records what the stop found. Returns what could not
/// be recorded.
fn stop_for_owner(owner: Owner, run: &RunDir, command: Command, grace: Duration) -> Vec<String> {
    let mut problems = Vec::new();
    let mut record = OwnerGone {
        owner: owner.pid,
        noticed_at: now_unix(),
        stop: None,
    };
    // The record first: the SIGTERM below must never be judged someone else's.
    if let Err(e) = run.write_owner_gone(&record) {
        problems.push(format!("cannot record that the run's owner ended: {e}"));
    }
    let report =
        crate::stop::stop_run(Some(command.pid), Some(command.start_ticks), &run.id, grace);
    record.stop = Some(report);
    if let Err(e) = run.write_owner_gone(&record) {
        problems.push(format!("cannot record the owner's stop: {e}"));
    }
    problems
}
