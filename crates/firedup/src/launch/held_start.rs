//! Starting the command held at the gate: forked, in a session of its own, its output on the log,
//! but not yet exec'd until the supervisor has recorded its pid durably. A command that runs is
//! always a recorded one: if the record cannot be written (a full state disk), the held child is
//! killed before it ever ran, and nothing is orphaned.
//!
//! `std::process::Command` cannot do this: its `spawn` waits for the exec, so a child held in
//! `pre_exec` would never let it return. Here, as in std, a close-on-exec pipe brings back the
//! errno of a failed exec, and closes without a word at a successful one.

use std::ffi::CString;
use std::fs::File;
use std::io::{PipeReader, PipeWriter, Read, Write};
use std::os::fd::AsRawFd;

/// What `_exit` status a held child uses when its supervisor is gone before releasing it.
const SUPERVISOR_GONE: i32 = 125;

/// A forked child waiting at the gate.
#[derive(Debug)]
pub(super) struct HeldChild {
    pub pid: u32,
    release: PipeWriter,
    exec_error: PipeReader,
}

/// Forks the child for `argv` with stdin on /dev/null and stdout+stderr on `log`, its
/// `oom_score_adj` given back (`restore`); it waits for [`HeldChild::release`].
pub(super) fn start_held(
    argv: &[String],
    log: &File,
    restore: Option<crate::oom_score::Restore>,
) -> std::io::Result<HeldChild> {
    let args: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let devnull = File::open("/dev/null")?;
    // std's pipes are close-on-exec: the exec closes the error pipe, and neither end leaks into
    // the command.
    let (gate_r, gate_w) = std::io::pipe()?;
    let (err_r, err_w) = std::io::pipe()?;
    let (log_fd, null_fd) = (log.as_raw_fd(), devnull.as_raw_fd());
    let (gate_r_fd, gate_w_fd, err_w_fd) =
        (gate_r.as_raw_fd(), gate_w.as_raw_fd(), err_w.as_raw_fd());
    // SAFETY: fork in the (single-threaded) supervisor; the child makes only async-signal-safe
    // calls (setsid, signal, sigprocmask, dup2, close, read, open, execvp, write, _exit) on memory
    // prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        unsafe {
            libc::setsid();
            // A command starts with default signal dispositions and no blocked signals, whatever
            // firedup inherited: a firedup started as a background job (`firedup run ... &`) has
            // SIGINT and SIGQUIT ignored, and the server would inherit that.
            for sig in 1..32 {
                if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                    libc::signal(sig, libc::SIG_DFL);
                }
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::dup2(null_fd, 0);
            libc::dup2(log_fd, 1);
            libc::dup2(log_fd, 2);
            // Only the supervisor may open the gate: with this end closed here, its death reads
            // as EOF.
            libc::close(gate_w_fd);
            let mut b = 0u8;
            loop {
                let n = libc::read(gate_r_fd, (&mut b as *mut u8).cast(), 1);
                if n == 1 {
                    break;
                }
                if n < 0 && *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                libc::_exit(SUPERVISOR_GONE);
            }
            // The command's standing with the OOM killer is the one firedup was started with.
            if let Some(r) = &restore {
                r.apply();
            }
            libc::execvp(ptrs[0], ptrs.as_ptr());
            let errno = *libc::__errno_location();
            let bytes = errno.to_ne_bytes();
            libc::write(err_w_fd, bytes.as_ptr().cast(), bytes.len());
            libc::_exit(127);
        }
    }
    drop(gate_r);
    drop(err_w);
    Ok(HeldChild {
        pid: pid as u32,
        release: gate_w,
        exec_error: err_r,
    })
}

impl HeldChild {
    /// Lets the child exec; `Err` with the exec's error when it failed (the child has exited).
    pub(super) fn release(mut self) -> std::io::Result<()> {
        self.release.write_all(b"x")?;
        drop(self.release);
        let mut buf = [0u8; 4];
        let mut got = 0;
        while got < buf.len() {
            match self.exec_error.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        if got == buf.len() {
            reap(self.pid);
            return Err(std::io::Error::from_raw_os_error(i32::from_ne_bytes(buf)));
        }
        Ok(())
    }

    /// Kills the child before it ever ran, and reaps it.
    pub(super) fn abandon(self) {
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe {
            libc::kill(self.pid as i32, libc::SIGKILL);
        }
        reap(self.pid);
    }
}

fn reap(pid: u32) {
    let mut status: libc::c_int = 0;
    // SAFETY: waitpid on our own child with a valid out-pointer.
    while unsafe { libc::waitpid(pid as i32, &mut status, 0) } < 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
}
