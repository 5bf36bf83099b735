//! sd_notify socket. (Stub: implemented in the probes change.)

use std::path::{Path, PathBuf};
use std::time::Duration;

/// One datagram from the command, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NotifyMessage {
    pub ready: bool,
    pub stopping: bool,
    pub status: Option<String>,
    pub extend_timeout: Option<Duration>,
    pub errno: Option<i32>,
}

/// A bound `NOTIFY_SOCKET` (unix datagram). The socket file is removed on drop.
#[derive(Debug)]
pub struct NotifySocket {
    pub path: PathBuf,
}

impl NotifySocket {
    pub fn bind(path: &Path) -> anyhow::Result<NotifySocket> {
        anyhow::bail!("sd_notify is not built yet: {}", path.display())
    }

    /// Waits up to `timeout` for the next message.
    pub fn recv(&self, timeout: Duration) -> Option<NotifyMessage> {
        let _ = timeout;
        None
    }
}

/// Parses one datagram (`KEY=VALUE` lines).
pub fn parse(datagram: &[u8]) -> NotifyMessage {
    let _ = datagram;
    NotifyMessage::default()
}
