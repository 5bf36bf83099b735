//! The old-glibc host of tests/old_glibc.rs and tests/old_glibc_remote.rs: a Debian 11 root
//! (glibc 2.31, `tests/old_glibc/make_root.sh`) and the portable firedup
//! (`scripts/build-portable.sh`). Without either, or without root privileges (chroot, mounts),
//! a test says so and passes, unless `FIREDUP_TEST_REQUIRE_OLD_GLIBC=1` (CI) makes it fail.

use std::path::{Path, PathBuf};

/// TARGET/portable/firedup, or `FIREDUP_TEST_PORTABLE_BIN`.
pub fn portable_bin() -> PathBuf {
    match std::env::var_os("FIREDUP_TEST_PORTABLE_BIN").filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_BIN_EXE_firedup"))
            .parent()
            .and_then(Path::parent)
            .expect("the test binary is in TARGET/PROFILE")
            .join("portable/firedup"),
    }
}

/// `FIREDUP_TEST_OLD_GLIBC_ROOT`, else `${XDG_CACHE_HOME:-~/.cache}/firedup-ci/debian11-root`.
fn root_dir() -> PathBuf {
    match std::env::var_os("FIREDUP_TEST_OLD_GLIBC_ROOT").filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
            })
            .join("firedup-ci/debian11-root"),
    }
}

/// The Debian 11 root, or `None` (after saying why) when this machine cannot run these tests.
pub fn old_root() -> Option<PathBuf> {
    let root = root_dir();
    let missing = if !portable_bin().is_file() {
        Some(format!(
            "no portable firedup at {} (bash scripts/build-portable.sh)",
            portable_bin().display()
        ))
    } else if !root.join("bin/sh").exists() {
        Some(format!(
            "no Debian 11 root at {} (bash tests/old_glibc/make_root.sh CACHE_DIR; needs debootstrap)",
            root.display()
        ))
    } else if !rustix::process::geteuid().is_root() {
        Some("not root: chroot and bind mounts need it".to_string())
    } else {
        None
    };
    if let Some(why) = missing {
        assert!(
            std::env::var("FIREDUP_TEST_REQUIRE_OLD_GLIBC").as_deref() != Ok("1"),
            "FIREDUP_TEST_REQUIRE_OLD_GLIBC=1 but {why}"
        );
        eprintln!("skipped: {why}");
        return None;
    }
    Some(root)
}
