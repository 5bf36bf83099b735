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

/// Watches the log in its directory, or, until the directory appears, the next component of its
/// path in the nearest existing ancestor.
pub(super) fn rearm(
    current: &mut Option<(PathBuf, DirSubscription)>,
    log: &Path,
    wake: &dirwatch::Wake,
) {
    let nearest = watch_point(log);
    if nearest.as_ref().map(|(d, _)| d) == current.as_ref().map(|(d, _)| d) {
        return;
    }
    *current = None;
    let Some((d, name)) = nearest else { return };
    if let Some(sub) = dirwatch::subscribe(&d, name, wake.clone()) {
        *current = Some((d, sub));
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
