//! The front's memory outlives the front, so that the exit the caller waits for does not take
//! it down (issue 28).
//!
//! A process's exit frees its memory before its parent learns of the end: the page tables, every
//! page mapped (for the front, a copy of the watcher's start, shared with it until either
//! writes), every mapping. On the 2-core VM that is most of the front's last run, after
//! [`super::mappings`] has dropped the file pages; for a `tail -F | grep` it is grep's small
//! memory. Memory that another process still shares is not freed by an exit, only let go of.
//!
//! So right after the split, while the server starts, the front starts a *keeper*: a process
//! that shares the front's memory (`clone(CLONE_VM)`; its own process, not a thread of the
//! front's, so the front's exit does not wait for it), with every signal blocked (it is created
//! with the front's signals blocked: a Ctrl-C to the terminal's process group reaches it and
//! stays pending), every file it was given closed (a `$(firedup run ...)` sees the end of stdout
//! when the front exits, not when the keeper does), and nothing to do but wait to be killed by
//! the front's end (`PR_SET_PDEATHSIG` SIGKILL; a front gone before that was set is seen through
//! the parent's pid, as the watcher does). Its end frees the memory after the front's exit has
//! been reported, microseconds after the front's (a few milliseconds on a loaded machine). Its
//! command line is the front's (the kernel reads it from the shared memory): the front overwrites
//! it before it exits (`firedup (exiting)`), so that no process names the command once the caller
//! has learned of the front's end (`multinode_torch` checks it; it failed 2 of 7 before).
//!
//! The keeper runs on a stack of its own in the front's memory, with the front's thread pointer:
//! it touches no heap, no thread-local and no `errno` (only `rustix`'s raw system calls), and
//! the front, blocked in `read` meanwhile, reads nothing the keeper writes. Where the keeper
//! cannot be started, the front exits as before.

use std::ffi::c_void;
use std::os::fd::RawFd;

/// The keeper's stack: a few frames of raw system calls.
const STACK_BYTES: usize = 64 * 1024;

/// What the keeper is told: the front's pid and the files to close, read before the clone.
struct Orders {
    front: rustix::process::Pid,
    fds: Vec<RawFd>,
}

/// Starts the keeper (see the module doc). Does nothing where it cannot be started.
pub(super) fn start() {
    let Some(fds) = open_fds() else { return };
    // Leaked: the keeper reads them for as long as it lives, in memory it shares.
    let orders: &'static Orders = Box::leak(Box::new(Orders {
        front: rustix::process::getpid(),
        fds,
    }));
    // SAFETY: an anonymous private mapping of our own for the keeper's stack, never unmapped
    // (the keeper uses it until its end, after the front's).
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            STACK_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return;
    }
    // SAFETY: every signal blocked around the clone (the keeper is born with them blocked), then
    // the front's mask restored; the keeper runs `keep` on its own stack, reading `orders`
    // (leaked, never written again) and making only raw system calls (see the module doc).
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut before: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        if libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut before) != 0 {
            return;
        }
        let top = stack.cast::<u8>().add(STACK_BYTES).cast::<c_void>();
        libc::clone(
            keep,
            top,
            libc::CLONE_VM | libc::SIGCHLD,
            std::ptr::from_ref(orders).cast_mut().cast::<c_void>(),
        );
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
    }
}

/// The files open now (`/proc/self/fd`, read before the clone: its own descriptor is closed by
/// then). `None` where they cannot be listed: a keeper must close every one.
fn open_fds() -> Option<Vec<RawFd>> {
    let listed: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")
        .ok()?
        .map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect::<Option<_>>()?;
    // The listing's own descriptor, closed since, is among them: closing it again is harmless.
    Some(listed)
}

/// The keeper: closes what it was given, dies with the front.
extern "C" fn keep(orders: *mut c_void) -> libc::c_int {
    // SAFETY: `orders` is the leaked `Orders` of `start`, alive for good and never written.
    let orders = unsafe { &*orders.cast::<Orders>() };
    for &fd in &orders.fds {
        // SAFETY: the keeper's own copy of the descriptor table (no CLONE_FILES): closing one
        // closes nothing of the front's.
        unsafe { rustix::io::close(fd) };
    }
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    if rustix::process::getppid() != Some(orders.front) {
        // The front is gone already: returning ends the keeper.
        return 0;
    }
    loop {
        rustix::event::pause();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_open_are_listed_with_the_standard_streams() {
        let fds = open_fds().expect("/proc/self/fd");
        for fd in [0, 1, 2] {
            assert!(fds.contains(&fd), "{fd} in {fds:?}");
        }
    }
}
