//! Launching a command so that it outlives firedup.
//!
//! firedup starts a small supervisor (a firedup binary, as `firedup __supervise RUN_DIR`: the
//! command line's own executable for [`launch`], the one a library user names for
//! [`launch_with`]) in a new session;
//! the supervisor starts the command in a session and process group of its own, with stdout and
//! stderr appended straight to the log file (opened once by the launcher, checked, and handed to
//! the supervisor as descriptor [`SUPERVISOR_LOG_FD`]: the path is never opened twice), and stays
//! its real parent: it records the pid
//! (`process.json`) and, when the command ends, its exit code or signal (`exit.json`). firedup
//! never holds the server's output; if firedup dies, the server, its log and its exit record live
//! on, and `firedup watch RUN_ID` re-attaches.
//!
//! The supervisor tells the launcher "started PID", "failed REASON" (the command could not be
//! started) or "error REASON" (firedup could not record the run; nothing was started) on a pipe.
//! The command is forked held and only exec'd once `process.json` is written
//! (`launch/held_start.rs`): nothing runs that a later `firedup stop` could not find. After "started"
//! it keeps the pipe and, when the command ends, writes `exit.json` and then one more line,
//! `exited JSON` (the same [`ExitRecord`]): the launching firedup learns the exit without an
//! inotify wake, a notify-thread hop and a re-read of the file ([`ExitPipe`]), and whoever it tells
//! can already find `exit.json`. The supervisor then stays until the last process re-parented
//! to it (a daemon the command left) has ended. That file stays the durable record: a firedup that re-attaches
//! later (`firedup watch RUN_ID`) reads it; a supervisor whose launcher is gone gets EPIPE and
//! carries on.

use std::fs;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{Context, Error, Result, usage};

use crate::launched_log::FileId;
use crate::process;
use crate::rundir::{ExitRecord, ProcessRecord, RunDir, RunMeta, now_unix};
use crate::secrets::{redact_args, shown_value};

mod held_start;

/// The descriptor the supervisor finds the log on (`__supervise RUN_DIR --log-fd 3`).
pub const SUPERVISOR_LOG_FD: i32 = 3;
mod supervisor;
pub use supervisor::supervise;

/// What to launch (also sent, as JSON on stdin, to a remote firedup: never on a command line).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct LaunchSpec {
    /// The program and its arguments, with their real values (they reach the supervisor on a
    /// pipe; `meta.json` stores them redacted).
    pub command: Vec<String>,
    /// The working directory (relative to the current one); `None`: the current directory.
    pub cwd: Option<PathBuf>,
    /// Variables set for the command on top of the launcher's environment (`meta.json` stores
    /// secret-looking values redacted).
    pub env: Vec<(String, String)>,
    /// The log path; `None` puts it in the run directory.
    pub log: Option<PathBuf>,
    /// Name of the resolved profile, recorded in `meta.json` (what judges is `judging`).
    pub profile: String,
    /// Server mode or job mode as `--until` gave it (`"mode": "ready"|"exit"` in meta.json).
    pub mode: crate::judge::Mode,
    /// Judging flags recorded for a later `firedup watch RUN_ID`.
    pub judging: crate::plan::WatchOptions,
    /// The name a person gave the run (`run --name`).
    #[serde(default)]
    pub name: Option<String>,
    /// The process whose end stops the run (`run --owner PID`): the supervisor watches it.
    #[serde(default)]
    pub owner: Option<crate::rundir::Owner>,
    /// How long the owner's stop waits after SIGTERM before SIGKILL (`run --grace`), in ms.
    #[serde(default)]
    pub grace_ms: Option<u64>,
}

impl LaunchSpec {
    /// The spec a recorded run was launched with, as far as its `meta.json` tells (secret env
    /// values are redacted there, which is all the history needs); `opts` stands in for judging
    /// options a run from an older firedup did not record.
    pub fn from_meta(
        m: &crate::rundir::RunMeta,
        profile: &str,
        opts: &crate::plan::WatchOptions,
    ) -> LaunchSpec {
        LaunchSpec {
            command: m.command.clone(),
            cwd: Some(PathBuf::from(&m.cwd)),
            env: m.env.clone(),
            log: None,
            profile: profile.to_string(),
            mode: m.mode,
            judging: m.options.clone().unwrap_or_else(|| opts.clone()),
            name: m.name.clone(),
            owner: m.owner,
            grace_ms: m.grace_ms,
        }
    }
}

/// A launched run.
#[derive(Debug)]
pub struct Launched {
    /// The run's directory (its id and path).
    pub run: RunDir,
    /// Path of the log the command's stdout and stderr are appended to (absolute, unless the
    /// state directory is given as a relative `FIREDUP_STATE_DIR`).
    pub log: PathBuf,
    /// Where this launch's output begins, when the log already held something.
    pub log_start: Option<crate::logstart::LogStart>,
    /// The identity of the log file the command writes to (see [`crate::launched_log`]).
    pub log_file: Option<FileId>,
    /// `Err(reason)` when the command could not be started.
    pub started: std::result::Result<ProcessRecord, String>,
    /// The supervisor (`firedup __supervise`), this process's child: it ends by itself once the
    /// command, and whatever the command left running, have ended.
    pub supervisor: Child,
    /// The supervisor's pipe, when the command started: its exit comes on it.
    pub exit_pipe: Option<ExitPipe>,
    /// The OOM-kill counter of firedup's own memory cgroup (file, count), read just before the
    /// launch: the command starts in that cgroup, and an OOM kill in its first moments, before
    /// the watch begins, still counts ([`crate::process::cgroup_oom_kills`]).
    pub oom_kills_before: Option<(String, u64)>,
}

/// The launcher's end of the supervisor's pipe once "started" was read. Clones share one pipe;
/// the first [`ExitPipe::wait`] takes it.
#[derive(Debug, Clone)]
pub struct ExitPipe(Arc<Mutex<Option<OwnedFd>>>);

impl ExitPipe {
    /// Blocks until the supervisor reports the command's exit (`Some`), the pipe ends without a
    /// report (the supervisor died, or another waiter took the pipe: `None`), or `stop()` says so;
    /// `stop` is checked every `check`.
    pub fn wait(&self, check: Duration, stop: &dyn Fn() -> bool) -> Option<ExitRecord> {
        let fd = self.0.lock().ok()?.take()?;
        let timeout = rustix::event::Timespec {
            tv_sec: check.as_secs() as i64,
            tv_nsec: check.subsec_nanos() as i64,
        };
        let mut line = Vec::new();
        let mut buf = [0u8; 512];
        loop {
            let mut fds = [rustix::event::PollFd::new(
                &fd,
                rustix::event::PollFlags::IN,
            )];
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(0) | Err(rustix::io::Errno::INTR) => {
                    if stop() {
                        return None;
                    }
                    continue;
                }
                Ok(_) => {}
                Err(_) => return None,
            }
            match rustix::io::read(&fd, &mut buf) {
                Ok(0) => return None,
                Ok(n) => line.extend_from_slice(&buf[..n]),
                Err(rustix::io::Errno::INTR) | Err(rustix::io::Errno::AGAIN) => continue,
                Err(_) => return None,
            }
            if let Some(end) = line.iter().position(|&b| b == b'\n') {
                return parse_exit_report(&line[..end]);
            }
        }
    }
}

/// The line the supervisor writes when the command ends.
fn exit_report_line(rec: &ExitRecord) -> Result<String> {
    Ok(format!("exited {}\n", serde_json::to_string(rec)?))
}

fn parse_exit_report(line: &[u8]) -> Option<ExitRecord> {
    let json = line.strip_prefix(b"exited ")?;
    serde_json::from_slice(json).ok()
}

/// Reads one line from the supervisor's pipe a byte at a time: what follows it (the exit report
/// of a command that ended at once) must stay in the pipe for [`ExitPipe::wait`].
fn read_first_line(r: &mut impl Read) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    loop {
        match r.read(&mut b) {
            Ok(0) => break,
            Ok(_) if b[0] == b'\n' => break,
            Ok(_) => line.push(b[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// What [`check`] resolved: the working directory and the log path (`None`: in the run directory).
#[derive(Debug, Clone)]
pub struct Checked {
    /// The working directory: the given one made canonical, else the current one.
    pub cwd: PathBuf,
    /// The log path made absolute against `cwd`; `None`: `output.log` in the run directory.
    pub log: Option<PathBuf>,
}

/// Validates a launch without creating anything: the command, the working directory and the
/// log path (it must be, or be creatable as, a regular file). A refused launch leaves no trace.
pub fn check(spec: &LaunchSpec) -> Result<Checked> {
    let checked = check_paths(&spec.command, spec.cwd.as_deref(), spec.log.as_deref())?;
    if let Some(name) = &spec.name {
        crate::rundir::check_name_free(name)?;
    }
    Ok(checked)
}

/// [`check`] on the parts it needs, for a caller that has no spec yet.
pub fn check_paths(command: &[String], cwd: Option<&Path>, log: Option<&Path>) -> Result<Checked> {
    if command.is_empty() {
        usage!(
            "no command given: write it after `--`, e.g. `firedup run --ready-line READY -- ./server`"
        );
    }
    let cwd = match cwd {
        Some(c) => {
            if !c.is_dir() {
                usage!("--cwd {} is not a directory", c.display());
            }
            fs::canonicalize(c)?
        }
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let log = log.map(|p| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        }
    });
    if let Some(log) = &log {
        crate::logpath::check_for_writing(log)?;
    }
    Ok(Checked { cwd, log })
}

/// Starts the supervisor (this executable: the command line) and waits for its one-line report.
pub fn launch(spec: &LaunchSpec) -> Result<Launched> {
    let exe = std::env::current_exe()
        .context("cannot find firedup's own executable to start the supervisor")?;
    launch_with(spec, &exe)
}

/// [`launch`] with the supervisor run by the firedup binary `firedup` (a library user's program
/// is not firedup: see [`Launch::firedup_bin`](crate::Launch::firedup_bin) and the crate
/// doc for how its binary is found).
pub fn launch_with(spec: &LaunchSpec, firedup: &Path) -> Result<Launched> {
    let checked = check(spec)?;
    let run = RunDir::create(&spec.command)?;
    match start(spec, checked, run.clone(), firedup) {
        Ok(l) => Ok(l),
        Err(e) => {
            // Nothing ran: a refused launch leaves no empty run directory behind.
            if run.process().is_none() && run.exit().is_none() {
                let _ = fs::remove_dir_all(&run.path);
            }
            Err(e)
        }
    }
}

fn start(spec: &LaunchSpec, checked: Checked, run: RunDir, exe: &Path) -> Result<Launched> {
    // The secrets of this launch are redacted wherever the server prints them.
    crate::secrets::learn_launch(&spec.env, &spec.command);
    let cwd = checked.cwd;
    let log = checked.log.unwrap_or_else(|| run.path.join("output.log"));
    let (log_fd, log_file) = prepare_log(&log)?;
    let log_start = crate::logstart::measure_open(&log_fd)?;
    let meta = RunMeta {
        run_id: run.id.clone(),
        // What is stored is shown (`ps`, the history): secrets redacted. The supervisor gets
        // the command itself on its stdin.
        command: redact_args(&spec.command),
        cwd: cwd.display().to_string(),
        env: spec
            .env
            .iter()
            .map(|(k, v)| (k.clone(), shown_value(k, v).to_string()))
            .collect(),
        log: log.display().to_string(),
        profile: spec.profile.clone(),
        mode: spec.mode,
        started_at: now_unix(),
        firedup_version: env!("CARGO_PKG_VERSION").to_string(),
        ready_lines: spec.judging.ready_lines.clone(),
        fail_lines: spec.judging.fail_lines.clone(),
        stall: spec.judging.stall.clone(),
        timeout: spec.judging.timeout.clone(),
        options: Some(spec.judging.stored()),
        name: spec.name.clone(),
        log_start,
        log_file: Some(log_file),
        job: None,
        owner: spec.owner,
        grace_ms: spec.grace_ms,
    };
    run.write_meta(&meta)?;
    let supervisor_log = fs::File::create(run.path.join("supervisor.log"))?;
    let oom_kills_before = crate::process::cgroup_oom_kills(std::process::id());
    let mut cmd = Command::new(exe);
    cmd.arg("__supervise")
        .arg(&run.path)
        .arg("--log-fd")
        .arg(SUPERVISOR_LOG_FD.to_string())
        .current_dir(&cwd)
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        // Every process of the run inherits its id: what escapes the process tree (a
        // double-forked worker) is still recognisably the run's.
        .env("FIREDUP_RUN_ID", &run.id)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(supervisor_log));
    // The log goes to the supervisor as descriptor SUPERVISOR_LOG_FD, the file opened and
    // checked above: the path is never opened again (another user may have swapped it since).
    let raw_log = std::os::fd::AsRawFd::as_raw_fd(&log_fd);
    // SAFETY: setsid, fcntl and dup2 are async-signal-safe and touch no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            if raw_log == SUPERVISOR_LOG_FD {
                // dup2 onto itself keeps close-on-exec: clear it.
                if libc::fcntl(raw_log, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(raw_log, SUPERVISOR_LOG_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut supervisor = cmd
        .spawn()
        .context("cannot start firedup's supervisor process")?;
    drop(log_fd);
    // The command with its real arguments goes to the supervisor on a pipe, never to disk (a
    // failed write shows as the supervisor's own failure below).
    if let Some(mut stdin) = supervisor.stdin.take() {
        let _ = serde_json::to_writer(&mut stdin, &spec.command);
    }
    let mut stdout = supervisor
        .stdout
        .take()
        .ok_or_else(|| Error::Supervisor("supervisor pipe".into()))?;
    let first = read_first_line(&mut stdout).context("cannot read the supervisor's report")?;
    let first = first.trim_end();
    let started = if let Some(pid) = first.strip_prefix("started ") {
        let pid: u32 = pid
            .parse()
            .map_err(|e| Error::Supervisor(format!("supervisor reported a bad pid: {e}")))?;
        let rec = run.process().unwrap_or(ProcessRecord {
            pid,
            start_ticks: process::stat(pid).map(|s| s.start_ticks).unwrap_or(0),
            supervisor_pid: supervisor.id(),
            supervisor_start_ticks: process::stat(supervisor.id()).map(|s| s.start_ticks),
        });
        Ok(rec)
    } else if let Some(reason) = first.strip_prefix("failed ") {
        Err(reason.to_string())
    } else if let Some(reason) = first.strip_prefix("error ") {
        // firedup's own failure (it could not record the run): nothing was started.
        return Err(Error::Supervisor(reason.to_string()));
    } else {
        let detail = fs::read_to_string(run.path.join("supervisor.log")).unwrap_or_default();
        return Err(Error::Supervisor(format!(
            "firedup's supervisor died before starting the command: {}",
            detail.trim()
        )));
    };
    // The supervisor records the file it opened, should it not be this one (replaced since).
    let log_file = run.meta().ok().and_then(|m| m.log_file).or(Some(log_file));
    let exit_pipe = started
        .is_ok()
        .then(|| ExitPipe(Arc::new(Mutex::new(Some(OwnedFd::from(stdout))))));
    Ok(Launched {
        run,
        log,
        log_start,
        log_file,
        started,
        supervisor,
        exit_pipe,
        oom_kills_before,
    })
}

/// Opens the log to append to, once (see [`crate::writable_file`]), in a directory that exists
/// (the run's own, or one [`check_paths`] found for `--log`: none is created); the file must be a regular file of the user (or created by this open) and no other
/// process may be writing to it (by identity, so a hard link to another run's log is refused
/// too). Returns the open file, to be handed on, and its identity.
pub(crate) fn prepare_log(log: &Path) -> Result<(fs::File, FileId)> {
    let file =
        crate::writable_file::open_for_writing(log, crate::writable_file::Purpose::Log)?.file;
    let id = FileId::of(&file.metadata()?);
    crate::logpath::check_no_other_writer(log, &id)?;
    Ok((file, id))
}

/// One sentence for an exec failure.
pub fn describe_spawn_error(program: &str, e: &std::io::Error) -> String {
    let path = Path::new(program);
    match e.raw_os_error() {
        Some(libc::ENOENT) => {
            if program.contains('/') {
                format!("command not found: {program} does not exist")
            } else {
                format!("command not found: {program} is not on PATH")
            }
        }
        Some(libc::EACCES) if path.is_dir() => {
            format!("cannot execute {program}: it is a directory")
        }
        Some(libc::EACCES) => {
            format!("cannot execute {program}: permission denied (is it executable?)")
        }
        Some(libc::ENOEXEC) => {
            format!(
                "cannot execute {program}: exec format error (not a program for this machine, nor a script with a #! line)"
            )
        }
        _ => format!("cannot execute {program}: {e}"),
    }
}

/// "command not found: ..." when `command`'s program does not exist on this machine (no such
/// file, or a bare name on no PATH directory); `None` when it exists or no command was given. For
/// a usage mistake found before launch, so that the most basic one is said first.
pub fn missing_program(command: &[String]) -> Option<String> {
    let program = command.first()?;
    let found = resolve_program(program).is_some_and(|p| p.exists());
    let enoent = std::io::Error::from_raw_os_error(libc::ENOENT);
    (!found).then(|| describe_spawn_error(program, &enoent))
}

/// The file `program` names, as execvp would find it (PATH for a bare name).
fn resolve_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// A regular file that is neither an ELF binary, nor a `#!` script, nor text: what the kernel
/// refuses with ENOEXEC and a shell would choke on. Shebang-less text scripts are left to run as
/// the shell runs them.
fn is_binary_without_format(path: &Path) -> bool {
    use std::io::Read;
    let Ok(mut f) = fs::File::open(path) else {
        return false;
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = [0u8; 512];
    let n = f.read(&mut head).unwrap_or(0);
    let head = &head[..n];
    if head.starts_with(b"\x7fELF") || head.starts_with(b"#!") || head.is_empty() {
        return false;
    }
    head.iter()
        .any(|&b| b == 0 || (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_started_line_is_read_alone_and_the_exit_report_after_it_comes_through_the_pipe() {
        let rec = ExitRecord {
            exit: Some(crate::verdict::ExitInfo::code(3)),
            spawn_error: None,
            ended_at: 12.5,
        };
        let (mut r, mut w) = std::io::pipe().unwrap();
        // A command that ends at once: both lines are in the pipe before the launcher reads.
        w.write_all(format!("started 42\n{}", exit_report_line(&rec).unwrap()).as_bytes())
            .unwrap();
        drop(w);
        assert_eq!(read_first_line(&mut r).unwrap(), "started 42");
        let pipe = ExitPipe(Arc::new(Mutex::new(Some(OwnedFd::from(r)))));
        let other = pipe.clone();
        assert_eq!(pipe.wait(Duration::from_millis(50), &|| false), Some(rec));
        assert_eq!(
            other.wait(Duration::from_millis(50), &|| false),
            None,
            "taken once"
        );
    }

    #[test]
    fn a_pipe_that_ends_without_a_report_gives_none() {
        let (r, w) = std::io::pipe().unwrap();
        drop(w);
        let pipe = ExitPipe(Arc::new(Mutex::new(Some(OwnedFd::from(r)))));
        assert_eq!(pipe.wait(Duration::from_millis(50), &|| false), None);
    }
}
