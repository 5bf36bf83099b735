//! A local observer's wakes, and their sending end: the channel every wake source sends on, and,
//! where the observer waits in `poll` on its own inotify instance ([`super::own_inotify`]) rather
//! than on the channel, the bell (an eventfd) rung after each send so that the wait ends.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::mpsc::Sender;

use crate::judge::Observation;
use crate::rundir::ExitRecord;

/// What wakes the observer, and with what.
pub(crate) enum Wake {
    /// Something changed in a watched directory (the shared inotify instance's thread, or a
    /// rank comparison's end): look again.
    Fs,
    /// The process with this pid (the launched one, or a daemon followed after it) is gone.
    ProcessGone(u32),
    /// The supervisor reported the exit on its pipe (it has reaped the process).
    ExitRecord(ExitRecord),
    /// An observation from the prober or the sd_notify thread.
    Obs(Observation),
    /// A rank named by its title died while the processes above it live, and its status was
    /// reaped before it could be read: [`Observation::RankEnded`] by SIGKILL where the kernel
    /// logged that its OOM killer killed it, else nothing (a shutdown's end is no failure).
    RankStatusLost { rank: u32, pid: u32 },
}

/// Sends a [`Wake`] to the observer (cloned into each wake source's thread).
#[derive(Clone)]
pub(crate) struct WakeTx {
    tx: Sender<Wake>,
    bell: Option<Arc<OwnedFd>>,
}

impl WakeTx {
    /// `bell`: the eventfd the observer polls beside its inotify instance, if it has one.
    pub(super) fn new(tx: Sender<Wake>, bell: Option<Arc<OwnedFd>>) -> WakeTx {
        WakeTx { tx, bell }
    }

    /// Sends `wake`; `Err` once the observer is gone. The bell is rung after the send, so that
    /// the observer, woken, finds the wake on the channel.
    pub(crate) fn send(&self, wake: Wake) -> Result<(), ObserverGone> {
        self.tx.send(wake).map_err(|_| ObserverGone)?;
        if let Some(bell) = &self.bell {
            // An eventfd's counter only saturates after 2^64 - 2 rings: never full in practice,
            // and a full one is still readable, which is all the waiter needs.
            let _ = rustix::io::write(bell.as_ref(), &1u64.to_ne_bytes());
        }
        Ok(())
    }
}

/// The observer a wake was sent to is gone (its channel closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ObserverGone;

impl From<Sender<Wake>> for WakeTx {
    fn from(tx: Sender<Wake>) -> WakeTx {
        WakeTx::new(tx, None)
    }
}
