//! Opening a file firedup writes to (a run's `--log`, `--events`) once, by rules that another
//! user cannot race.
//!
//! Contract: the path is opened once, and what was opened is checked and then used (handed to
//! the supervisor and the command as their descriptor), never reopened by path. The final
//! component is opened with `O_NOFOLLOW`, so a symlink swapped in after any check is never
//! followed blindly: a symlink found there is followed only if it belongs to the user or to
//! root (as the kernel's `protected_symlinks` demands in sticky world-writable directories),
//! read from its own descriptor (`O_PATH`), and its target is opened by the same rules (at most
//! [`MAX_LINKS`] links). The opened descriptor is then checked (`fstat`): a log must be a
//! regular file; a regular file must belong to the user, or have been created by this very open
//! (`O_CREAT|O_EXCL`). `--events` may also name a FIFO or a terminal of the user or of root
//! (`/dev/stderr`, a named pipe a script reads), and `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`
//! are the descriptors firedup already holds. Opens never block (`O_NONBLOCK`): a FIFO without
//! a reader is refused, not waited on. Descriptors are close-on-exec.

use std::fs::File;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{CWD, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Result, usage};

/// At most this many symlinks are followed from the path given to the file.
pub const MAX_LINKS: usize = 8;

/// What the file is for: it decides the flags, what may be there, and the words of a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A run's log: appended to, a regular file only.
    Log,
    /// The `--events` stream: written from its start (a regular file is truncated once checked),
    /// or a FIFO or terminal of the user or root.
    Events,
}

impl Purpose {
    fn flag(self) -> &'static str {
        match self {
            Purpose::Log => "--log",
            Purpose::Events => "--events",
        }
    }
}

/// A file opened by [`open_for_writing`].
#[derive(Debug)]
pub struct Opened {
    /// The open file, checked.
    pub file: File,
    /// This open created it.
    pub created: bool,
}

/// Opens `path` for `purpose` by the rules of the module doc; `Err` is one sentence.
pub fn open_for_writing(path: &Path, purpose: Purpose) -> Result<Opened> {
    let me = rustix::process::geteuid().as_raw();
    let flag = purpose.flag();
    let shown = path.display();
    let mut current = path.to_path_buf();
    let mut base = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let mode = match purpose {
        Purpose::Log => {
            base |= OFlags::APPEND;
            Mode::from_raw_mode(0o644)
        }
        Purpose::Events => Mode::from_raw_mode(0o666),
    };
    for _ in 0..=MAX_LINKS {
        if let Some(fd) = held_descriptor(&current) {
            // SAFETY: a descriptor number of this process, borrowed only to duplicate it.
            let held = unsafe { BorrowedFd::borrow_raw(fd) };
            let dup = rustix::io::fcntl_dupfd_cloexec(held, 3).map_err(|e| {
                refusal(format!("{flag} {shown}: descriptor {fd} is not open ({e})"))
            })?;
            return check_opened(dup, false, false, purpose, path, me);
        }
        match rustix::fs::openat(CWD, &current, base | OFlags::CREATE | OFlags::EXCL, mode) {
            Ok(fd) => return check_opened(fd, true, true, purpose, path, me),
            Err(Errno::EXIST) => {}
            Err(e) => return Err(cannot_open(flag, path, e)),
        }
        match rustix::fs::openat(CWD, &current, base, mode) {
            Ok(fd) => return check_opened(fd, false, true, purpose, path, me),
            // Removed between the two opens: try again.
            Err(Errno::NOENT) => continue,
            Err(Errno::LOOP) => current = follow_link(&current, path, flag, me)?,
            Err(Errno::NXIO) => usage!(
                "{flag} {shown} is a FIFO (named pipe) with no reader{}",
                match purpose {
                    Purpose::Log => ", not a regular file: give the path of a log file",
                    Purpose::Events => ": start its reader first",
                }
            ),
            Err(e) => return Err(cannot_open(flag, path, e)),
        }
    }
    usage!(
        "{flag} {shown} leads through more than {MAX_LINKS} symlinks (or keeps changing): give the path of the file itself"
    )
}

/// The descriptor a path names that firedup holds already (`/dev/stdout`, `/dev/fd/N`, ...).
fn held_descriptor(path: &Path) -> Option<i32> {
    let s = path.to_str()?;
    match s {
        "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        _ => {}
    }
    ["/dev/fd/", "/proc/self/fd/"]
        .iter()
        .find_map(|p| s.strip_prefix(p))
        .and_then(|n| n.parse().ok())
}

/// The path the symlink `link` points to, read from the link itself (opened `O_PATH`, so it
/// cannot be swapped between the check of its owner and the read), if it belongs to the user
/// or root.
fn follow_link(link: &Path, given: &Path, flag: &str, me: u32) -> Result<PathBuf> {
    let fd = rustix::fs::openat(
        CWD,
        link,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| cannot_open(flag, given, e))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| cannot_open(flag, given, e))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Symlink {
        // ELOOP from a directory on the way, not the last component.
        return Err(cannot_open(flag, given, Errno::LOOP));
    }
    if st.st_uid != me && st.st_uid != 0 {
        usage!(
            "{flag} {} is a symlink owned by another user (uid {}), which could send the output into a file of their choosing: remove it or give another path",
            given.display(),
            st.st_uid
        );
    }
    let target =
        rustix::fs::readlinkat(&fd, "", Vec::new()).map_err(|e| cannot_open(flag, given, e))?;
    let target: std::ffi::OsString = std::os::unix::ffi::OsStringExt::from_vec(target.into_bytes());
    let target = PathBuf::from(target);
    Ok(match link.parent() {
        Some(dir) if target.is_relative() => dir.join(target),
        _ => target,
    })
}

/// Checks what was opened (`fstat` on the descriptor) and makes it ready for use.
fn check_opened(
    fd: OwnedFd,
    created: bool,
    opened_here: bool,
    purpose: Purpose,
    given: &Path,
    me: u32,
) -> Result<Opened> {
    let flag = purpose.flag();
    let st = rustix::fs::fstat(&fd).map_err(|e| cannot_open(flag, given, e))?;
    let kind = FileType::from_raw_mode(st.st_mode);
    let owner_ok = st.st_uid == me || created;
    match (kind, purpose) {
        (FileType::RegularFile, _) if !owner_ok => usage!(
            "{flag} {} already exists and belongs to another user (uid {}): choose another path",
            given.display(),
            st.st_uid
        ),
        (FileType::RegularFile, Purpose::Events) if opened_here => {
            rustix::fs::ftruncate(&fd, 0).map_err(|e| cannot_open(flag, given, e))?;
        }
        (FileType::RegularFile, _) => {}
        (FileType::Fifo | FileType::CharacterDevice, Purpose::Events)
            if st.st_uid == me || st.st_uid == 0 =>
        {
            // Written like a terminal or pipe: blocking, as a reader expects.
            let flags = rustix::fs::fcntl_getfl(&fd).map_err(|e| cannot_open(flag, given, e))?;
            rustix::fs::fcntl_setfl(&fd, flags - OFlags::NONBLOCK)
                .map_err(|e| cannot_open(flag, given, e))?;
        }
        (FileType::Fifo | FileType::CharacterDevice, Purpose::Events) => usage!(
            "{flag} {} belongs to another user (uid {}): choose another path",
            given.display(),
            st.st_uid
        ),
        _ => usage!(
            "{flag} {} is {}, not a regular file: give the path of a {} file",
            given.display(),
            kind_in_words(kind),
            match purpose {
                Purpose::Log => "log",
                Purpose::Events => "regular",
            }
        ),
    }
    Ok(Opened {
        file: File::from(fd),
        created,
    })
}

fn kind_in_words(kind: FileType) -> &'static str {
    match kind {
        FileType::Directory => "a directory",
        FileType::Fifo => "a FIFO (named pipe)",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Socket => "a socket",
        _ => "not a regular file",
    }
}

fn refusal(sentence: String) -> crate::error::Error {
    crate::error::Error::Usage(sentence)
}

fn cannot_open(flag: &str, path: &Path, e: Errno) -> crate::error::Error {
    let e = std::io::Error::from(e);
    crate::error::Error::Io {
        context: format!("cannot open {flag} {} for writing", path.display()),
        source: e,
    }
}

#[cfg(test)]
mod tests;
