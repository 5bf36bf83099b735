//! What firedup accepts as a `--log` path, checked before anything is launched or followed.
//!
//! Contract: a log is a regular file, or nothing yet (the supervisor or the server creates it)
//! in a directory that exists: firedup creates no directories for a `--log` path.
//! Anything else at the path is refused with one sentence: a FIFO blocks the reader (and the
//! supervisor's open) forever, a character device (`/dev/zero`, `/dev/urandom`) never ends, a
//! directory or socket cannot be read as a log. For a log firedup writes (`run --log`), a
//! symlink at the path must belong to the user or to root, as the kernel's `protected_symlinks`
//! demands in sticky world-writable directories: otherwise another user could plant one and have
//! the server's output appended to a file of their choosing (a root-owned one, when firedup runs
//! as root). An existing file must be the user's, and no live process may be writing it already
//! (compared by device and inode, so a hard link is the same file): two runs appending to one log
//! would judge each other's lines. These checks on the path give the early sentence; what holds
//! is the open itself ([`crate::writable_file`]), done once, its descriptor handed on.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use crate::error::{Result, usage};

/// What kind of thing a file type is, in words, when it is not a regular file.
pub(crate) fn not_a_file(t: fs::FileType) -> Option<&'static str> {
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// Refuses a log to follow that exists and is not a regular file (a missing one is fine).
pub(crate) fn check_for_reading(log: &Path) -> Result<()> {
    if let Ok(m) = fs::metadata(log) {
        if let Some(what) = not_a_file(m.file_type()) {
            usage!(
                "--log {} is {what}, not a regular file: give the path of a log file",
                log.display()
            );
        }
    }
    Ok(())
}

/// Refuses a log to append a command's output to: not a regular file, a symlink planted by
/// another user, a file of another user, or a file another process is writing.
pub(crate) fn check_for_writing(log: &Path) -> Result<()> {
    // A mistyped directory is a mistake to say, not a tree to create: the output would land
    // where nobody looks.
    if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
        match fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => usage!(
                "--log {}: {} is not a directory: give a log path in an existing directory",
                log.display(),
                dir.display()
            ),
            Err(_) => usage!(
                "--log {}: the directory {} does not exist: create it first (mkdir -p {}) or give another path",
                log.display(),
                dir.display(),
                dir.display()
            ),
        }
    }
    let me = rustix::process::geteuid().as_raw();
    if let Ok(link) = fs::symlink_metadata(log) {
        if link.file_type().is_symlink() && link.uid() != me && link.uid() != 0 {
            usage!(
                "--log {} is a symlink owned by another user (uid {}), which could send the output into a file of their choosing: remove it or give another path",
                log.display(),
                link.uid()
            );
        }
    }
    check_for_reading(log)?;
    if let Ok(m) = fs::metadata(log) {
        if m.uid() != me {
            usage!(
                "--log {} already exists and belongs to another user (uid {}): choose another path",
                log.display(),
                m.uid()
            );
        }
        if let Ok(id) = fs::metadata(log).map(|m| crate::launched_log::FileId::of(&m)) {
            check_no_other_writer(log, &id)?;
        }
    }
    Ok(())
}

/// Refuses the log file `id` (at `log`) when a live process is writing to it already, under
/// this name or another (a hard link): two runs appending to one log would judge each other's
/// lines. The sentence names the run that writes it, when the writer is one.
pub(crate) fn check_no_other_writer(log: &Path, id: &crate::launched_log::FileId) -> Result<()> {
    let run = crate::rundir::RunDir::live_run_writing(id);
    let writer = crate::process::writers_of_file(id.dev, id.ino)
        .into_iter()
        .next();
    let why =
        "two runs sharing a log would judge each other's lines; give this run a log of its own";
    match (writer, run) {
        (Some(pid), run) => usage!(
            "--log {} is being written by process {pid} ({}){}: {why}",
            log.display(),
            crate::process::cmdline(pid),
            run.map(|r| format!(", of run {}", r.id))
                .unwrap_or_default()
        ),
        (None, Some(run)) => usage!(
            "--log {} is the log of run {}, which is still running: {why}",
            log.display(),
            run.id
        ),
        (None, None) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_or_nothing_are_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("log");
        fs::write(&file, b"x\n").unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let table: [(&Path, Option<&str>); 5] = [
            (&file, None),
            (&dir.path().join("missing.log"), None),
            (dir.path(), Some("a directory")),
            (&fifo, Some("a FIFO")),
            (Path::new("/dev/zero"), Some("a character device")),
        ];
        for (path, refused) in table {
            for r in [check_for_reading(path), check_for_writing(path)] {
                match refused {
                    None => assert!(r.is_ok(), "{}: {r:?}", path.display()),
                    Some(what) => {
                        let e = r.unwrap_err().to_string();
                        assert!(e.contains(what), "{}: {e}", path.display());
                    }
                }
            }
        }
    }

    #[test]
    fn a_symlink_of_the_user_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.log");
        let link = dir.path().join("link.log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(check_for_writing(&link).is_ok());
    }
}
