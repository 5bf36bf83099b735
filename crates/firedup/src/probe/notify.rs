//! sd_notify socket: the command says itself when it is ready, as it would to systemd.
//!
//! firedup binds a unix datagram socket, passes its path as `NOTIFY_SOCKET`, and reads what the
//! command sends (`sd_notify(3)`): newline-separated `KEY=VALUE` assignments in one datagram.
//! [`parse`] understands `READY=1`, `STOPPING=1`, `STATUS=...`, `EXTEND_TIMEOUT_USEC=N` and
//! `ERRNO=N`, and ignores other keys (`MAINPID=`, `WATCHDOG=1`, `FDSTORE=1`, ...) as systemd
//! ignores what it does not know. Invalid UTF-8 is read lossily rather than dropping the message:
//! a `READY=1` next to a garbled status still counts.
//!
//! The socket file is removed when the [`NotifySocket`] is dropped.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Context, Result, usage};

pub use firedup_judge::notify_message::{NotifyMessage, parse};

/// A bound `NOTIFY_SOCKET` (unix datagram). The socket file is removed on drop.
#[derive(Debug)]
pub struct NotifySocket {
    /// The socket file's path: the command's `NOTIFY_SOCKET`.
    pub path: PathBuf,
    socket: UnixDatagram,
}

/// `sun_path` is 108 bytes on Linux, and the path needs its terminating NUL.
const SUN_PATH_MAX: usize = 107;

/// Largest datagram read. systemd accepts notifications up to its pipe buffer size; a `STATUS=`
/// line is short, and a longer datagram is truncated rather than lost.
const DATAGRAM_MAX: usize = 64 * 1024;

impl NotifySocket {
    /// Binds a datagram socket at `path`. A stale socket left there by an earlier run is removed
    /// first; any other kind of file is left alone and is an error.
    pub fn bind(path: &Path) -> Result<NotifySocket> {
        let len = path.as_os_str().as_bytes().len();
        if len > SUN_PATH_MAX {
            usage!(
                "the notify socket path is {len} bytes long, and a unix socket path must be at \
                 most {SUN_PATH_MAX}: {}",
                path.display()
            );
        }
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_socket() => {
                std::fs::remove_file(path).with_context(|| {
                    format!("cannot remove the stale notify socket {}", path.display())
                })?
            }
            Ok(_) => usage!(
                "{} exists and is not a socket: not replacing it with the notify socket",
                path.display()
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("cannot check the notify socket path {}", path.display())
                });
            }
        }
        let socket = UnixDatagram::bind(path)
            .with_context(|| format!("cannot bind the notify socket {}", path.display()))?;
        Ok(NotifySocket {
            path: path.to_path_buf(),
            socket,
        })
    }

    /// Waits up to `timeout` for the next message. `None` when none came (or the socket failed,
    /// which only a closed socket does).
    pub fn recv(&self, timeout: Duration) -> Option<NotifyMessage> {
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0u8; DATAGRAM_MAX];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // A zero read timeout means "block forever" to the kernel, and std refuses it:
            // a zero wait is a short one.
            let wait = left.max(Duration::from_micros(1));
            if self.socket.set_read_timeout(Some(wait)).is_err() {
                return None;
            }
            match self.socket.recv(&mut buf) {
                Ok(n) => return Some(parse(&buf[..n])),
                Err(e) if e.kind() == io::ErrorKind::Interrupted && !left.is_zero() => continue,
                Err(_) => return None,
            }
        }
    }
}

impl Drop for NotifySocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounded_wait::{HANG, bounded};

    #[test]
    fn receives_what_a_sender_sends_and_removes_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let sock = NotifySocket::bind(&path).unwrap();
        assert!(path.exists());
        let sender = UnixDatagram::unbound().unwrap();
        sender
            .send_to(b"STATUS=warming up\nEXTEND_TIMEOUT_USEC=5000000", &path)
            .unwrap();
        sender.send_to(b"READY=1", &path).unwrap();
        let first = sock.recv(Duration::from_secs(5)).unwrap();
        assert_eq!(first.status.as_deref(), Some("warming up"));
        assert_eq!(first.extend_timeout, Some(Duration::from_secs(5)));
        assert!(!first.ready);
        assert!(sock.recv(Duration::from_secs(5)).unwrap().ready);
        // Nothing more: the wait is bounded, a zero wait too.
        let (sock, short, zero) = bounded("recv on a quiet notify socket", HANG, move || {
            let short = sock.recv(Duration::from_millis(50));
            let zero = sock.recv(Duration::ZERO);
            (sock, short, zero)
        });
        assert_eq!(short, None);
        assert_eq!(zero, None);
        drop(sock);
        assert!(!path.exists());
    }

    #[test]
    fn replaces_a_stale_socket_but_not_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        // A socket file left behind by a run that did not clean up.
        let stale = UnixDatagram::bind(&path).unwrap();
        drop(stale);
        assert!(path.exists());
        let sock = NotifySocket::bind(&path).unwrap();
        UnixDatagram::unbound()
            .unwrap()
            .send_to(b"READY=1", &path)
            .unwrap();
        assert!(sock.recv(Duration::from_secs(5)).unwrap().ready);
        drop(sock);

        let file = dir.path().join("precious.txt");
        std::fs::write(&file, "keep me").unwrap();
        let err = NotifySocket::bind(&file).unwrap_err().to_string();
        assert!(
            err.ends_with("exists and is not a socket: not replacing it with the notify socket"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    }

    #[test]
    fn a_path_too_long_for_a_unix_socket_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x".repeat(120));
        let err = NotifySocket::bind(&path).unwrap_err().to_string();
        assert!(
            err.starts_with("the notify socket path is ") && err.contains("must be at most 107"),
            "{err}"
        );
    }
}
