//! A change of the followed log's state (missing, readable, truncated, rotated, unreadable), in
//! words for the progress display.

use std::path::Path;

use crate::judge::LogState;

/// A log state change, in words, for the progress display.
pub(crate) fn describe_state(s: &LogState, path: &Path) -> String {
    use crate::judge::LogState::*;
    match s {
        Missing { dir_exists: true } => format!("log {} does not exist (yet)", path.display()),
        Missing { dir_exists: false } => {
            format!("log {} does not exist, nor its directory", path.display())
        }
        Readable => format!("following {}", path.display()),
        Truncated => format!(
            "log {} was truncated; reading from its start",
            path.display()
        ),
        Rotated => format!("log {} was rotated; following the new file", path.display()),
        Unreadable(r) => format!("cannot read log {}: {r}", path.display()),
    }
}
