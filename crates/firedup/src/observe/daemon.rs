//! Following a daemon: a launcher that exited 0 in server mode while processes of its run live
//! on has daemonized; the oldest of them is followed from then on, and where its output goes is
//! told to the judge (a daemon writing to `/dev/null` can never print its ready line).

use std::sync::atomic::Ordering;

use super::LocalObserver;
use super::wake_sources::spawn_exit_watch;
use crate::judge::Observation;
use crate::process;

impl LocalObserver {
    /// The oldest live process of the run ([`process::of_run`]: never another user's that sets
    /// the run's `FIREDUP_RUN_ID`), its supervisor and the
    /// runtime helpers that end with the program that started them aside
    /// ([`process::interpreter_helper`]).
    pub(super) fn run_survivor(&self) -> Option<u32> {
        process::of_run(&self.target.run_id)
            .beside_supervisor()
            .into_iter()
            .find(|&p| !process::interpreter_helper::is_interpreter_helper(&process::argv(p)))
    }

    /// The launcher left `pid` running: its command, and where its output goes when it does not
    /// write the log (neither its descriptor 1 nor 2 is the log, and it holds the log open on no
    /// other descriptor).
    pub(super) fn launcher_left(&self, pid: u32) -> Observation {
        let log = std::fs::canonicalize(&self.target.log).ok();
        let output_of = |fd: u32| std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok();
        let (out, err) = (output_of(1), output_of(2));
        let writes_log = log.is_none()
            || out.is_none()
            || [&out, &err].iter().any(|o| o.as_ref() == log.as_ref())
            || !process::write_positions(pid, &self.target.log).is_empty();
        Observation::LauncherLeft {
            pid,
            command: process::cmdline(pid),
            output: out.filter(|_| !writes_log).map(|o| o.display().to_string()),
        }
    }

    /// Follows `pid` from now on: its exit wakes the observer, the prober checks its tree.
    pub(super) fn follow(&mut self, pid: u32) {
        self.following = Some(pid);
        self.process_gone_at = None;
        self.watched.store(pid, Ordering::Relaxed);
        spawn_exit_watch(pid, self.tx.clone(), self.stop.clone());
    }
}
