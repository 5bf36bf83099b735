//! The local observer's wake sources besides the log follower: a thread per blocking wait (the
//! watched pid's pidfd, the supervisor's exit report on its pipe, the sd_notify socket), each
//! sending a [`Wake`] on the observer's channel and ending when `stop` is set; and the inotify
//! subscription that follows the log's directory, or its nearest existing ancestor until the
//! directory appears.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{Wake, WakeTx};
use crate::dirwatch::{self, DirSubscription};
use crate::judge::Observation;
use crate::process;

pub(super) fn spawn_exit_watch(pid: u32, tx: WakeTx, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        process::wait_for_exit(pid, Duration::from_millis(500), &|| {
            stop.load(Ordering::Relaxed)
        });
        let _ = tx.send(Wake::ProcessGone(pid));
    });
}

pub(super) fn spawn_exit_report(pipe: crate::launch::ExitPipe, tx: WakeTx, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        if let Some(r) = pipe.wait(Duration::from_millis(500), &|| stop.load(Ordering::Relaxed)) {
            let _ = tx.send(Wake::ExitRecord(r));
        }
    });
}

pub(super) fn spawn_notify(
    sock: Arc<crate::probe::notify::NotifySocket>,
    tx: WakeTx,
    stop: Arc<AtomicBool>,
) {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            if let Some(m) = sock.recv(Duration::from_millis(500)) {
                if tx.send(Wake::Obs(Observation::Notify(m))).is_err() {
                    return;
                }
            }
        }
    });
}

/// The shared instance's watch of the directory a log is watched in (see [`rearm`]).
pub(super) struct LogDirWatch {
    dir: PathBuf,
    /// The directory's identity when it was subscribed to.
    identity: Option<DirIdentity>,
    _subscription: DirSubscription,
}

/// A directory's device, inode and birth time: a directory made again at a path often gets the
/// inode number the deleted one had, never its birth time (where the file system records one).
type DirIdentity = (u64, u64, Option<std::time::SystemTime>);

/// The identity of directory `d`, if it can be read.
fn identity(d: &Path) -> Option<DirIdentity> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(d).ok()?;
    Some((m.dev(), m.ino(), m.created().ok()))
}

/// Watches the log in its directory, or, until the directory appears, the next component of its
/// path in the nearest existing ancestor. A directory deleted and made again at the same path
/// between two rearms is a new directory the kernel's watch does not follow: it is subscribed to
/// again (its inode changed).
pub(super) fn rearm(current: &mut Option<LogDirWatch>, log: &Path, wake: &dirwatch::Wake) {
    let nearest = watch_point(log);
    let now = nearest.as_ref().and_then(|(d, _)| identity(d));
    if let (Some((d, _)), Some(w)) = (&nearest, current.as_ref())
        && *d == w.dir
        && now == w.identity
    {
        return;
    }
    *current = None;
    let Some((dir, name)) = nearest else { return };
    if let Some(sub) = dirwatch::subscribe(&dir, name, wake.clone()) {
        *current = Some(LogDirWatch {
            dir,
            identity: now,
            _subscription: sub,
        });
    }
}

/// Where `log` is watched: its directory, or the nearest existing ancestor, with the name in it
/// that leads to the log (the log's own name in its directory).
pub(super) fn watch_point(log: &Path) -> Option<(PathBuf, Option<&std::ffi::OsStr>)> {
    let mut dir = log.parent().map(Path::to_path_buf);
    while let Some(d) = &dir {
        if d.is_dir() {
            break;
        }
        dir = d.parent().map(Path::to_path_buf);
    }
    let d = dir?;
    let name = log
        .strip_prefix(&d)
        .ok()
        .and_then(|rest| rest.components().next())
        .map(|c| c.as_os_str());
    Some((d, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dirwatch::tests::{counter, eventually};

    #[test]
    fn a_log_directory_made_again_between_two_rearms_is_watched_again() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("logs");
        std::fs::create_dir(&dir).unwrap();
        let log = dir.join("server.log");
        let (woken, wake) = counter();
        let mut current = None;
        rearm(&mut current, &log, &wake);
        assert!(current.is_some(), "the log's directory is watched");
        let before = identity(&dir);
        // Deleted and made again before the observer looks again.
        std::fs::remove_dir(&dir).unwrap();
        eventually("the deletion wakes", || woken.load(Ordering::SeqCst) > 0);
        std::fs::create_dir(&dir).unwrap();
        if identity(&dir) == before {
            // A file system that gave the new directory the old inode and records no birth time:
            // the observer cannot tell, and its safety poll covers the log there.
            eprintln!("skipped: this file system cannot tell the new directory from the old");
            return;
        }
        rearm(&mut current, &log, &wake);
        woken.store(0, Ordering::SeqCst);
        std::fs::write(&log, "hello\n").unwrap();
        eventually("the new directory's log wakes the observer", || {
            woken.load(Ordering::SeqCst) > 0
        });
    }
}
