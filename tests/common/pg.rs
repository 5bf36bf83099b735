//! A real PostgreSQL for tests: the binaries, the `postgres` user, a throwaway cluster.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::bounded::run_bounded;

/// The longest a helper (initdb, chown) may run.
const HELPER_BOUND: std::time::Duration = std::time::Duration::from_secs(120);

pub struct Pg {
    pub initdb: PathBuf,
    pub postgres: PathBuf,
}

/// Finds initdb and postgres (in /usr/lib/postgresql/*/bin, else on PATH) and checks the
/// `postgres` user exists. None (the test is skipped) only when neither binaries nor user exist.
pub fn find_pg() -> Option<Pg> {
    let mut bins: Option<Pg> = None;
    if let Ok(rd) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut dirs: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        dirs.sort();
        for d in dirs.iter().rev() {
            let (i, p) = (d.join("bin/initdb"), d.join("bin/postgres"));
            if i.is_file() && p.is_file() {
                bins = Some(Pg {
                    initdb: i,
                    postgres: p,
                });
                break;
            }
        }
    }
    if bins.is_none() {
        let path = std::env::var_os("PATH").unwrap_or_default();
        for d in std::env::split_paths(&path) {
            let (i, p) = (d.join("initdb"), d.join("postgres"));
            if i.is_file() && p.is_file() {
                bins = Some(Pg {
                    initdb: i,
                    postgres: p,
                });
                break;
            }
        }
    }
    let user = Command::new("id")
        .args(["-u", "postgres"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    match (bins, user) {
        (None, false) => {
            eprintln!("SKIPPED: no PostgreSQL binaries and no postgres user on this machine");
            None
        }
        (Some(b), true) => Some(b),
        (b, u) => panic!(
            "PostgreSQL half installed: binaries found: {}, postgres user exists: {u}",
            b.is_some()
        ),
    }
}

/// Runs a helper command; the test fails unless it exits 0.
pub fn sh(args: &[&str]) {
    let mut c = Command::new(args[0]);
    c.args(&args[1..]);
    let o = run_bounded(c, HELPER_BOUND);
    assert_eq!(o.code, 0, "{args:?}: {}{}", o.stdout, o.stderr);
}

pub const AS_POSTGRES: [&str; 4] = [
    "setpriv",
    "--reuid=postgres",
    "--regid=postgres",
    "--init-groups",
];

/// A world-traversable tempdir owned by postgres, with an initialised cluster in DIR/data.
pub fn pg_cluster(pg: &Pg) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    sh(&["chmod", "755", d]);
    sh(&["chown", "-R", "postgres:postgres", d]);
    let data = format!("{d}/data");
    let mut args: Vec<&str> = AS_POSTGRES.to_vec();
    args.extend([
        pg.initdb.to_str().unwrap(),
        "-D",
        &data,
        "-A",
        "trust",
        "-U",
        "postgres",
        "--no-sync",
    ]);
    sh(&args);
    dir
}
