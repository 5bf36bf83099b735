//! Records in flight: a run whose caller was told its verdict before its history row was
//! committed (`src/front.rs` tells the caller first, then records) is still in the history for
//! every reader.
//!
//! The watcher takes the recording lock (an exclusive `flock` on `<database>-recording`, next to
//! the database, created 0600) before it tells its caller and lets go once the row is committed
//! ([`hold_for_record`]). A reader ([`wait_for_records_in_flight`]) first takes the same lock
//! shared and lets go at once: every record whose caller had been told by then is committed.
//! The wait is bounded by SQLite's own busy timeout (the writer's longest wait for the database):
//! a watcher stopped with the lock held (SIGSTOP) delays a reader, never blocks it for good.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{FlockOperation, flock};

use super::location::database_path;

/// Held while a run's record is being written; dropping it lets readers on.
#[derive(Debug)]
pub struct RecordInFlight {
    _lock: File,
}

/// Takes the recording lock of the default history, waiting for readers that hold it shared
/// (for an instant each). `None` when history is off or the lock file cannot be had: the record
/// is then written as before, only not waited for.
pub fn hold_for_record() -> Option<RecordInFlight> {
    let lock = open_lock(&lock_path(&database_path()?))?;
    take(
        &lock,
        FlockOperation::NonBlockingLockExclusive,
        super::BUSY_TIMEOUT,
    )?;
    Some(RecordInFlight { _lock: lock })
}

/// Waits until every record whose caller was told its verdict before this call is committed (see
/// the module doc); returns at once where none is in flight or history is off.
pub fn wait_for_records_in_flight() {
    let Some(db) = database_path() else {
        return;
    };
    // No lock file: no record was ever held in flight here.
    let Some(lock) = open_existing(&lock_path(&db)) else {
        return;
    };
    if take(
        &lock,
        FlockOperation::NonBlockingLockShared,
        super::BUSY_TIMEOUT,
    )
    .is_some()
    {
        let _ = flock(&lock, FlockOperation::Unlock);
    }
}

/// The lock file of the database at `db`.
fn lock_path(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push("-recording");
    PathBuf::from(p)
}

fn open_lock(path: &Path) -> Option<File> {
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .ok()
}

fn open_existing(path: &Path) -> Option<File> {
    File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .ok()
}

/// Takes `op` (non-blocking) on `lock`, trying again every 2 ms until `bound` has passed.
fn take(lock: &File, op: FlockOperation, bound: Duration) -> Option<()> {
    let deadline = Instant::now() + bound;
    loop {
        match flock(lock, op) {
            Ok(()) => return Some(()),
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::WOULDBLOCK) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_waits_for_a_record_held_in_flight_and_not_longer() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_path(&dir.path().join("history.sqlite"));
        let held = open_lock(&path).unwrap();
        take(
            &held,
            FlockOperation::NonBlockingLockExclusive,
            Duration::ZERO,
        )
        .unwrap();
        let reader = open_existing(&path).unwrap();
        assert_eq!(
            take(
                &reader,
                FlockOperation::NonBlockingLockShared,
                Duration::ZERO
            ),
            None,
            "a shared lock is not had while the record is in flight"
        );
        let released = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(held);
        });
        assert_eq!(
            take(
                &reader,
                FlockOperation::NonBlockingLockShared,
                Duration::from_secs(600)
            ),
            Some(()),
            "had once the record is committed"
        );
        released.join().unwrap();
    }
}
