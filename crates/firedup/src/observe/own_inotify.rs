//! An inotify instance of one observer's own, read by the thread that judges (issue 28: ready in
//! milliseconds).
//!
//! Through the process's shared instance ([`crate::dirwatch`]) an append to the log wakes the
//! `notify` crate's thread, which wakes the judging thread on a channel: two wakes before the
//! line is read, against the single wake of a `tail -F | grep`. And once the verdict is reached,
//! every file firedup writes into a watched directory (`verdict.json` in the run directory) wakes
//! that thread again, which on a busy or small machine takes the CPU from the thread on its way
//! to the caller. With an instance of its own, the judging thread waits in `poll` on it and on a
//! bell (an eventfd the other wake sources ring, [`super::wake_tx`]): a line is one wake away,
//! and what is written after the verdict only queues events that nobody reads.
//!
//! Contract: [`OwnInotify::claim`] gives the instance to the first observer of the process that
//! asks while none holds it (the one watch of `firedup run` and `firedup watch`); every other
//! observer (a matrix's, a group's nodes, the library's many) uses the shared instance, as the
//! kernel allows a user 128 instances (`fs.inotify.max_user_instances`). `None` also when the
//! kernel refuses an instance or an eventfd. The watches and their wakes are those of the shared
//! instance's subscriptions: the log in its directory, or until the directory appears the next
//! component of its path in the nearest existing ancestor, and any name in the run directory;
//! an event about another name in the log's directory does not end a wait (N logs side by side
//! do not wake each other's observers). A watch the kernel dropped (its directory deleted) is
//! placed again by the next [`OwnInotify::rearm`]; a queue overflow ends the wait (the observer
//! looks again). Where no watch could be placed, the observer's slow safety-net poll covers it,
//! as with the shared instance.

use std::ffi::OsString;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

/// Whether an observer of this process holds the instance.
static CLAIMED: AtomicBool = AtomicBool::new(false);

/// What a watched directory reports (those of the shared instance's watches, `IN_OPEN` aside: a
/// read of the log by firedup itself is no news).
fn mask() -> WatchFlags {
    WatchFlags::ATTRIB
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::MODIFY
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
}

/// A watch on a directory, and the one name in it that concerns the observer (`None`: any).
#[derive(Debug)]
struct DirWatch {
    wd: i32,
    dir: PathBuf,
    name: Option<OsString>,
    /// False once the kernel dropped the watch (`IN_IGNORED`: the directory went).
    live: bool,
}

/// One observer's inotify instance and bell (see the module doc).
#[derive(Debug)]
pub(super) struct OwnInotify {
    fd: OwnedFd,
    bell: Arc<OwnedFd>,
    log: Option<DirWatch>,
    run: Option<DirWatch>,
    /// Whether this is the process's claimed instance (its drop frees the claim).
    claimed: bool,
}

impl OwnInotify {
    /// The process's one own instance, unless another observer holds it or the kernel refuses.
    pub(super) fn claim() -> Option<OwnInotify> {
        if CLAIMED
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return None;
        }
        let made = OwnInotify::open();
        match made {
            Some(mut own) => {
                own.claimed = true;
                Some(own)
            }
            None => {
                CLAIMED.store(false, Ordering::Release);
                None
            }
        }
    }

    /// A new instance and bell, outside the claim.
    fn open() -> Option<OwnInotify> {
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).ok()?;
        let bell =
            rustix::event::eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC).ok()?;
        Some(OwnInotify {
            fd,
            bell: Arc::new(bell),
            log: None,
            run: None,
            claimed: false,
        })
    }

    /// The eventfd the other wake sources ring ([`super::wake_tx::WakeTx`]).
    pub(super) fn bell(&self) -> Arc<OwnedFd> {
        self.bell.clone()
    }

    /// Watches `log` in its directory, or, until the directory appears, the next component of
    /// its path in the nearest existing ancestor. Nothing is done when that watch is in place.
    pub(super) fn rearm(&mut self, log: &Path) {
        let nearest = super::wake_sources::watch_point(log);
        if let (Some((d, _)), Some(w)) = (&nearest, &self.log)
            && w.live
            && &w.dir == d
        {
            return;
        }
        if let Some(old) = self.log.take().filter(|w| w.live) {
            self.unwatch(old.wd);
        }
        let Some((d, name)) = nearest else { return };
        self.log = self.watch(d, name.map(std::ffi::OsStr::to_os_string));
    }

    /// Watches the run directory for any name in it (`exit.json` lands there).
    pub(super) fn watch_run_dir(&mut self, dir: &Path) {
        self.run = self.watch(dir.to_path_buf(), None);
    }

    fn watch(&self, dir: PathBuf, name: Option<OsString>) -> Option<DirWatch> {
        // The same directory watched twice gives the same descriptor: both concerns share it
        // (the log in the run directory); removing it for one would end the other's.
        let wd = inotify::add_watch(&self.fd, &dir, mask() | WatchFlags::MASK_ADD).ok()?;
        Some(DirWatch {
            wd,
            dir,
            name,
            live: true,
        })
    }

    fn unwatch(&self, wd: i32) {
        if self.run.as_ref().is_none_or(|r| r.wd != wd) {
            let _ = inotify::remove_watch(&self.fd, wd);
        }
    }

    /// Waits until an event concerns the observer, the bell rings, or `until`.
    pub(super) fn wait(&mut self, until: Instant) {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let timeout = Timespec {
                tv_sec: left.as_secs().try_into().unwrap_or(i64::MAX),
                tv_nsec: left.subsec_nanos().into(),
            };
            let mut fds = [
                PollFd::new(&self.fd, PollFlags::IN),
                PollFd::new(self.bell.as_ref(), PollFlags::IN),
            ];
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(0) => return,
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                // Nothing to wait on (never expected): the caller's deadline still holds.
                Err(_) => {
                    std::thread::sleep(left);
                    return;
                }
            }
            let inotify_ready = !fds[0].revents().is_empty();
            let rang = !fds[1].revents().is_empty();
            if rang {
                let mut count = [0u8; 8];
                let _ = rustix::io::read(self.bell.as_ref(), &mut count);
            }
            let concerned = inotify_ready && self.drain();
            if rang || concerned || Instant::now() >= until {
                return;
            }
        }
    }

    /// Reads every queued event; whether one concerns the observer.
    fn drain(&mut self) -> bool {
        let mut concerned = false;
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        loop {
            let event = match reader.next() {
                Ok(e) => e,
                Err(rustix::io::Errno::INTR) => continue,
                // WOULDBLOCK: all read. Another error: the watches may be gone; looking again is
                // what the safety net would do.
                Err(e) => return concerned || e != rustix::io::Errno::WOULDBLOCK,
            };
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                concerned = true;
                continue;
            }
            let name = event.file_name().map(|n| n.to_bytes());
            for w in [self.log.as_mut(), self.run.as_mut()].into_iter().flatten() {
                if w.wd != event.wd() {
                    continue;
                }
                if flags.contains(ReadFlags::IGNORED) {
                    w.live = false;
                }
                // An event about the directory itself (no name) concerns whoever watches it.
                let wanted = w.name.as_ref().map(|n| n.as_bytes());
                if name.is_none() || wanted.is_none() || name == wanted {
                    concerned = true;
                }
            }
        }
    }
}

impl Drop for OwnInotify {
    fn drop(&mut self) {
        if self.claimed {
            CLAIMED.store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// An instance outside the claim (the observers of other tests in this process may hold it).
    fn unclaimed() -> OwnInotify {
        OwnInotify::open().expect("an instance")
    }

    /// Claims the instance, waiting (bounded) for the observers of other tests to let it go.
    fn claim_when_free() -> OwnInotify {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(own) = OwnInotify::claim() {
                return own;
            }
            assert!(Instant::now() < deadline, "the instance was never free");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether a wait of at most `bound` ends before it (the bound is generous: only whether it
    /// ended early or ran out is asserted, never how fast).
    fn ends_early(own: &mut OwnInotify, bound: Duration) -> bool {
        let until = Instant::now() + bound;
        own.wait(until);
        Instant::now() < until
    }

    #[test]
    fn a_write_to_the_log_ends_the_wait_and_one_to_another_name_does_not() {
        let mut own = unclaimed();
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("a.log");
        own.rearm(&log);
        std::fs::write(d.path().join("b.log"), "other\n").unwrap();
        assert!(
            !ends_early(&mut own, Duration::from_millis(300)),
            "b.log is not the log"
        );
        std::fs::write(&log, "line\n").unwrap();
        assert!(ends_early(&mut own, Duration::from_secs(30)), "a.log is");
    }

    #[test]
    fn the_bell_ends_the_wait_and_only_one_observer_holds_an_instance() {
        let mut own = claim_when_free();
        assert!(OwnInotify::claim().is_none(), "a second claim is refused");
        let bell = own.bell();
        let ringer = std::thread::spawn(move || {
            rustix::io::write(bell.as_ref(), &1u64.to_ne_bytes()).unwrap();
        });
        assert!(ends_early(&mut own, Duration::from_secs(30)));
        ringer.join().unwrap();
        // Rung once, read once: the next wait runs to its end.
        assert!(!ends_early(&mut own, Duration::from_millis(100)));
        drop(own);
        claim_when_free();
    }

    #[test]
    fn a_log_whose_directory_appears_later_is_watched_through_its_ancestor_then_its_own() {
        let mut own = unclaimed();
        let root = tempfile::tempdir().unwrap();
        let log = root.path().join("logs").join("x.log");
        own.rearm(&log);
        std::fs::create_dir(root.path().join("logs")).unwrap();
        assert!(
            ends_early(&mut own, Duration::from_secs(30)),
            "logs/ created"
        );
        own.rearm(&log);
        std::fs::write(&log, "line\n").unwrap();
        assert!(
            ends_early(&mut own, Duration::from_secs(30)),
            "x.log written"
        );
        // The directory deleted and made again: the dropped watch is placed again.
        std::fs::remove_file(&log).unwrap();
        std::fs::remove_dir(root.path().join("logs")).unwrap();
        own.wait(Instant::now() + Duration::from_millis(50));
        std::fs::create_dir(root.path().join("logs")).unwrap();
        own.wait(Instant::now() + Duration::from_millis(50));
        own.rearm(&log);
        std::fs::write(&log, "again\n").unwrap();
        assert!(
            ends_early(&mut own, Duration::from_secs(30)),
            "x.log in the new directory"
        );
    }
}
