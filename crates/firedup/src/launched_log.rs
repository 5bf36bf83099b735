//! The file a launch writes its log to, by identity, and finding it again once its path names
//! another file.
//!
//! Contract: the launch records the identity ([`FileId`]: device and inode) of the log file the
//! supervisor opened for the command's output, in the run's `meta.json`. A reader that first
//! opens the path later (`run` under load, `watch RUN_ID` long after) compares: the same file is
//! read from the launch's start; a different file, or none, means the log was rotated before it
//! was followed, and the command may still be writing to the file it has open. That file is
//! found again ([`find_launched`]) by its identity, never by name or guess:
//!
//! - in the log's directory, where a rename rotation (`app.log` → `app.log.1`) leaves it;
//! - else through the open descriptors of the run's processes (`/proc/PID/fd`, processes found by
//!   their `FIREDUP_RUN_ID`; the supervisor itself holds the log open until the run has ended),
//!   which also finds a file deleted or moved to another directory.
//!
//! A candidate is opened and checked again after opening (`fstat`), so a file swapped in
//! between the look and the open is not taken for it. Only regular files are opened, without
//! blocking.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirEntryExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A file's identity on this machine: its device and inode numbers, and its birth time where the
/// file system keeps one (an inode number is reused once its file is deleted and closed: a
/// `watch RUN_ID` long after must not take a later file for the launched one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
    /// Seconds and nanoseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub born: Option<(u64, u32)>,
}

impl FileId {
    pub fn of(meta: &std::fs::Metadata) -> FileId {
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
            born: meta
                .created()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| (d.as_secs(), d.subsec_nanos())),
        }
    }

    /// Whether `other` is the same file: same device and inode, and the same birth time when
    /// both know one (an identity recorded without it, by an older firedup or from a
    /// [`crate::logstart::LogStart`], has only device and inode to go by).
    pub fn is(&self, other: &FileId) -> bool {
        (self.dev, self.ino) == (other.dev, other.ino)
            && match (self.born, other.born) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }
}

/// Where the launched file was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FoundAt {
    /// Under this name (in the log's directory).
    Path(PathBuf),
    /// Only as an open descriptor of this process of the run (deleted, or moved elsewhere).
    Process(u32),
}

impl std::fmt::Display for FoundAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FoundAt::Path(p) => write!(f, "now {}", p.display()),
            FoundAt::Process(pid) => write!(f, "held open by process {pid} of the run"),
        }
    }
}

/// Finds the file `id` that run `run_id` was launched into, its path `log` naming another file
/// now (or none): in `log`'s directory first, then among the open files of the run's processes.
pub(crate) fn find_launched(id: FileId, run_id: &str, log: &Path) -> Option<(File, FoundAt)> {
    in_directory(id, log).or_else(|| {
        crate::process::of_run(run_id)
            .pids
            .into_iter()
            .find_map(|pid| in_process(id, pid).map(|f| (f, FoundAt::Process(pid))))
    })
}

/// The file `id` under another name in `log`'s directory.
pub(crate) fn in_directory(id: FileId, log: &Path) -> Option<(File, FoundAt)> {
    let dir = match log.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        // The inode number is in the directory entry: only a match is stat'ed and opened.
        .filter(|e| e.ino() == id.ino)
        .find_map(|e| {
            let p = e.path();
            open_if(id, &p).map(|f| (f, FoundAt::Path(p)))
        })
}

/// The file `id` among the open descriptors of process `pid` (opened anew through
/// `/proc/PID/fd/N`, which reaches a deleted file too).
pub(crate) fn in_process(id: FileId, pid: u32) -> Option<File> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .flatten()
        .find_map(|e| open_if(id, &e.path()))
}

/// Opens `path` for reading if it is the regular file `id`, checked after opening.
fn open_if(id: FileId, path: &Path) -> Option<File> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || !FileId::of(&meta).is(&id) {
        return None;
    }
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    (meta.is_file() && FileId::of(&meta).is(&id)).then_some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn the_birth_time_tells_a_reused_inode_when_both_sides_know_it() {
        let id = |born| FileId {
            dev: 1,
            ino: 2,
            born,
        };
        for (a, b, same) in [
            (id(None), id(None), true),
            (id(Some((5, 1))), id(Some((5, 1))), true),
            (id(Some((5, 1))), id(Some((5, 2))), false),
            (id(Some((5, 1))), id(None), true),
            (id(None), id(Some((5, 1))), true),
            (id(None), FileId { ino: 3, ..id(None) }, false),
            (id(None), FileId { dev: 3, ..id(None) }, false),
        ] {
            assert_eq!(a.is(&b), same, "{a:?} {b:?}");
        }
    }

    #[test]
    fn a_renamed_file_is_found_in_its_directory_and_nothing_else_is() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("app.log");
        std::fs::write(&log, b"launched\n").unwrap();
        let id = FileId::of(&std::fs::metadata(&log).unwrap());
        std::fs::rename(&log, dir.path().join("app.log.1")).unwrap();
        std::fs::write(&log, b"new\n").unwrap();
        let (mut f, at) = in_directory(id, &log).unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(
            (s.as_str(), at),
            ("launched\n", FoundAt::Path(dir.path().join("app.log.1")))
        );
        // Deleted: not in the directory any more.
        std::fs::remove_file(dir.path().join("app.log.1")).unwrap();
        assert!(in_directory(id, &log).is_none());
    }

    #[test]
    fn a_deleted_file_is_found_through_a_descriptor_that_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("app.log");
        let mut writer = File::create(&log).unwrap();
        let id = FileId::of(&writer.metadata().unwrap());
        std::fs::remove_file(&log).unwrap();
        writer.write_all(b"still written\n").unwrap();
        let mut f = in_process(id, std::process::id()).unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(s, "still written\n");
        // Another identity is not taken for it: another inode, or the same inode born at
        // another time (reused).
        let other = FileId { ino: 0, ..id };
        assert!(in_process(other, std::process::id()).is_none());
        if let Some((s, n)) = id.born {
            let reborn = FileId {
                born: Some((s + 1, n)),
                ..id
            };
            assert!(in_process(reborn, std::process::id()).is_none());
        }
    }
}
