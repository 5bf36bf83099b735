//! How a local observer learns that its files changed: through the process's own inotify instance
//! when it holds it ([`OwnInotify`], waited on by the observer's thread), or else through
//! subscriptions to the shared one ([`crate::dirwatch`], whose thread sends [`Wake::Fs`]). Either
//! way the log is watched in its directory, or until the directory appears through the next
//! component of its path in the nearest existing ancestor, and the run directory for any name.

use std::path::Path;
use std::sync::Arc;

use super::own_inotify::OwnInotify;
use super::wake_sources::{LogDirWatch, rearm};
use super::{Wake, WakeTx};
use crate::dirwatch::{self, DirSubscription};
use crate::target::Target;

pub(super) enum FileWatch {
    Own(OwnInotify),
    Shared {
        /// Sends [`Wake::Fs`] on the observer's channel (the shared instance's thread calls it).
        wake: dirwatch::Wake,
        /// The directory watched for the log (its own, or the nearest existing ancestor).
        log: Option<LogDirWatch>,
        _run: Option<DirSubscription>,
    },
}

impl FileWatch {
    /// Watches `target`'s log and run directory: through `own` (the instance the observer claimed,
    /// whose bell `tx` rings), or where it has none through the shared instance, waking it on
    /// `tx`.
    pub(super) fn start(own: Option<OwnInotify>, target: &Target, tx: &WakeTx) -> FileWatch {
        match own {
            Some(mut own) => {
                own.rearm(&target.log);
                if let Some(run) = &target.run {
                    own.watch_run_dir(&run.path);
                }
                FileWatch::Own(own)
            }
            None => {
                let fs_tx = tx.clone();
                let wake: dirwatch::Wake = Arc::new(move || {
                    let _ = fs_tx.send(Wake::Fs);
                });
                let mut log = None;
                rearm(&mut log, &target.log, &wake);
                let run = target
                    .run
                    .as_ref()
                    .and_then(|run| dirwatch::subscribe(&run.path, None, wake.clone()));
                FileWatch::Shared {
                    wake,
                    log,
                    _run: run,
                }
            }
        }
    }

    /// Watches `log` where it is watched now (its directory may have appeared or gone).
    pub(super) fn rearm(&mut self, log: &Path) {
        match self {
            FileWatch::Own(own) => own.rearm(log),
            FileWatch::Shared {
                wake, log: current, ..
            } => rearm(current, log, wake),
        }
    }

    /// The own instance, where the observer waits on it.
    pub(super) fn own(&mut self) -> Option<&mut OwnInotify> {
        match self {
            FileWatch::Own(own) => Some(own),
            FileWatch::Shared { .. } => None,
        }
    }
}
