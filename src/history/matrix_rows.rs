//! The matrices in the history: one row per matrix (its definition, state and cells), beside
//! the rows of its cells' runs.

use anyhow::Result;
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::History;

/// A matrix as recorded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MatrixRecord {
    pub id: String,
    pub def_hash: String,
    pub source: Option<String>,
    pub started_at: f64,
    pub ended_at: Option<f64>,
    /// `running`, `done`, `interrupted` (Ctrl-C) or `stopped` (fail-fast or a dirty machine).
    pub state: String,
    pub cells: u32,
    pub definition: serde_json::Value,
}

impl History {
    /// Starts (or, resuming, re-opens) a matrix.
    pub fn begin_matrix(&mut self, m: &MatrixRecord) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute(
            "INSERT INTO matrices (id, def_hash, source, started_at, ended_at, state, cells,
                definition, version)
             VALUES (?1, ?2, ?3, ?4, NULL, ?5, ?6, ?7, ?8)
             ON CONFLICT(id) DO UPDATE SET state = excluded.state, ended_at = NULL",
            params![
                m.id,
                m.def_hash,
                m.source,
                m.started_at,
                m.state,
                m.cells,
                serde_json::to_string(&m.definition)?,
                env!("CARGO_PKG_VERSION"),
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Ends a matrix in `state`.
    pub fn end_matrix(&mut self, id: &str, state: &str) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute(
            "UPDATE matrices SET state = ?2, ended_at = ?3 WHERE id = ?1",
            params![id, state, crate::rundir::now_unix()],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// The newest matrix of definition `def_hash`, if any.
    pub fn latest_matrix(&self, def_hash: &str) -> Result<Option<MatrixRecord>> {
        Ok(self
            .conn
            .query_row(
                "SELECT id, def_hash, source, started_at, ended_at, state, cells, definition
                 FROM matrices WHERE def_hash = ?1 ORDER BY started_at DESC LIMIT 1",
                [def_hash],
                |r| {
                    let def: String = r.get(7)?;
                    Ok(MatrixRecord {
                        id: r.get(0)?,
                        def_hash: r.get(1)?,
                        source: r.get(2)?,
                        started_at: r.get(3)?,
                        ended_at: r.get(4)?,
                        state: r.get(5)?,
                        cells: r.get(6)?,
                        definition: serde_json::from_str(&def).unwrap_or_default(),
                    })
                },
            )
            .optional()?)
    }
}
