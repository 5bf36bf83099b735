//! Which firedup binary runs a library launch's supervisor (and is copied to an SSH host for a
//! library caller, whose own program is not firedup): [`Launch::firedup_bin`], else
//! `$FIREDUP_BIN`, else this program when it is `firedup`, else `firedup` beside this program or
//! one folder up (cargo puts a test in `target/PROFILE/deps`, the workspace's binaries in
//! `target/PROFILE`), else `firedup` on `PATH`. A path that was named but is missing is said so,
//! rather than passed over for another binary.
//!
//! [`Launch::firedup_bin`]: crate::Launch::firedup_bin

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// The firedup binary to run the supervisor with, in the order of the module doc.
pub(crate) fn find_firedup(explicit: Option<&Path>) -> Result<PathBuf, Error> {
    let named = explicit.map(Path::to_path_buf).or_else(|| {
        std::env::var_os("FIREDUP_BIN")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let path = std::env::var_os("PATH").unwrap_or_default();
    find(named, std::env::current_exe().ok(), &path)
}

/// [`find_firedup`] on what it read: the named path, this program, `$PATH`.
fn find(named: Option<PathBuf>, exe: Option<PathBuf>, path: &OsStr) -> Result<PathBuf, Error> {
    if let Some(path) = named {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Error::FiredupBinaryMissing(path))
        };
    }
    if let Some(exe) = exe
        .as_ref()
        .filter(|e| e.file_name() == Some("firedup".as_ref()))
    {
        return Ok(exe.clone());
    }
    let beside = exe
        .as_deref()
        .and_then(Path::parent)
        .map(|dir| [Some(dir), dir.parent()])
        .into_iter()
        .flatten()
        .flatten()
        .map(|dir| dir.join("firedup"));
    let on_path = std::env::split_paths(path).map(|dir| dir.join("firedup"));
    beside
        .chain(on_path)
        .find(|p| p.is_file())
        .ok_or(Error::NoFiredupBinary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binary_is_the_named_one_else_this_program_else_beside_it_else_on_path() {
        let dir = tempfile::tempdir().unwrap();
        let d = |rel: &str| dir.path().join(rel);
        for sub in ["named", "target/release/deps", "bin", "empty"] {
            std::fs::create_dir_all(d(sub)).unwrap();
        }
        for file in ["named/firedup", "target/release/firedup", "bin/firedup"] {
            std::fs::write(d(file), "").unwrap();
        }
        let test_exe = Some(d("target/release/deps/api-0123"));
        let path = std::env::join_paths([d("empty"), d("bin")]).unwrap();
        let no_path = std::ffi::OsString::new();
        let table: [(
            Option<PathBuf>,
            Option<PathBuf>,
            &OsStr,
            Result<PathBuf, &str>,
        ); 6] = [
            (
                Some(d("named/firedup")),
                test_exe.clone(),
                &path,
                Ok(d("named/firedup")),
            ),
            (
                Some(d("named/missing")),
                test_exe.clone(),
                &path,
                Err("does not exist"),
            ),
            (
                None,
                Some(d("elsewhere/firedup")),
                &path,
                Ok(d("elsewhere/firedup")),
            ),
            (
                None,
                test_exe.clone(),
                &path,
                Ok(d("target/release/firedup")),
            ),
            (None, Some(d("empty/program")), &path, Ok(d("bin/firedup"))),
            (
                None,
                Some(d("empty/program")),
                &no_path,
                Err(
                    "no firedup binary found to supervise the run: put firedup on PATH or set FIREDUP_BIN to its path",
                ),
            ),
        ];
        for (named, exe, path, want) in table {
            let got = find(named.clone(), exe.clone(), path);
            match (&got, want) {
                (Ok(p), Ok(w)) => assert_eq!(p, &w, "{named:?} {exe:?}"),
                (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{e}"),
                _ => panic!("{named:?} {exe:?}: got {got:?}"),
            }
        }
    }

    #[test]
    fn a_named_firedup_binary_that_is_missing_is_said_so() {
        let e = find_firedup(Some(Path::new("/nonexistent/firedup"))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the firedup binary /nonexistent/firedup does not exist: set FIREDUP_BIN to the path of a firedup binary"
        );
    }
}
