//! A run record as a row of the `runs` table: insert, update by a later watch of the same run
//! (keeping the times seen first), and read back.

use anyhow::Result;
use rusqlite::{OptionalExtension, params};

use super::{CellRef, RunRecord};
use crate::verdict::Outcome;

/// Records one run inside `tx`: a new row, or, when the run already has one (a later watch of
/// the same run), that row updated with how the run ended, keeping the times it already has
/// (seen earlier, so closer to the truth: a re-attach stamps old lines with the attach time).
pub(super) fn upsert(tx: &rusqlite::Transaction<'_>, r: &RunRecord) -> Result<i64> {
    if r.run_id.is_empty() {
        return insert(tx, r);
    }
    let existing = tx
        .query_row(
            "SELECT * FROM runs WHERE run_id = ?1 ORDER BY id DESC LIMIT 1",
            [&r.run_id],
            |row| Ok((row.get::<_, i64>("id")?, row_to_record(row)?)),
        )
        .optional()?;
    let Some((id, old)) = existing else {
        return insert(tx, r);
    };
    let merged = merge_rows(old, r);
    tx.execute("DELETE FROM runs WHERE id = ?1", [id])?;
    insert_with_id(tx, &merged, Some(id))
}

/// The row of a run recorded before (`old`) updated by a later watch's record (`new`).
fn merge_rows(old: RunRecord, new: &RunRecord) -> RunRecord {
    // The launch's own watch may record after a re-attach did (both watching at once): its
    // times are the true ones.
    if new.from_launch && !old.from_launch {
        return RunRecord {
            name: new.name.clone().or(old.name),
            owner_gone: new.owner_gone || old.owner_gone,
            ..new.clone()
        };
    }
    let mut outcome = new.outcome.clone();
    if !old.outcome.timeline.is_empty() {
        outcome.timeline = old.outcome.timeline.clone();
    }
    outcome.ready_s = old.outcome.ready_s.or(new.outcome.ready_s);
    RunRecord {
        run_id: old.run_id,
        kind: old.kind,
        spec_hash: old.spec_hash,
        command: old.command,
        env: old.env,
        host: old.host.or_else(|| new.host.clone()),
        profile: old.profile.or_else(|| new.profile.clone()),
        started_at: old.started_at,
        ended_at: new.ended_at,
        outcome,
        metrics: if new.metrics.is_empty() {
            old.metrics
        } else {
            new.metrics.clone()
        },
        teardown: new.teardown.clone().or(old.teardown),
        version: new.version.clone(),
        cell: old.cell.or_else(|| new.cell.clone()),
        interrupted: new.interrupted,
        // The owner's end, recorded by the supervisor, stays when `run` records its verdict after.
        owner_gone: new.owner_gone || old.owner_gone,
        name: old.name.or_else(|| new.name.clone()),
        from_launch: old.from_launch,
    }
}

/// Inserts one run inside `tx`.
fn insert(tx: &rusqlite::Transaction<'_>, r: &RunRecord) -> Result<i64> {
    insert_with_id(tx, r, None)
}

/// Inserts one run inside `tx`, as row `id` when given (a row being updated keeps its place).
fn insert_with_id(tx: &rusqlite::Transaction<'_>, r: &RunRecord, id: Option<i64>) -> Result<i64> {
    let o = &r.outcome;
    tx.execute(
        "INSERT INTO runs (run_id, kind, spec_hash, command, env, host, profile, started_at,
                ended_at, verdict, signature, reason, line_number, line_text, phase, timeline,
                ready_s, elapsed_s, metrics, teardown, outcome, version, matrix_id, cell,
                cell_label, repeat, name, from_launch, job_id, job_state, job_nodes, id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32)",
        params![
            r.run_id,
            r.kind,
            r.spec_hash,
            serde_json::to_string(&r.command)?,
            serde_json::to_string(&r.env)?,
            r.host,
            r.profile,
            r.started_at,
            r.ended_at,
            r.verdict_text(),
            o.signature.map(|s| s.as_str()),
            o.reason,
            o.line.as_ref().map(|l| l.number as i64),
            o.line.as_ref().map(|l| l.text.clone()),
            o.phase,
            serde_json::to_string(&o.timeline)?,
            o.ready_s,
            o.elapsed_s,
            serde_json::to_string(&r.metrics)?,
            r.teardown,
            serde_json::to_string(o)?,
            r.version,
            r.cell.as_ref().map(|c| c.matrix_id.clone()),
            r.cell.as_ref().map(|c| c.key.clone()),
            r.cell.as_ref().map(|c| c.label.clone()),
            r.cell.as_ref().map(|c| c.repeat),
            r.name,
            r.from_launch,
            o.job.as_ref().map(|j| j.id.clone()),
            o.job.as_ref().map(|j| j.state.clone()),
            o.job
                .as_ref()
                .map(|j| serde_json::to_string(&j.nodes))
                .transpose()?,
            id,
        ],
    )?;
    Ok(tx.last_insert_rowid())
}

fn json_col<T: serde::de::DeserializeOwned + Default>(
    r: &rusqlite::Row<'_>,
    name: &str,
) -> rusqlite::Result<T> {
    let s: String = r.get(name)?;
    Ok(serde_json::from_str(&s).unwrap_or_default())
}

pub(super) fn row_to_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRecord> {
    let outcome_text: String = r.get("outcome")?;
    let outcome: Outcome = serde_json::from_str(&outcome_text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })?;
    let matrix_id: Option<String> = r.get("matrix_id")?;
    let cell = match matrix_id {
        Some(matrix_id) => Some(CellRef {
            matrix_id,
            key: r.get::<_, Option<String>>("cell")?.unwrap_or_default(),
            label: r
                .get::<_, Option<String>>("cell_label")?
                .unwrap_or_default(),
            repeat: r.get::<_, Option<u32>>("repeat")?.unwrap_or(0),
        }),
        None => None,
    };
    Ok(RunRecord {
        run_id: r.get("run_id")?,
        kind: r.get("kind")?,
        spec_hash: r.get("spec_hash")?,
        command: json_col(r, "command")?,
        env: json_col(r, "env")?,
        host: r.get("host")?,
        profile: r.get("profile")?,
        started_at: r.get("started_at")?,
        ended_at: r.get("ended_at")?,
        outcome,
        metrics: json_col(r, "metrics")?,
        teardown: r.get("teardown")?,
        version: r.get("version")?,
        cell,
        name: r.get("name")?,
        from_launch: r.get("from_launch")?,
        interrupted: r.get::<_, String>("verdict")? == "interrupted",
        owner_gone: r.get::<_, String>("verdict")? == "owner_gone",
    })
}
