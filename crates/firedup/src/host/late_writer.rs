//! `watch --log PATH` started before PATH exists (the README allows it), with no `--pid`: the
//! process that will write it is found when the log appears, so that the watch follows that
//! process and the plan takes the server's address from its command line (its `--port`), as for
//! a log that already had its writer. Without this the profile's default port was probed and a
//! server ready in seconds ended `stalled` (issue 23, item 5).
//!
//! The wait is bounded by the log grace (after which, as before, a log never created is
//! `never_started`); it wakes on the directory's inotify events, with a slow poll as safety net.
//! A writer found just after it opened the log may not have exec'd the server yet (a shell's
//! child opens the redirected log, then execs the server): its command line is read until it
//! holds still for a moment.

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::process;

/// How often the wait looks without an inotify event.
const SAFETY_POLL: Duration = Duration::from_millis(250);
/// A command line that held still this long is the one exec'd.
const ARGV_STILL: Duration = Duration::from_millis(150);
/// The longest a writer's command line is waited on to hold still.
const ARGV_WAIT: Duration = Duration::from_secs(2);
/// How long a log that appeared with nobody writing it is given for its writer to open it (a
/// `touch` before the server's `>>`); after that the watch goes on without a process, as for a
/// log that existed with no writer.
const WRITER_AFTER_LOG: Duration = Duration::from_millis(500);

/// Waits up to `grace` for `log` to appear and be held open for writing; the writer's pid, once
/// its command line holds still. `None`: the log never appeared in time, or appeared with nobody
/// writing it (a file copied or written and closed: the watch follows it without a process).
pub(super) fn wait_for_writer(log: &Path, grace: Duration) -> Option<u32> {
    let deadline = Instant::now() + grace;
    let (tx, rx) = mpsc::channel::<()>();
    let wake: crate::dirwatch::Wake = Arc::new(move || {
        let _ = tx.send(());
    });
    let _sub = log
        .parent()
        .and_then(|dir| crate::dirwatch::subscribe(dir, None, wake));
    let mut appeared: Option<Instant> = None;
    let writer = loop {
        if let Some(w) = process::writers_of(log).into_iter().next() {
            break w;
        }
        let now = Instant::now();
        if log.exists() {
            let since = *appeared.get_or_insert(now);
            if now >= since + WRITER_AFTER_LOG {
                return None;
            }
        }
        if now >= deadline {
            return None;
        }
        let _ = rx.recv_timeout(SAFETY_POLL.min(deadline - now));
    };
    let until = Instant::now() + ARGV_WAIT;
    let mut argv = process::argv(writer);
    while Instant::now() < until {
        std::thread::sleep(ARGV_STILL);
        let now = process::argv(writer);
        if now == argv {
            break;
        }
        argv = now;
    }
    Some(writer)
}
