//! Who the OOM killer picks in a memory cgroup that firedup shares with the server it watches.
//!
//! A server that fills its cgroup (a container's memory limit) must be the one killed, not the
//! firedup that would say so: its watcher killed first leaves no verdict, and its supervisor
//! killed leaves no record of how the command ended. So the supervisor and the `run` that
//! watches lower their own `oom_score_adj` to [`WATCHER`] where they may (it takes
//! `CAP_SYS_RESOURCE`; elsewhere nothing changes), and whatever they start for the user (the
//! command, a `--then`) gets back the value firedup itself was started with: the server's
//! standing with the OOM killer is never changed. [`WATCHER`] is low, not the minimum: a firedup
//! alone in a full cgroup can still be killed.

use std::ffi::CStr;
use std::sync::OnceLock;

/// The `oom_score_adj` firedup's own processes take where they may.
pub const WATCHER: i32 = -900;

const OWN: &CStr = c"/proc/self/oom_score_adj";

/// The value this process had before [`protect_own`] (its first call).
static ORIGINAL: OnceLock<i32> = OnceLock::new();

/// This process's `oom_score_adj`, when it can be read.
pub fn own() -> Option<i32> {
    std::fs::read_to_string("/proc/self/oom_score_adj")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Lowers this process's `oom_score_adj` to [`WATCHER`] where it may; returns the value it had
/// (what the processes started for the user get back), `None` when it cannot be read.
pub fn protect_own() -> Option<i32> {
    if let Some(v) = ORIGINAL.get() {
        return Some(*v);
    }
    let original = *ORIGINAL.get_or_init(|| own().unwrap_or(i32::MIN));
    if original == i32::MIN {
        return None;
    }
    if original > WATCHER {
        // Refused without CAP_SYS_RESOURCE: the process keeps its value, as does all it starts.
        let _ = std::fs::write("/proc/self/oom_score_adj", WATCHER.to_string());
    }
    Some(original)
}

/// What a child started for the user gets back: `Some` once this process [`protect_own`]ed.
pub fn for_children() -> Option<Restore> {
    ORIGINAL
        .get()
        .filter(|v| **v != i32::MIN)
        .map(|v| Restore::to(*v))
}

/// The value to give back, written between fork and exec ([`Restore::apply`]).
#[derive(Debug, Clone, Copy)]
pub struct Restore {
    text: [u8; 12],
    len: usize,
}

impl Restore {
    /// Gives `value` back to a child of a process that [`protect_own`]ed.
    pub fn to(value: i32) -> Restore {
        let s = value.to_string();
        let mut text = [0u8; 12];
        text[..s.len()].copy_from_slice(s.as_bytes());
        Restore { text, len: s.len() }
    }

    /// Writes the value into the calling process's `oom_score_adj`. Only async-signal-safe calls
    /// (open, write, close) on memory prepared before the fork: for a `pre_exec` or a forked
    /// child. Raising the value back is allowed without privilege; a failure leaves the child
    /// with its parent's value.
    pub fn apply(&self) {
        // SAFETY: open/write/close on a NUL-terminated constant path and a buffer owned by self.
        unsafe {
            let fd = libc::open(OWN.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd >= 0 {
                libc::write(fd, self.text.as_ptr().cast(), self.len);
                libc::close(fd);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restore_writes_the_value_as_the_kernel_reads_it() {
        for v in [0, -1000, 1000, -900, 17] {
            let r = Restore::to(v);
            assert_eq!(
                std::str::from_utf8(&r.text[..r.len]).unwrap(),
                v.to_string()
            );
        }
    }
}
