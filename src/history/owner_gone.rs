//! Recording the ending of a run whose owner (`run --owner PID`) ended: the run's supervisor (this
//! binary, as `firedup __supervise`) records it once it has stopped the run and reaped it. The
//! run's row, if `run` recorded one (its verdict, e.g. `ready`), keeps its outcome and gets the
//! ending: the `verdict` column says `owner_gone` and `teardown` says what the stop found. A run
//! with no row yet (the owner ended before a verdict, or the `firedup run` that watched it died
//! with the owner) gets one from its run directory; a verdict `run` records later keeps the
//! ending (see `rows.rs`).

use anyhow::Result;
use rusqlite::OptionalExtension;

use super::pending::append_pending;
use super::rows::upsert;
use super::{History, RunRecord};
use crate::rundir::{OwnerGone, RunDir};
use crate::verdict::{Outcome, Verdict};

impl History {
    /// Marks run `r.run_id` as ended by its owner's end (`r` is recorded when the run has no row).
    pub fn record_owner_gone(&mut self, r: &RunRecord) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let existing: Option<i64> = tx
            .query_row(
                "SELECT id FROM runs WHERE run_id = ?1 ORDER BY id DESC LIMIT 1",
                [&r.run_id],
                |row| row.get(0),
            )
            .optional()?;
        match existing {
            Some(id) => {
                tx.execute(
                    "UPDATE runs SET verdict = 'owner_gone', teardown = ?1 WHERE id = ?2",
                    rusqlite::params![r.teardown, id],
                )?;
            }
            None => {
                upsert(&tx, r)?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

/// Records in the default history that run `run`'s owner ended and what its stop found. Like
/// every recording, a failure changes nothing of the run and is kept in the pending file.
pub fn record_owner_gone(run: &RunDir, gone: &OwnerGone) {
    let Ok(meta) = run.meta() else {
        return;
    };
    let r = owner_gone_record(run, &meta, gone);
    let Some(path) = super::database_path() else {
        return;
    };
    let result = History::open_default().and_then(|h| match h {
        Some(mut h) => h.record_owner_gone(&r),
        None => Ok(()),
    });
    if let Err(e) = result {
        let pending = super::pending_path(&path);
        if let Err(pe) = append_pending(&pending, &r) {
            eprintln!(
                "firedup: the owner's end of run {} was not recorded in the history: {e:#}; keeping it in {} failed too: {pe}",
                run.id,
                pending.display()
            );
        }
    }
}

/// The row of a run that ended because its owner did, from its run directory alone.
fn owner_gone_record(run: &RunDir, meta: &crate::rundir::RunMeta, gone: &OwnerGone) -> RunRecord {
    let exit = run.exit().and_then(|e| e.exit);
    let status = exit.map_or_else(|| "an unknown status".into(), |e| e.describe());
    let ended_at = run.exit().map_or(gone.noticed_at, |e| e.ended_at);
    let mut outcome = Outcome::without_watch(
        Verdict::Killed,
        format!(
            "stopped: its owner, pid {}, ended, so firedup stopped the run; it ended with {status}",
            gone.owner
        ),
        &run.id,
        &meta.log,
        run.process().map(|p| p.pid),
    );
    outcome.elapsed_s = ((ended_at - meta.started_at).max(0.0) * 1000.0).round() / 1000.0;
    outcome.exit = exit;
    outcome.log_from_line = meta.log_start.map(|s| s.line);
    outcome.name = meta.name.clone();
    outcome.owner = Some(gone.owner);
    let spec = crate::launch::LaunchSpec::from_meta(meta, &meta.profile, &Default::default());
    let hash = super::launch_hash(&spec, None);
    let mut r = RunRecord::new(
        "run",
        hash,
        &meta.command,
        &meta.env,
        Some(meta.profile.clone()),
        &outcome,
    );
    r.started_at = meta.started_at;
    r.ended_at = ended_at.max(meta.started_at);
    r.teardown = Some(gone.describe());
    r.name = meta.name.clone();
    r.owner_gone = true;
    r
}
