//! The run directory: one per run, mode 0700, under `$FIREDUP_STATE_DIR` or
//! `$XDG_STATE_HOME/firedup/runs` (default `~/.local/state/firedup/runs`).
//!
//! Files: `meta.json` (written by the launcher: command, cwd, redacted env overrides, log path,
//! profile, start time), `process.json` (written by the supervisor once the command runs: pid and
//! its start time, against pid reuse), `exit.json` (written by the supervisor when the command ends:
//! exit code or signal, core dump flag, end time; or the reason it could not start),
//! `verdict.json` (written by the launching firedup when it reaches its verdict:
//! [`verdict_record`]), `stop.json` (written by firedup's own stop before its first signal and
//! again with what it found: [`stop_record`]), `log_end.json` (written by the supervisor when the
//! run has ended, its command and whatever it left behind: the size of its log file then,
//! `rundir/log_share.rs`). Files are written
//! atomically (temp file + rename), so a reader never sees half of one.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Context, Error, Result, usage};
use serde::{Deserialize, Serialize};

use crate::verdict::ExitInfo;

mod names;
mod owner;
#[cfg(test)]
use crate::state_dir::state_root_from;
pub use crate::state_dir::{runs_root, state_root};
pub use names::{check_name, check_name_free, fresh_id, id_stem};
pub use owner::{Owner, OwnerGone};

/// What the launcher records about a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunMeta {
    /// The run's id: its directory's name under [`runs_root`], and the `FIREDUP_RUN_ID` every
    /// process of the run carries.
    pub run_id: String,
    /// The command and its arguments, secret-looking values replaced by `<redacted>` (the
    /// supervisor got the real ones on its stdin, never on disk).
    pub command: Vec<String>,
    /// The absolute working directory the command was started in.
    pub cwd: String,
    /// `--env` overrides, secret-looking values replaced by `<redacted>`.
    pub env: Vec<(String, String)>,
    /// Path of the log the command's stdout and stderr are appended to: `--log` made absolute,
    /// else `output.log` in the run directory.
    pub log: String,
    /// Name of the server profile the launch resolved to (given, or detected from the command;
    /// `generic` when none fits).
    pub profile: String,
    /// Server mode (`"ready"`: judged until ready) or job mode (`"exit"`: until it exits).
    pub mode: crate::judge::Mode,
    /// When the launcher recorded the run, just before the command started: Unix time in
    /// seconds.
    pub started_at: f64,
    /// Version of the firedup that launched the run.
    pub firedup_version: String,
    /// `--ready-line` patterns of the launch. This and the next three fields are the judging
    /// flags older firedups recorded (a newer record has them all in `options` too), so that
    /// `firedup watch RUN_ID` judges the same way.
    #[serde(default)]
    pub ready_lines: Vec<String>,
    /// `--fail-line` patterns of the launch.
    #[serde(default)]
    pub fail_lines: Vec<String>,
    /// `--stall` as written (`10m`, `off`); `None` when not given (the profile's or the
    /// default applied).
    #[serde(default)]
    pub stall: Option<String>,
    /// `--timeout` as written (`30m`, `off`); `None` when not given (the profile's or the
    /// default applied).
    #[serde(default)]
    pub timeout: Option<String>,
    /// All judging options of the launch (newer runs; the fields above stay for older readers).
    #[serde(default)]
    pub options: Option<crate::plan::WatchOptions>,
    /// The name a person gave the run (`run --name`).
    #[serde(default)]
    pub name: Option<String>,
    /// Where this launch's output begins in a log that already held something (`--log` is
    /// appended to): judging starts there, also for a later `firedup watch RUN_ID`.
    #[serde(default)]
    pub log_start: Option<crate::logstart::LogStart>,
    /// The identity of the log file the command's output went to (absent in runs of an older
    /// firedup): a reader finds it again after a rotation (see [`crate::launched_log`]).
    #[serde(default)]
    pub log_file: Option<crate::launched_log::FileId>,
    /// The batch job the run was submitted as (`run --slurm`): `stop`, `watch`, `ps` and the
    /// history find the job by it.
    #[serde(default)]
    pub job: Option<JobRecord>,
    /// The process whose end stops the run (`run --owner PID`).
    #[serde(default)]
    pub owner: Option<Owner>,
    /// The grace of the owner's stop (`run --grace`), in ms.
    #[serde(default)]
    pub grace_ms: Option<u64>,
}

/// A run's batch job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobRecord {
    /// The scheduler: `"slurm"`.
    pub scheduler: String,
    /// The job's id, as the scheduler gave it.
    pub id: String,
}

/// What the supervisor records once the command runs.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProcessRecord {
    /// Pid of the command (the supervisor's child, leader of its own session and process
    /// group).
    pub pid: u32,
    /// The command's start time after boot in clock ticks (`/proc/PID/stat`), which tells it
    /// from a later process given the same pid; 0 when it could not be read.
    pub start_ticks: u64,
    /// Pid of the supervisor (`firedup __supervise`), the command's parent.
    pub supervisor_pid: u32,
    /// The supervisor's start time after boot in clock ticks: with its pid, it identifies the
    /// supervisor every process of the run descends from (`process::membership`). `None` in
    /// records of an older firedup, or when it could not be read.
    #[serde(default)]
    pub supervisor_start_ticks: Option<u64>,
}

/// What the supervisor records when the command ends (or could not start).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExitRecord {
    /// The command's exit code or signal (and core dump flag); `None` when it never started.
    #[serde(default)]
    pub exit: Option<ExitInfo>,
    /// Why the command could not be started, one sentence (`command not found: ...`); `None`
    /// when it started.
    #[serde(default)]
    pub spawn_error: Option<String>,
    /// When the command ended, or its start failed: Unix time in seconds.
    pub ended_at: f64,
}

/// Refuses a state directory that another user could tamper with: it must be owned by the
/// effective user and writable by nobody else.
pub fn check_private(dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(dir)
        .with_context(|| format!("cannot read the state directory {}", dir.display()))?;
    let me = rustix::process::geteuid().as_raw();
    if !m.is_dir() || m.uid() != me || m.mode() & 0o022 != 0 {
        return Err(Error::StateDir(format!(
            "the state directory {} is not a private directory of yours (it must be owned by uid {me} and writable by no one else): set FIREDUP_STATE_DIR to one that is",
            dir.display()
        )));
    }
    Ok(())
}

/// A run directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// The run's id (the directory's name; `FIREDUP_RUN_ID` of its processes).
    pub id: String,
    /// The run directory's path, under [`runs_root`].
    pub path: PathBuf,
}

/// The current time as Unix time in seconds (0 when the clock is before 1970).
pub fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl RunDir {
    /// Creates a fresh run directory named after the command.
    pub fn create(command: &[String]) -> Result<RunDir> {
        let root = runs_root();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&root)
            .with_context(|| format!("cannot create the state directory {}", root.display()))?;
        let stem = id_stem(command);
        check_private(&root)?;
        if let Some(state) = root.parent() {
            check_private(state)?;
        }
        for attempt in 0..100u64 {
            let id = fresh_id(&stem, attempt);
            let path = root.join(&id);
            match fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    fs::set_permissions(&path, fs::Permissions::from_mode(0o700))?;
                    return Ok(RunDir { id, path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("cannot create run directory {}", path.display())
                    });
                }
            }
        }
        Err(Error::StateDir(format!(
            "cannot find a free run id under {}",
            root.display()
        )))
    }

    /// Opens an existing run by its id, or by the name a person gave it (`run --name`): the
    /// newest run of that name.
    pub fn open(id: &str) -> Result<RunDir> {
        if id.is_empty() || id.contains('/') || id.starts_with('.') {
            usage!("'{id}' is not a run id or name: see `firedup ps --all` for the runs there are");
        }
        let path = runs_root().join(id);
        if path.join("meta.json").is_file() {
            return Ok(RunDir {
                id: id.to_string(),
                path,
            });
        }
        if let Some(run) = RunDir::named(id) {
            return Ok(run);
        }
        usage!(
            "no run '{id}' (by id or name) under {}: see `firedup ps --all` for the runs there are",
            runs_root().display()
        )
    }

    /// The newest run named `name`.
    pub fn named(name: &str) -> Option<RunDir> {
        RunDir::list()
            .into_iter()
            .find(|r| r.meta().is_ok_and(|m| m.name.as_deref() == Some(name)))
    }

    /// Whether the run's command is still running (it has no exit record and its process lives).
    pub fn is_live(&self) -> bool {
        let Some(p) = self.process() else {
            // A batch job has no process record: it lives until its end is recorded (its watch,
            // or its stop, writes `exit.json`); `ps` asks the scheduler too.
            return self.exit().is_none() && self.meta().is_ok_and(|m| m.job.is_some());
        };
        match self.exit() {
            None => crate::process::is_alive(p.pid, Some(p.start_ticks).filter(|t| *t != 0)),
            // A launcher that exited 0 may have left a daemon serving: the run lives in it.
            Some(e) => e.exit.is_some_and(|x| x.code == Some(0)) && self.daemon().is_some(),
        }
    }

    /// A process of the run other than its supervisor ([`crate::process::of_run`]: a daemon
    /// the launcher left behind).
    pub fn daemon(&self) -> Option<u32> {
        crate::process::of_run(&self.id)
            .beside_supervisor()
            .first()
            .copied()
    }

    /// Every run, newest first.
    pub fn list() -> Vec<RunDir> {
        let root = runs_root();
        let Ok(rd) = fs::read_dir(&root) else {
            return Vec::new();
        };
        let mut runs: Vec<(f64, RunDir)> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let id = e.file_name().to_string_lossy().into_owned();
                let run = RunDir { id, path: e.path() };
                let meta = run.meta().ok()?;
                Some((meta.started_at, run))
            })
            .collect();
        runs.sort_by(|a, b| b.0.total_cmp(&a.0));
        runs.into_iter().map(|(_, r)| r).collect()
    }

    /// Reads the launcher's record, `meta.json`; `Err` when it is missing or unreadable.
    pub fn meta(&self) -> Result<RunMeta> {
        read_json(&self.path.join("meta.json"))
    }
    /// Writes `meta.json` atomically.
    pub fn write_meta(&self, meta: &RunMeta) -> Result<()> {
        write_json(&self.path.join("meta.json"), meta)
    }
    /// Reads `process.json`; `None` until the command has started (or when unreadable).
    pub fn process(&self) -> Option<ProcessRecord> {
        read_json(&self.path.join("process.json")).ok()
    }
    /// Writes `process.json` atomically.
    pub fn write_process(&self, rec: &ProcessRecord) -> Result<()> {
        write_json(&self.path.join("process.json"), rec)
    }
    /// Reads `exit.json`; `None` while the command runs (or when unreadable).
    pub fn exit(&self) -> Option<ExitRecord> {
        read_json(&self.path.join("exit.json")).ok()
    }
    /// Writes `exit.json` atomically.
    pub fn write_exit(&self, rec: &ExitRecord) -> Result<()> {
        write_json(&self.path.join("exit.json"), rec)
    }
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not valid", path.display()))
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    write_json_flushed(path, value, Flush::ToDisk)
}

/// Whether a record reaches the disk before it is renamed into place. Either way the rename
/// makes it whole and visible at once to every reader on this machine; the flush only matters
/// for a power loss or a kernel crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flush {
    ToDisk,
    /// For a record whose loss in a crash reads as "not recorded" and that someone waits for:
    /// a flush costs 2 to 15 ms on a loaded machine (issue 28).
    LeftToTheKernel,
}

fn write_json_flushed<T: Serialize>(path: &Path, value: &T, flush: Flush) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    write_json_file(&tmp, value, flush)?;
    fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Writes `value` as pretty JSON and a newline into a new or truncated file at `path`.
fn write_json_file<T: Serialize>(path: &Path, value: &T, flush: Flush) -> Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    // One write: the record and its newline (each write is a system call, and an event for
    // whoever watches the directory).
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    f.write_all(text.as_bytes())?;
    if flush == Flush::ToDisk {
        f.sync_data().ok();
    }
    Ok(())
}

mod log_share;
mod run_records;
pub mod stop_record;
#[cfg(test)]
mod tests;
pub mod verdict_record;

pub use log_share::LogEnd;
pub use run_records::RunRecords;
pub use stop_record::{StopRecord, StopResult};
