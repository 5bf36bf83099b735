//! The supervisor's body (`firedup __supervise RUN_DIR`): reads the command from the launcher,
//! starts it held (`held_start`), records it in `process.json` before it may exec, tells the
//! launcher `started PID` / `failed REASON` / `error REASON`, waits for it, writes `exit.json`
//! and sends the same record on the pipe, then stays (as the subreaper) until whatever the
//! command left behind has ended. With an owner (`run --owner`), it also watches the owner and
//! stops the run when the owner ends (`crate::owner_watch`). See the parent module for the
//! launcher's side.

use std::fs;
use std::io::{Read, Write};
use std::path::Path;

use super::{
    describe_spawn_error, exit_report_line, held_start, is_binary_without_format, resolve_program,
};
use crate::error::{Context, Error, Result, chain, usage};
use crate::launched_log::FileId;
use crate::owner_watch;
use crate::process;
use crate::rundir::{ExitRecord, ProcessRecord, RunDir, now_unix};

/// Sends one line to the launcher. It may be gone already (killed right after the run was
/// recorded): the supervisor carries on regardless, to record the exit.
fn tell_launcher(launcher: &mut fs::File, line: &str) {
    let _ = writeln!(launcher, "{line}");
    let _ = launcher.flush();
}

/// The supervisor's body (`firedup __supervise RUN_DIR`): the command comes on `input`, the
/// reports go to the launcher on `launcher` (the pipe the launcher reads; the caller keeps
/// nothing else writing on it), and what the supervisor has to say about its own failures to
/// `diagnostics` (its `supervisor.log`). `log` is the log file the launcher opened and checked
/// (`__supervise --log-fd N`); without it, the log on record is opened here by the same rules
/// ([`crate::writable_file`]). Returns once the command and whatever it left behind have ended.
pub fn supervise(
    run_path: &Path,
    input: &mut dyn Read,
    mut launcher: fs::File,
    log: Option<fs::File>,
    diagnostics: &mut dyn Write,
) -> Result<i32> {
    let run = RunDir {
        id: String::new(),
        path: run_path.to_path_buf(),
    };
    // Killed by the OOM killer before its command, it would leave no record of how that ended;
    // the command gets back the value the supervisor was started with.
    crate::oom_score::protect_own();
    let restore = crate::oom_score::for_children();
    let mut meta = run.meta()?;
    // The command itself comes on stdin (meta.json holds it with secrets redacted).
    let mut text = String::new();
    input
        .read_to_string(&mut text)
        .context("cannot read the command from the launcher")?;
    meta.command = serde_json::from_str(&text).context("bad command from the launcher")?;
    if meta.command.is_empty() {
        return Err(Error::Supervisor("no command from the launcher".into()));
    }
    let log = match log {
        Some(f) => f,
        None => {
            crate::writable_file::open_for_writing(
                Path::new(&meta.log),
                crate::writable_file::Purpose::Log,
            )?
            .file
        }
    };
    let log_meta = log.metadata()?;
    if let Some(what) = crate::logpath::not_a_file(log_meta.file_type()) {
        usage!("the log {} is {what}, not a regular file", meta.log);
    }
    // The file the command's output goes to is the one on record (the launcher recorded the file
    // it prepared; another may have been put at the path since). Re-read, so that the command's
    // real arguments (secrets) read above never reach the disk.
    let log_file = FileId::of(&log_meta);
    if !meta.log_file.is_some_and(|f| f.is(&log_file)) {
        let mut recorded = run.meta()?;
        recorded.log_file = Some(log_file);
        run.write_meta(&recorded)?;
    }
    // Orphaned grandchildren are re-parented to us, so they are reaped and stay in view. A
    // launcher gone before our report is an EPIPE, not a SIGPIPE that would end us unrecorded.
    // SAFETY: plain prctl and signal calls with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    if let Some(path) = resolve_program(&meta.command[0]) {
        if is_binary_without_format(&path) {
            // execvp would hand it to /bin/sh as a script (its ENOEXEC fallback), which then
            // fails on garbage with a syntax error: say what it is instead.
            let e = std::io::Error::from_raw_os_error(libc::ENOEXEC);
            let reason = describe_spawn_error(&meta.command[0], &e);
            run.write_exit(&ExitRecord {
                exit: None,
                spawn_error: Some(reason.clone()),
                ended_at: now_unix(),
            })?;
            tell_launcher(&mut launcher, &format!("failed {reason}"));
            return Ok(0);
        }
    }
    // The command is held at the gate until its record is safe: nothing runs unrecorded.
    let held = match held_start::start_held(&meta.command, &log, restore) {
        Ok(h) => h,
        Err(e) => {
            let reason = describe_spawn_error(&meta.command[0], &e);
            let _ = run.write_exit(&ExitRecord {
                exit: None,
                spawn_error: Some(reason.clone()),
                ended_at: now_unix(),
            });
            tell_launcher(&mut launcher, &format!("failed {reason}"));
            return Ok(0);
        }
    };
    // Only a reference to the file is kept (O_PATH: no access, so the supervisor is never
    // taken for a writer of the log), to record its size when the command ends (`log_end.json`).
    let log_ref = rustix::fs::openat(
        rustix::fs::CWD,
        format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&log)),
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok();
    drop(log);
    let pid = held.pid;
    let start_ticks = process::stat(pid).map(|s| s.start_ticks).unwrap_or(0);
    if let Err(e) = run.write_process(&ProcessRecord {
        pid,
        start_ticks,
        supervisor_pid: std::process::id(),
        supervisor_start_ticks: process::stat(std::process::id()).map(|s| s.start_ticks),
    }) {
        held.abandon();
        let _ = fs::remove_file(run.path.join("process.json.tmp"));
        tell_launcher(
            &mut launcher,
            &format!(
                "error cannot record the run in {} ({}), so the command was not started: free space there or set FIREDUP_STATE_DIR to another directory",
                run.path.display(),
                chain(&e)
            ),
        );
        return Ok(0);
    }
    if let Err(e) = held.release() {
        let reason = describe_spawn_error(&meta.command[0], &e);
        let _ = fs::remove_file(run.path.join("process.json"));
        let _ = run.write_exit(&ExitRecord {
            exit: None,
            spawn_error: Some(reason.clone()),
            ended_at: now_unix(),
        });
        tell_launcher(&mut launcher, &format!("failed {reason}"));
        return Ok(0);
    }
    tell_launcher(&mut launcher, &format!("started {pid}"));
    // The run's owner (`run --owner`) is watched from here on: its end stops the run.
    let owner_watch = meta.owner.map(|owner| {
        let run = RunDir {
            id: meta.run_id.clone(),
            path: run.path.clone(),
        };
        let command = owner_watch::Command { pid, start_ticks };
        owner_watch::OwnerWatch::start(owner, run, command, meta.grace_ms)
    });
    // The pipe stays for the exit report. From here on the launcher may be gone: a write then
    // fails with EPIPE (SIGPIPE is ignored, so it cannot kill us before exit.json is written).
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid with a valid out-pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            break;
        }
        if r as u32 == pid {
            let exit = if libc::WIFSIGNALED(status) {
                crate::verdict::ExitInfo::signal(libc::WTERMSIG(status), libc::WCOREDUMP(status))
            } else {
                crate::verdict::ExitInfo::code(libc::WEXITSTATUS(status))
            };
            let rec = ExitRecord {
                exit: Some(exit),
                spawn_error: None,
                ended_at: now_unix(),
            };
            // The record first: once the launcher hears of the exit, `firedup ps` or a re-attach
            // finds it (sending first saves its fsync, ~0.6 ms, and loses that). The launcher
            // hears of it also when the record cannot be written (a full disk).
            let recorded = run.write_exit(&rec);
            let _ = launcher.write_all(exit_report_line(&rec)?.as_bytes());
            if let Err(e) = recorded {
                let _ = writeln!(diagnostics, "firedup supervisor: {}", chain(&e));
            }
            // No break: what the command left behind (a daemon, re-parented to us as the
            // subreaper) stays our child until it ends, so it is still found as the run's by
            // ancestry, also when it overwrote its environment (redis's setproctitle does).
        }
    }
    // Everything the run started has ended (no child is left): this is where the run's part of
    // the log ends. Not at the command's exit: a daemon it left (re-parented to us) writes on.
    // Best effort: a run without it ends where the next launch begins.
    if let Some(st) = log_ref.as_ref().and_then(|f| rustix::fs::fstat(f).ok()) {
        let end = crate::rundir::LogEnd {
            file: log_file,
            size: st.st_size as u64,
        };
        if let Err(e) = run.write_log_end(&end) {
            let _ = writeln!(diagnostics, "firedup supervisor: {}", chain(&e));
        }
    }
    for problem in owner_watch.map(|w| w.finish()).unwrap_or_default() {
        let _ = writeln!(diagnostics, "firedup supervisor: {problem}");
    }
    Ok(0)
}
