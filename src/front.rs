//! The process the shell waits for (issue 28: ready in milliseconds).
//!
//! `firedup run` and `firedup watch` split in two before anything else happens: the process the
//! caller started (the *front*) forks the one that does the work (the *watcher*) and then only
//! waits, single-threaded and small, for the watcher's exit code on a pipe. The watcher sends it
//! as soon as the verdict is given ([`verdict_given`]: printed, `verdict.json` written, the
//! teardown it reports verified; a local single run's verdict), and the front exits with that
//! code at once. On every other path (a multi-node group, `--detach`, a usage error, `pending`)
//! the watcher sends nothing: the front exits as the watcher does, once it has ended, as one
//! process did (a group's node agents, whose command lines name the job, wind down meanwhile;
//! `multinode_torch` checks that none is left). What the caller waits for is no longer what follows
//! the verdict: the history row (a SQLite transaction, 0.6 to 2.9 ms), dropping the log's
//! inotify watch, waking the watcher's helper threads to exit and freeing its address space (3 to
//! 17 ms on a busy machine), against the single wake of a `tail -F | grep`.
//!
//! What the caller may rely on once the front has exited:
//! - Everything printed on stdout is there, and stdout is closed (`$(firedup run ...)` returns).
//!   Stderr stays open until the watcher has recorded the run (a warning that the history could
//!   not be written still reaches the user).
//! - The history holds the run for every reader: the watcher holds the history's recording lock
//!   from before it tells the front until the row is committed, and readers wait for it
//!   (`history::in_flight`).
//! - No process names the command any more: before it tells the front, the watcher overwrites its
//!   own command line ([`crate::process_title`]), so a `pgrep -f` of the job finds nothing that
//!   is only still exiting.
//!
//! The two stay one command to whoever holds the front's pid:
//! - SIGINT, SIGTERM and SIGHUP sent to the front are passed on to the watcher (a signal ignored
//!   when firedup started stays ignored in both), whose own handling ends the run and says so;
//!   the front exits with the code the watcher exits with (130, 143, 129).
//! - When the front ends any other way (SIGKILL), the watcher is killed with it
//!   (`PR_SET_PDEATHSIG` SIGKILL) until the verdict is given: the run goes on exactly as when one
//!   firedup process was killed (a crash of firedup never takes the server down; `firedup watch
//!   RUN_ID` re-attaches, and an `--owner` still ends the run).
//! - A watcher that ends without sending a code (a crash, a signal that kills it) is reaped by the
//!   front, which exits the same way: its code, or the same signal.
//! - Both lower their `oom_score_adj` as the watcher alone did ([`firedup::oom_score`]).
//!
//! The front's own exit is on the caller's path too: right after the split it lets go of the
//! file pages its start mapped ([`mappings`]), and starts a process that shares its memory and
//! dies with it ([`memory_keeper`]), so that its exit frees nothing: the memory goes with the
//! keeper's end, after the caller has learned of the front's.
//!
//! `FIREDUP_FRONT=0` keeps one process (measuring the watcher's own peak memory with `wait4`, a
//! debugger).

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, Ordering};

use firedup::session::interrupts::{SIGNALS, ignored_at_start};

mod mappings;
mod memory_keeper;

/// What the watcher tells the front with: the pipe its exit code goes to, and `/dev/null` open
/// for stdout to be pointed at (`None` in a front-less process). Opened at the split, as the
/// command line's place is read then: nothing on the way from the verdict to the caller waits
/// for the file system (issue 28).
static TO_FRONT: Mutex<Option<(std::io::PipeWriter, Option<std::fs::File>)>> = Mutex::new(None);

/// The watcher's pid, for the front's signal handlers.
static WATCHER: AtomicI32 = AtomicI32::new(0);

/// The commands whose caller waits for a verdict.
const SPLIT_COMMANDS: [&str; 2] = ["run", "watch"];

/// Splits the process when `args` (the command line, program name first) run one of
/// [`SPLIT_COMMANDS`]. Returns in the watcher (or where no split is made); the front never
/// returns.
pub(crate) fn split(args: &[std::ffi::OsString]) {
    let wanted = args
        .get(1)
        .and_then(|a| a.to_str())
        .is_some_and(|a| SPLIT_COMMANDS.contains(&a));
    if !wanted || std::env::var_os("FIREDUP_FRONT").is_some_and(|v| v == "0") {
        return;
    }
    let Ok((reader, writer)) = std::io::pipe() else {
        return;
    };
    let front = rustix::process::getpid();
    // SAFETY: called first thing in `main`: no other thread exists yet, so the child is a whole
    // copy of this one and may do anything.
    match unsafe { libc::fork() } {
        -1 => {}
        0 => {
            drop(reader);
            // The front gone before this is set is seen through the parent's pid.
            let _ = rustix::process::set_parent_process_death_signal(Some(
                rustix::process::Signal::KILL,
            ));
            if rustix::process::getppid() != Some(front) {
                let _ = rustix::process::kill_process(
                    rustix::process::getpid(),
                    rustix::process::Signal::KILL,
                );
            }
            let null = std::fs::File::options().write(true).open("/dev/null").ok();
            crate::process_title::prepare();
            if let Ok(mut slot) = TO_FRONT.lock() {
                *slot = Some((writer, null));
            }
        }
        watcher => {
            drop(writer);
            crate::process_title::prepare();
            wait_as_front(watcher, reader)
        }
    }
}

/// In the watcher, once the verdict is given (printed, recorded in the run directory, its
/// teardown verified): stdout let go and the front told `code`, the code this process will exit
/// with. Stderr stays open for what the recording that follows may have to say. Does nothing in
/// a process with no front, or once told.
pub(crate) fn verdict_given(code: i32) {
    let _ = std::io::stdout().flush();
    tell(code);
}

/// Sends `code` to the front once: stdout pointed at /dev/null first (its reader sees its end),
/// the parent-death signal cleared (the front is about to go; the watcher must outlive it to
/// record the run), and the command line overwritten (this process no longer names the command).
fn tell(code: i32) {
    let Some((mut writer, null)) = TO_FRONT.try_lock().ok().and_then(|mut w| w.take()) else {
        return;
    };
    if let Some(null) = null {
        // SAFETY: dup2 onto stdout; `null` stays open until after.
        unsafe { libc::dup2(null.as_raw_fd(), 1) };
    }
    let _ = rustix::process::set_parent_process_death_signal(None);
    crate::process_title::set(TOLD_TITLE);
    let _ = writer.write_all(&[(code & 0xff) as u8]);
}

/// The watcher's command line once the front is told (see the module doc).
const TOLD_TITLE: &str = "firedup (verdict given, recording)";

/// The front: passes SIGINT, SIGTERM and SIGHUP on to `watcher`, then exits as the watcher says.
fn wait_as_front(watcher: libc::pid_t, mut reader: std::io::PipeReader) -> ! {
    WATCHER.store(watcher, Ordering::SeqCst);
    for sig in SIGNALS {
        if ignored_at_start(sig) {
            continue;
        }
        // SAFETY: the handler only reads an atomic and calls kill(2), both async-signal-safe.
        let _ = unsafe {
            signal_hook::low_level::register(sig, move || {
                libc::kill(WATCHER.load(Ordering::SeqCst), sig);
            })
        };
    }
    // This process starts nothing: lowering its own score changes no child's.
    firedup::oom_score::protect_own();
    // While the server starts: what this copy of the start mapped is let go now, not at the exit
    // the caller waits for.
    // What is left is freed after the exit the caller waits for, by the keeper's; started first,
    // so that the pages its start touches are let go with the others.
    memory_keeper::start();
    mappings::shed();
    let mut code = [0u8; 1];
    loop {
        match reader.read(&mut code) {
            // `_exit`: this process wrote nothing to flush, and the C library's exit handlers
            // (`_dl_fini`, each library's `_fini`) fault in pages never touched so far: 0.1 ms
            // on the way from the verdict to the caller (issue 28, `perf record` of the front).
            Ok(1) => {
                end_title();
                // SAFETY: ends this process; no buffer or handler of it has anything left to do.
                unsafe { libc::_exit(i32::from(code[0])) }
            }
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    drop(reader);
    exit_as_reaped(watcher)
}

/// The front's command line as it exits (see [`end_title`]).
const ENDING_TITLE: &str = "firedup (exiting)";

/// Overwrites the front's command line before it exits: the memory keeper, which shares the
/// front's memory and so its command line, may outlive it by a few microseconds, and no process
/// names the command once the caller has learned of the front's end ([`memory_keeper`]).
fn end_title() {
    crate::process_title::set(ENDING_TITLE);
}

/// Reaps the watcher that ended without sending its code and ends this process the same way.
fn exit_as_reaped(watcher: libc::pid_t) -> ! {
    let mut status = 0;
    loop {
        // SAFETY: waitpid on this process's own child.
        let r = unsafe { libc::waitpid(watcher, &mut status, 0) };
        if r == watcher {
            break;
        }
        if r == -1 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            end_title();
            std::process::exit(1);
        }
    }
    end_title();
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: the default disposition back, then the same signal to this process.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        std::process::exit(128 + sig);
    }
    std::process::exit(libc::WEXITSTATUS(status))
}
