//! The pending file: records that could not reach the database (it was locked too long, broken,
//! or from a newer firedup) wait in `history-pending.ndjson` next to it, and the next firedup that
//! can open the database moves them in, once each.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use rusqlite::params;

use super::rows::upsert;
use super::{History, RunRecord};

/// Where records wait while the database cannot be used.
pub(super) fn pending_path(db: &Path) -> PathBuf {
    db.with_file_name("history-pending.ndjson")
}

pub(super) fn append_pending(pending: &Path, r: &RunRecord) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let mut line = serde_json::to_vec(r)?;
    line.push(b'\n');
    // An importer may rename the file between our open and our write: hold its lock while
    // writing, and write only if the path still names the file we hold (else open it anew).
    for _ in 0..10 {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(pending)?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)?;
        let same = std::fs::metadata(pending)
            .is_ok_and(|m| m.ino() == f.metadata().map(|h| h.ino()).unwrap_or(0));
        if same {
            f.write_all(&line)?;
            return Ok(());
        }
    }
    bail!("{} kept being moved away", pending.display())
}

impl History {
    /// Moves the records kept in `pending` (while the database could not be used) into it, in one
    /// transaction; the file is removed only after the commit. Lines that do not parse are kept
    /// in `pending.bad` rather than dropped.
    pub fn import_pending(&mut self, pending: &Path) -> Result<usize> {
        let taken = pending.with_extension("importing");
        if !pending.exists() && !taken.exists() {
            return Ok(0);
        }
        // One importer at a time, across processes and threads: the database's write lock is
        // taken before the files are touched.
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // A file left taken by a firedup that died while importing is imported first.
        if !taken.exists() {
            match std::fs::rename(pending, &taken) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
                Err(e) => return Err(e.into()),
            }
        }
        // A writer that opened the file before the rename finishes its line first.
        let file = std::fs::File::open(&taken)?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
        let text = std::fs::read_to_string(&taken)?;
        let mut bad = Vec::new();
        let mut n = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(r) = serde_json::from_str::<RunRecord>(line) else {
                bad.push(line);
                continue;
            };
            // Imported before, by a firedup that died between its commit and the removal.
            let seen: bool = tx.query_row(
                "SELECT EXISTS(SELECT 1 FROM runs WHERE run_id = ?1 AND ended_at = ?2)",
                params![r.run_id, r.ended_at],
                |row| row.get(0),
            )?;
            if !seen {
                upsert(&tx, &r)?;
                n += 1;
            }
        }
        if !bad.is_empty() {
            use std::io::Write;
            let mut keep = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(pending.with_extension("bad"))?;
            for l in bad {
                writeln!(keep, "{l}")?;
            }
        }
        tx.commit()?;
        std::fs::remove_file(&taken)?;
        Ok(n)
    }
}
