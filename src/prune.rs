//! `firedup prune`: removes the run directories (meta, records and the logs kept there) of runs
//! that ended longer ago than `--older-than` (default 7 days). A run is never removed while its
//! command runs, nor while any process of this user carries its `FIREDUP_RUN_ID` (a daemon that
//! outlived its launcher; another user's process that sets the id keeps nothing). The history database keeps its rows: `firedup show` still tells how a pruned run
//! ended.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use anyhow::{Result, anyhow};

use crate::duration::{format_duration, parse_duration};
use crate::rundir::{RunDir, now_unix};

/// `firedup prune [--older-than DURATION] [--dry-run]`.
pub fn prune(older_than: &str, dry_run: bool) -> Result<i32> {
    let age = parse_duration(older_than).map_err(|e| anyhow!("--older-than: {e}"))?;
    let now = now_unix();
    let marked = runs_with_processes();
    let (mut removed, mut bytes, mut kept_live) = (0usize, 0u64, 0usize);
    for run in RunDir::list() {
        if run.is_live() || marked.contains(&run.id) {
            kept_live += 1;
            continue;
        }
        let Ok(meta) = run.meta() else { continue };
        let ended = run.exit().map(|e| e.ended_at).unwrap_or(meta.started_at);
        let ago = (now - ended).max(0.0);
        if ago < age.as_secs_f64() {
            continue;
        }
        let size = dir_size(&run.path);
        let when = format_duration(Duration::from_secs(ago as u64));
        if dry_run {
            println!("would remove {} (ended {when} ago, {})", run.id, mib(size));
        } else {
            if let Err(e) = std::fs::remove_dir_all(&run.path) {
                eprintln!(
                    "firedup: cannot remove {}: {e}; the rest is pruned",
                    run.path.display()
                );
                continue;
            }
            println!("removed {} (ended {when} ago, {})", run.id, mib(size));
        }
        removed += 1;
        bytes += size;
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    println!(
        "{verb} {removed} run(s) that ended more than {} ago ({}); {kept_live} live run(s) kept",
        format_duration(age),
        mib(bytes)
    );
    Ok(0)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// The run ids carried by live processes of this user (`FIREDUP_RUN_ID` in their environment).
fn runs_with_processes() -> HashSet<String> {
    let mut ids = HashSet::new();
    let Ok(proc_dir) = std::fs::read_dir("/proc") else {
        return ids;
    };
    for entry in proc_dir.filter_map(|e| e.ok()) {
        if !entry
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        let pid = entry.file_name().to_string_lossy().parse().unwrap_or(0);
        let me = rustix::process::geteuid().as_raw();
        if firedup::process::membership::uids(pid).is_none_or(|(real, _)| real != me) {
            continue; // another user's: its environment proves nothing
        }
        let Ok(env) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        for var in env.split(|&b| b == 0) {
            if let Some(id) = var.strip_prefix(b"FIREDUP_RUN_ID=") {
                ids.insert(String::from_utf8_lossy(id).into_owned());
            }
        }
    }
    ids
}
