//! Following a daemon: a launcher that exited 0 in server mode while processes of its run live
//! on has daemonized; the oldest of them is followed from then on, and where its output goes is
//! told to the judge (a daemon writing to `/dev/null` can never print its ready line).

use std::sync::atomic::Ordering;

use super::LocalObserver;
use super::wake_sources::spawn_exit_watch;
use crate::judge::Observation;
use crate::process;

impl LocalObserver {
    /// The oldest live process of the run (by its `FIREDUP_RUN_ID`), its supervisor and the
    /// runtime helpers that end with the program that started them aside
    /// ([`process::interpreter_helper`]).
    pub(super) fn run_survivor(&self) -> Option<u32> {
        process::of_run(&self.target.run_id)
            .pids
            .into_iter()
            .find(|&p| {
                !process::is_supervisor(p)
                    && !process::interpreter_helper::is_interpreter_helper(&process::argv(p))
            })
    }

    pub(super) fn launcher_left(&self, pid: u32) -> Observation {
        Observation::LauncherLeft {
            pid,
            command: process::cmdline(pid),
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
