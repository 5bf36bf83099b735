//! A second local user for the security tests (issue 24): a process of another user that tries to
//! pass for a run's (its `FIREDUP_RUN_ID`, its port), a symlink it plants where firedup writes, a
//! reader of `ps`. The user (`firedup-other`, a system account with no login and no home) is made on
//! first use; the tests run as root (CI does), and without root they say so and skip.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// The name of the second local user.
pub const OTHER_USER: &str = "firedup-other";

/// The second user's uid and gid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OtherUser {
    pub uid: u32,
    pub gid: u32,
}

impl OtherUser {
    /// Makes `command` run as this user (its groups dropped: std drops supplementary groups
    /// when root sets a uid).
    pub fn command(&self, command: &mut Command) {
        command.uid(self.uid).gid(self.gid);
    }

    /// A temporary directory owned by this user (mode 0755): a place the other user controls,
    /// where it can plant or swap files.
    pub fn dir(&self) -> tempfile::TempDir {
        let dir = tempfile::Builder::new()
            .prefix("firedup-other-")
            .tempdir()
            .unwrap();
        std::os::unix::fs::chown(dir.path(), Some(self.uid), Some(self.gid)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    }
}

fn lookup() -> Option<OtherUser> {
    let out = Command::new("id")
        .args(["-u", OTHER_USER])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let uid = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    let out = Command::new("id").args(["-g", OTHER_USER]).output().ok()?;
    let gid = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    Some(OtherUser { uid, gid })
}

/// The second user, made if it is not there yet; `None` (and a line saying the test did not run)
/// when this test does not run as root and the user cannot be made or switched to.
pub fn other_user() -> Option<OtherUser> {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: the security tests switch to a second user, which needs root");
        return None;
    }
    if let Some(u) = lookup() {
        return Some(u);
    }
    // Test binaries run in parallel: a second `useradd` of the same name fails (exit 9), and
    // the user is there all the same.
    let status = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            OTHER_USER,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("useradd (package passwd) runs");
    let user = lookup();
    assert!(
        user.is_some(),
        "useradd {OTHER_USER} ended {status} and the user is not there"
    );
    user
}
