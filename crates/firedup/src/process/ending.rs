//! How a process that is not our child ended. `waitpid` cannot tell (only its parent may reap it),
//! so a pidfd is opened while it lives: it becomes readable the moment the process exits, and
//! holds its identity against pid reuse. The status is then read, best first, from
//! `/proc/PID/stat` field 52 (`exit_code`, there while the process is a zombie its parent has not
//! reaped yet), else from the pidfd itself (`PIDFD_GET_INFO` with `PIDFD_INFO_EXIT`, Linux 6.15+:
//! the kernel keeps the status for the pidfd's holder after the reap). Neither: the status is
//! unknown (`None`), never guessed.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Duration;

use crate::verdict::ExitInfo;

/// A live process watched for its end.
#[derive(Debug)]
pub struct Ending {
    pid: u32,
    start_ticks: u64,
    pidfd: OwnedFd,
}

impl Ending {
    /// Opens the watch on `pid`, which must still be the process that started at `start_ticks`
    /// (checked after the pidfd is open, so the pidfd is that process's). `None`: it is gone, or
    /// this kernel has no pidfds.
    pub fn open(pid: u32, start_ticks: u64) -> Option<Ending> {
        let rpid = rustix::process::Pid::from_raw(pid as i32)?;
        let pidfd = rustix::process::pidfd_open(rpid, rustix::process::PidfdFlags::empty()).ok()?;
        let same = super::stat(pid).is_some_and(|s| s.start_ticks == start_ticks);
        same.then_some(Ending {
            pid,
            start_ticks,
            pidfd,
        })
    }

    /// The watched pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Blocks until the process has ended (true) or, checked every `check`, `stop` returns true
    /// (false).
    pub fn wait(&self, check: Duration, stop: &dyn Fn() -> bool) -> bool {
        let timeout = rustix::event::Timespec {
            tv_sec: check.as_secs() as i64,
            tv_nsec: check.subsec_nanos() as i64,
        };
        loop {
            let fd = self.pidfd.as_fd();
            let mut fds = [rustix::event::PollFd::new(
                &fd,
                rustix::event::PollFlags::IN,
            )];
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(n) if n > 0 => return true,
                Ok(_) | Err(rustix::io::Errno::INTR) => {
                    if stop() {
                        return false;
                    }
                }
                Err(_) => return true,
            }
        }
    }

    /// How the ended process ended, when that can still be learned.
    pub fn exit(&self) -> Option<ExitInfo> {
        let zombie = std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .ok()
            .filter(|t| super::parse_stat(t).is_some_and(|s| s.start_ticks == self.start_ticks))
            .and_then(|t| zombie_wait_status(&t));
        zombie
            .or_else(|| pidfd_wait_status(&self.pidfd))
            .map(exit_of_wait_status)
    }
}

/// The wait status (`exit_code`, field 52) of a zombie's `/proc/PID/stat`; `None` while it runs
/// (the field is 0 then, which would read as "exited 0").
pub fn zombie_wait_status(stat: &str) -> Option<i32> {
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (the state).
    if !matches!(fields.first(), Some(&"Z") | Some(&"X")) {
        return None;
    }
    fields.get(52 - 3)?.parse().ok()
}

/// A wait status as `waitpid` reports it, as an [`ExitInfo`].
pub fn exit_of_wait_status(status: i32) -> ExitInfo {
    let signal = status & 0x7f;
    if signal == 0 {
        ExitInfo::code((status >> 8) & 0xff)
    } else {
        ExitInfo::signal(signal, status & 0x80 != 0)
    }
}

/// `struct pidfd_info` as of its first version (64 bytes, `PIDFD_INFO_SIZE_VER0`); the kernel
/// fills what the size covers.
#[repr(C)]
#[derive(Default)]
struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    pid: u32,
    tgid: u32,
    ppid: u32,
    ruid: u32,
    rgid: u32,
    euid: u32,
    egid: u32,
    suid: u32,
    sgid: u32,
    fsuid: u32,
    fsgid: u32,
    exit_code: i32,
}

const PIDFD_INFO_EXIT: u64 = 1 << 3;

/// `_IOWR(PIDFS_IOCTL_MAGIC (0xFF), 11, struct pidfd_info)`.
const PIDFD_GET_INFO: libc::c_ulong =
    (3 << 30) | ((std::mem::size_of::<PidfdInfo>() as libc::c_ulong) << 16) | (0xFF << 8) | 11;

/// The exit status the kernel kept for a reaped process's pidfd (Linux 6.15+); `None` on older
/// kernels or while the process is not reaped yet.
fn pidfd_wait_status(pidfd: &OwnedFd) -> Option<i32> {
    let mut info = PidfdInfo {
        mask: PIDFD_INFO_EXIT,
        ..PidfdInfo::default()
    };
    // SAFETY: the ioctl writes at most `size_of::<PidfdInfo>()` bytes (the size is encoded in the
    // request) into `info`, which lives across the call; the fd is open (owned by `pidfd`).
    let rc = unsafe {
        libc::ioctl(
            pidfd.as_raw_fd(),
            PIDFD_GET_INFO as _,
            &mut info as *mut PidfdInfo,
        )
    };
    (rc == 0 && info.mask & PIDFD_INFO_EXIT != 0).then_some(info.exit_code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounded_wait::{HANG, bounded};

    #[test]
    fn wait_statuses_read_as_codes_and_signals() {
        for (status, want) in [
            (0, ExitInfo::code(0)),
            (3 << 8, ExitInfo::code(3)),
            (9, ExitInfo::signal(9, false)),
            (6 | 0x80, ExitInfo::signal(6, true)),
            (15, ExitInfo::signal(15, false)),
        ] {
            assert_eq!(exit_of_wait_status(status), want, "status {status:#x}");
        }
    }

    #[test]
    fn only_a_zombie_has_a_wait_status_in_its_stat() {
        // Fields 7 to 51, then field 52.
        let tail = "0 ".repeat(45);
        let zombie = format!("77 (py thon) Z 1 77 77 {tail}9");
        let running = format!("77 (py thon) S 1 77 77 {tail}0");
        assert_eq!(zombie_wait_status(&zombie), Some(9));
        assert_eq!(zombie_wait_status(&running), None);
        assert_eq!(zombie_wait_status("77 (x) Z 1"), None);
    }

    #[test]
    fn a_killed_process_is_seen_to_end_by_its_signal() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let start = crate::process::stat(pid).unwrap().start_ticks;
        let ending = Ending::open(pid, start).expect("a pidfd on a live child");
        assert!(Ending::open(pid, start + 1).is_none(), "another start time");
        child.kill().unwrap();
        let ended = bounded("waiting for the end", HANG, move || {
            let ended = ending.wait(Duration::from_millis(50), &|| false);
            (ended, ending)
        });
        assert!(ended.0);
        // Not reaped yet: a zombie, its status in /proc.
        assert_eq!(ended.1.exit(), Some(ExitInfo::signal(9, false)));
        child.wait().unwrap();
        // Reaped: the pidfd's kept status where the kernel has it, else unknown, never wrong.
        let after = ended.1.exit();
        assert!(
            after.is_none() || after == Some(ExitInfo::signal(9, false)),
            "{after:?}"
        );
    }
}
