//! firedup's own failures, as types: what went wrong with firedup itself (a usage mistake, a file
//! it could not read or write, its supervisor), never what went wrong with the watched server,
//! which is a verdict in an [`Outcome`](crate::verdict::Outcome).
//!
//! Every error displays as the one sentence a user of the command line reads today, saying what
//! failed and what to do; where the operating system or a parser said more, that is the error's
//! [`source`](std::error::Error::source), so the chain (`anyhow`'s `{:#}`, or [`chain`]) reads
//! "cannot read /x/meta.json: No such file or directory" as before.

#![warn(missing_docs, unreachable_pub)]

use std::path::PathBuf;

/// A result whose error is firedup's own failure.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// firedup's own failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The options, the command, a path or a name cannot be used as given (a bad duration, a
    /// server mode with no readiness condition, a log that is not a regular file, a run id that
    /// names no run). Nothing was started.
    #[error("{0}")]
    Usage(String),
    /// A pattern (a signature's, a profile's, `--ready-line`, `--fail-line`) does not compile.
    #[error(transparent)]
    Pattern(#[from] firedup_judge::classify::PatternError),
    /// A profile name that names no profile, or a profile that cannot be used.
    #[error(transparent)]
    Profile(#[from] firedup_judge::profile::ProfileError),
    /// A file or directory firedup uses could not be read or written; `context` says which.
    #[error("{context}")]
    Io {
        /// What firedup was doing, in one sentence.
        context: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// An operating system failure with nothing to add to what the system says.
    #[error(transparent)]
    Os(#[from] std::io::Error),
    /// A record firedup reads (`meta.json`, a spec from the launcher) is not what it wrote;
    /// `context` says which.
    #[error("{context}")]
    Record {
        /// Which record, in one sentence.
        context: String,
        /// What the parser said.
        #[source]
        source: serde_json::Error,
    },
    /// A record could not be encoded or decoded, with nothing to add to what the parser says.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The state directory cannot hold the run safely (not private, no free run id).
    #[error("{0}")]
    StateDir(String),
    /// The firedup on another host refused or failed what was asked, in its own sentence.
    #[error("{0}")]
    Remote(String),
    /// firedup's supervisor could not start or record the run.
    #[error("{0}")]
    Supervisor(String),
    /// No firedup binary was found to run the supervisor (see
    /// [`Launch::firedup_bin`](crate::launcher::Launch::firedup_bin)).
    #[error(
        "no firedup binary found to supervise the run: put firedup on PATH or set FIREDUP_BIN to its path"
    )]
    NoFiredupBinary,
    /// The firedup binary named by `FIREDUP_BIN` or
    /// [`Launch::firedup_bin`](crate::launcher::Launch::firedup_bin) is not a file.
    #[error(
        "the firedup binary {} does not exist: set FIREDUP_BIN to the path of a firedup binary",
        .0.display()
    )]
    FiredupBinaryMissing(PathBuf),
}

impl Error {
    /// A usage mistake, in one sentence.
    pub(crate) fn usage(sentence: impl Into<String>) -> Error {
        Error::Usage(sentence.into())
    }
}

/// An error and its sources, joined by ": " (what `anyhow` shows for `{:#}`).
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    text
}

/// Adds the sentence saying what firedup was doing to an I/O or JSON failure.
pub(crate) trait Context<T> {
    fn context(self, context: &str) -> Result<T>;
    fn with_context(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> Context<T> for std::result::Result<T, std::io::Error> {
    fn context(self, context: &str) -> Result<T> {
        self.with_context(|| context.to_string())
    }
    fn with_context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::Io {
            context: context(),
            source,
        })
    }
}

impl<T> Context<T> for std::result::Result<T, serde_json::Error> {
    fn context(self, context: &str) -> Result<T> {
        self.with_context(|| context.to_string())
    }
    fn with_context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::Record {
            context: context(),
            source,
        })
    }
}

/// Returns early with a usage mistake: `usage!("--env '{pair}' is not KEY=VALUE")`.
macro_rules! usage {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::Usage(format!($($arg)*)))
    };
}
pub(crate) use usage;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_reads_as_anyhow_showed_it() {
        let table: [(Error, &str); 4] = [
            (
                Error::usage("--env 'x' is not KEY=VALUE"),
                "--env 'x' is not KEY=VALUE",
            ),
            (
                Err::<(), _>(std::io::Error::from_raw_os_error(libc::ENOENT))
                    .context("cannot read /x/meta.json")
                    .unwrap_err(),
                "cannot read /x/meta.json: No such file or directory (os error 2)",
            ),
            (
                Error::Os(std::io::Error::from_raw_os_error(libc::ENOSPC)),
                "No space left on device (os error 28)",
            ),
            (
                Error::NoFiredupBinary,
                "no firedup binary found to supervise the run: put firedup on PATH or set FIREDUP_BIN to its path",
            ),
        ];
        for (e, want) in table {
            assert_eq!(chain(&e), want);
            assert_eq!(format!("{:#}", anyhow::Error::from(e)), want);
        }
    }
}
