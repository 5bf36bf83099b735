//! Where firedup keeps its state: the state directory and, under it, the run directories
//! (`crate::rundir` writes and reads them; `crate::process::membership` reads a run's records to
//! tell its processes, which is why this lives apart from `rundir`).

use std::path::PathBuf;

/// Where run directories live.
pub fn runs_root() -> PathBuf {
    state_root().join("runs")
}

/// firedup's state dir: `$FIREDUP_STATE_DIR`, else `$XDG_STATE_HOME/firedup`, else
/// `~/.local/state/firedup`, the home directory being `$HOME` or, when that is unset, the user's
/// entry in the password database; with neither, `/tmp/firedup-UID` (whose ownership
/// [`crate::rundir::check_private`] verifies before anything is written there).
pub fn state_root() -> PathBuf {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    state_root_from(
        env("FIREDUP_STATE_DIR"),
        env("XDG_STATE_HOME"),
        env("HOME").or_else(passwd_home),
        rustix::process::geteuid().as_raw(),
    )
}

pub(crate) fn state_root_from(
    state_dir: Option<PathBuf>,
    xdg_state_home: Option<PathBuf>,
    home: Option<PathBuf>,
    euid: u32,
) -> PathBuf {
    if let Some(d) = state_dir {
        return d;
    }
    if let Some(x) = xdg_state_home.filter(|p| p.is_absolute()) {
        return x.join("firedup");
    }
    match home.filter(|h| h.is_absolute()) {
        Some(h) => h.join(".local/state/firedup"),
        None => PathBuf::from(format!("/tmp/firedup-{euid}")),
    }
}

/// The effective user's home directory from the password database.
fn passwd_home() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: a zeroed passwd is a valid out-parameter; getpwuid_r writes into it and `buf`.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; the buffer length is its real length.
    let rc = unsafe {
        libc::getpwuid_r(
            libc::geteuid(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() || pw.pw_dir.is_null() {
        return None;
    }
    // SAFETY: pw_dir points into `buf`, NUL-terminated by getpwuid_r.
    let dir = unsafe { std::ffi::CStr::from_ptr(pw.pw_dir) };
    let dir = PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes()));
    dir.is_absolute().then_some(dir)
}
