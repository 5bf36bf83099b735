//! What one watch is about: the log, the process (pid and start time against pid reuse), the run
//! directory when firedup launched it, and where this launch's output begins in the log. Built
//! from a launch ([`Target::from_launch`]), a found run or an attach; read by the observers, the
//! hosts and the engine.

use std::path::PathBuf;
use std::sync::Arc;

use crate::launched_log::FileId;
use crate::logstart::LogStart;
use crate::probe::notify::NotifySocket;
use crate::rundir::RunDir;

/// What to watch.
#[derive(Debug, Clone, Default)]
pub struct Target {
    /// The log file to follow.
    pub log: PathBuf,
    /// The watched process: the launched command (the supervisor's child), or the one given or
    /// found writing the log when attaching; `None` when it never started or is not known.
    pub pid: Option<u32>,
    /// `pid`'s start time after boot in clock ticks, which tells it from a later process given
    /// the same pid; `None` when unknown.
    pub start_ticks: Option<u64>,
    /// The run directory, when firedup launched it (exit status comes from there).
    pub run: Option<RunDir>,
    /// The launch failed with this reason.
    pub spawn_error: Option<String>,
    /// The run's id (its processes' `FIREDUP_RUN_ID`); empty when attaching to a log that
    /// firedup did not launch.
    pub run_id: String,
    /// The sd_notify socket given to the command (`--notify`).
    pub notify: Option<Arc<NotifySocket>>,
    /// The supervisor's pipe, when this process launched the run: the exit comes on it sooner than
    /// through `exit.json`.
    pub exit_pipe: Option<crate::launch::ExitPipe>,
    /// Where the launch's output begins in a log that already held something: judging starts
    /// there, so what the file held before the launch is never judged.
    pub log_start: Option<crate::logstart::LogStart>,
    /// The identity of the file the launch wrote to, when recorded: a log rotated before it is
    /// followed is still read (see [`crate::launched_log`]).
    pub log_file: Option<FileId>,
    /// The OOM-kill counter of the cgroup the command was launched in, read just before the
    /// launch ([`crate::launch::Launched::oom_kills_before`]); `None` when attaching.
    pub oom_kills_before: Option<(String, u64)>,
}

impl Target {
    /// The file the launch wrote to and where its output begins there: the identity the launch
    /// recorded (a run of an older firedup recorded one only when the log already held
    /// something, with its start), and the start when it was measured in that same file.
    pub fn launched_log(&self) -> Option<(FileId, Option<LogStart>)> {
        let from_start = |s: LogStart| FileId {
            dev: s.dev,
            ino: s.ino,
            born: None,
        };
        let id = self.log_file.or(self.log_start.map(from_start))?;
        let start = self.log_start.filter(|s| from_start(*s).is(&id));
        Some((id, start))
    }

    /// The target for a run firedup just launched.
    pub fn from_launch(l: &crate::launch::Launched) -> Target {
        match &l.started {
            Ok(p) => Target {
                log: l.log.clone(),
                pid: Some(p.pid),
                start_ticks: Some(p.start_ticks).filter(|t| *t != 0),
                run: Some(l.run.clone()),
                spawn_error: None,
                run_id: l.run.id.clone(),
                notify: None,
                exit_pipe: l.exit_pipe.clone(),
                log_start: l.log_start,
                log_file: l.log_file,
                oom_kills_before: l.oom_kills_before.clone(),
            },
            Err(reason) => Target {
                log: l.log.clone(),
                pid: None,
                start_ticks: None,
                run: Some(l.run.clone()),
                spawn_error: Some(reason.clone()),
                run_id: l.run.id.clone(),
                notify: None,
                exit_pipe: None,
                log_start: l.log_start,
                log_file: l.log_file,
                oom_kills_before: None,
            },
        }
    }
}
