//! The run history: every run from `run`, `watch` and `matrix`, with its launch spec, verdict,
//! timeline and metrics, in one SQLite database on local disk.
//!
//! Contract:
//! - The database is `$FIREDUP_HISTORY`, else `history.sqlite` in the state dir
//!   (`$FIREDUP_STATE_DIR`, `$XDG_STATE_HOME/firedup`, `~/.local/state/firedup`). SQLite cannot
//!   lock a network file system safely, so when that dir is on NFS/CIFS/Lustre/... the database
//!   moves to `/var/tmp/firedup-UID/`. `FIREDUP_HISTORY=off` records nothing.
//! - Several firedup processes write at once: WAL journal, a busy timeout, and one `BEGIN
//!   IMMEDIATE` transaction per write.
//! - The schema is versioned by `PRAGMA user_version` and migrated forward in a transaction. A
//!   database from a newer firedup, or one that is not a database, is an error that names the
//!   file and what to do; it is never rewritten, so no run is lost.
//! - One row per run, keyed by its run id: a later watch of the same run (`watch RUN_ID`)
//!   updates that row (its verdict, how it ended) and keeps the times the launch's own watch saw.
//!   `from_launch` says whether a row's phase times were seen from the launch; only those make an
//!   ETA (an attach sees old lines only when it attaches, so its times are upper bounds).
//! - Nothing secret is stored: env values whose names look secret are redacted before they
//!   reach this module's callers' records (see [`RunRecord::new`]).
//!
//! The records and the queries are here; beside them: `schema.rs` (the migrations),
//! `location.rs` (where the database lives, its mode), `rows.rs` (a record as a row),
//! `recording.rs` (what the commands call), `pending.rs` (records waiting for the database),
//! `spec_hash.rs` (what "the same launch" is), `owner_gone.rs` (a run whose owner ended),
//! `matrix_rows.rs` (the matrices), `in_flight.rs` (a row written just after its caller was told
//! the verdict, which readers wait for).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use crate::verdict::Outcome;

mod in_flight;
mod location;
mod matrix_rows;
pub mod owner_gone;
mod pending;
mod recording;
mod rows;
mod schema;
mod spec_hash;

pub use in_flight::{hold_for_record, wait_for_records_in_flight};
pub use location::database_path;
use location::restrict_to_owner;
pub use matrix_rows::MatrixRecord;
use pending::pending_path;
pub use recording::{
    LastTime, last_time, phase_durations, record_interrupted, record_launch, record_quietly,
    record_watch,
};
use rows::{row_to_record, upsert};
use schema::MIGRATIONS;
pub use schema::SCHEMA_VERSION;
use spec_hash::UNSTABLE_ENV;
pub use spec_hash::{attach_hash, launch_hash, spec_hash};

/// How long a writer waits for another one to finish.
const BUSY_TIMEOUT: Duration = Duration::from_secs(15);

/// One run as recorded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    pub run_id: String,
    /// `run`, `watch` or `matrix`.
    pub kind: String,
    pub spec_hash: String,
    pub command: Vec<String>,
    /// Env overrides, secrets already redacted.
    pub env: BTreeMap<String, String>,
    pub host: Option<String>,
    pub profile: Option<String>,
    pub started_at: f64,
    pub ended_at: f64,
    pub outcome: Outcome,
    pub metrics: BTreeMap<String, f64>,
    pub teardown: Option<String>,
    pub version: String,
    pub cell: Option<CellRef>,
    /// The name a person gave the run (`run --name`).
    #[serde(default)]
    pub name: Option<String>,
    /// Whether the watch that recorded the phase times saw the run from its launch (`run`,
    /// `matrix`), rather than attaching later (`watch`): only such times make an ETA.
    #[serde(default)]
    pub from_launch: bool,
    /// The run was ended by a signal to firedup (Ctrl-C, SIGTERM, SIGHUP) before or after its
    /// verdict: its `verdict` column says `interrupted`, its outcome is what was known then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// The run's owner (`run --owner`) ended and firedup stopped it: `verdict` says `owner_gone`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub owner_gone: bool,
}

/// Where a matrix run sits in its matrix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CellRef {
    pub matrix_id: String,
    /// Stable key of the cell within its matrix definition.
    pub key: String,
    /// The cell's axis values in words (`FLASHMLA=1 --enable-torch-compile`).
    pub label: String,
    pub repeat: u32,
}

impl RunRecord {
    /// A record of `outcome`, with secret env values redacted.
    pub fn new(
        kind: &str,
        spec_hash: String,
        command: &[String],
        env: &[(String, String)],
        profile: Option<String>,
        outcome: &Outcome,
    ) -> RunRecord {
        let ended_at = crate::rundir::now_unix();
        RunRecord {
            run_id: outcome.run_id.clone(),
            kind: kind.to_string(),
            spec_hash,
            command: crate::secrets::redact_args(command),
            env: env
                .iter()
                .filter(|(k, _)| !UNSTABLE_ENV.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), crate::secrets::shown_value(k, v).to_string()))
                .collect(),
            host: outcome.host.clone(),
            profile,
            started_at: ended_at - outcome.elapsed_s,
            ended_at,
            outcome: outcome.clone(),
            metrics: BTreeMap::new(),
            teardown: None,
            version: env!("CARGO_PKG_VERSION").to_string(),
            cell: None,
            name: None,
            from_launch: kind != "watch",
            interrupted: false,
            owner_gone: false,
        }
    }

    /// The verdict column: the outcome's verdict, or `interrupted`, or `owner_gone`.
    pub fn verdict_text(&self) -> &str {
        match (self.interrupted, self.owner_gone) {
            (true, _) => "interrupted",
            (_, true) => "owner_gone",
            _ => self.outcome.verdict.as_str(),
        }
    }
}

/// Filters for `firedup history`.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub profile: Option<String>,
    pub host: Option<String>,
    pub verdict: Option<String>,
    pub signature: Option<String>,
    /// Unix seconds.
    pub since: Option<f64>,
    pub matrix: Option<String>,
    /// A batch job's id (Slurm).
    pub job: Option<String>,
    pub limit: u32,
}

/// An open history database.
#[derive(Debug)]
pub struct History {
    conn: Connection,
    pub path: PathBuf,
}

impl History {
    /// Lets SQLite free the memory it can (its page cache): for a connection kept open a while.
    pub fn shrink_memory(&self) {
        let _ = self.conn.execute_batch("PRAGMA shrink_memory");
    }
}

/// Puts the database in WAL mode unless it is already (the mode is kept in the file). Switching
/// needs the database to itself, and SQLite answers "database is locked" at once, without its
/// busy handler, while another connection opens the new file too (several firedup runs that
/// start together on a fresh history): that is retried within the busy timeout.
fn use_wal(conn: &Connection) -> rusqlite::Result<()> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        if mode.eq_ignore_ascii_case("wal") {
            return Ok(());
        }
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

impl History {
    /// Opens (creating and migrating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<History> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .with_context(|| {
                    format!("cannot create the history directory {}", dir.display())
                })?;
        }
        let unreadable = |e: rusqlite::Error| {
            anyhow::anyhow!(
                "the history database {} cannot be used ({e}); it was left untouched: move it aside to start a new one, or set FIREDUP_HISTORY to another file",
                path.display()
            )
        };
        restrict_to_owner(path)?;
        let conn = Connection::open(path).map_err(unreadable)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(unreadable)?;
        // Reading the version is the first access to the file's contents: a file that is not a
        // database fails here, before anything is written.
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(unreadable)?;
        if version > SCHEMA_VERSION {
            bail!(
                "the history database {} was written by a newer firedup (schema {version}; this one knows {SCHEMA_VERSION}); use that firedup, or set FIREDUP_HISTORY to another file",
                path.display()
            );
        }
        use_wal(&conn).map_err(unreadable)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(unreadable)?;
        // Checkpointing the WAL into the database on every close costs fsyncs on every run;
        // SQLite's automatic checkpoint (every 1000 pages) is enough.
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        )
        .map_err(unreadable)?;
        let mut h = History {
            conn,
            path: path.to_path_buf(),
        };
        if version < SCHEMA_VERSION {
            h.migrate().map_err(|e| {
                anyhow::anyhow!(
                    "cannot migrate the history database {}: {e}; it was left as it was",
                    path.display()
                )
            })?;
        }
        Ok(h)
    }

    /// Opens the default database, and moves into it the runs kept aside while it could not be
    /// used; `None` when history is off.
    pub fn open_default() -> Result<Option<History>> {
        let Some(path) = database_path() else {
            return Ok(None);
        };
        if std::env::var_os("FIREDUP_HISTORY").is_none() {
            if let Some(dir) = path.parent().filter(|d| d.is_dir()) {
                crate::rundir::check_private(dir)?;
            }
        }
        let mut h = History::open(&path)?;
        let pending = pending_path(&path);
        if let Err(e) = h.import_pending(&pending) {
            eprintln!(
                "firedup: runs kept in {} could not be added to the history yet: {e:#}",
                pending.display()
            );
        }
        Ok(Some(h))
    }

    fn migrate(&mut self) -> rusqlite::Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // Read again inside the write lock: another firedup may have migrated meanwhile.
        let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version.max(0) as usize) {
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        }
        tx.commit()
    }

    /// The schema version of the open database.
    #[cfg(test)]
    pub fn schema_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    /// Records one run; returns its history row id.
    pub fn record(&mut self, r: &RunRecord) -> Result<i64> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let id = upsert(&tx, r)?;
        tx.commit()?;
        Ok(id)
    }

    /// Runs matching `f`, newest first.
    pub fn list(&self, f: &Filter) -> Result<Vec<RunRecord>> {
        let mut sql = String::from("SELECT * FROM runs WHERE 1=1");
        let mut args: Vec<Box<dyn rusqlite::ToSql>> = Vec::new();
        let mut add = |clause: &str, v: Box<dyn rusqlite::ToSql>| {
            args.push(v);
            sql.push_str(&format!(" AND {clause} ?{}", args.len()));
        };
        if let Some(p) = &f.profile {
            add("profile =", Box::new(p.clone()));
        }
        if let Some(h) = &f.host {
            add("host =", Box::new(h.clone()));
        }
        if let Some(v) = &f.verdict {
            add("verdict =", Box::new(v.clone()));
        }
        if let Some(s) = &f.signature {
            add("signature =", Box::new(s.clone()));
        }
        if let Some(t) = f.since {
            add("ended_at >=", Box::new(t));
        }
        if let Some(m) = &f.matrix {
            add("matrix_id =", Box::new(m.clone()));
        }
        if let Some(j) = &f.job {
            add("job_id =", Box::new(j.clone()));
        }
        sql.push_str(" ORDER BY ended_at DESC, id DESC");
        if f.limit > 0 {
            sql.push_str(&format!(" LIMIT {}", f.limit));
        }
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map(
            rusqlite::params_from_iter(args.iter().map(|a| a.as_ref())),
            row_to_record,
        )?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The run whose id is `run_id`, else the newest run named `run_id` (`run --name`), else
    /// the run whose id starts with it (an unambiguous prefix).
    pub fn find(&self, run_id: &str) -> Result<RunRecord> {
        let exact = self
            .conn
            .query_row(
                "SELECT * FROM runs WHERE run_id = ?1 ORDER BY id DESC LIMIT 1",
                [run_id],
                row_to_record,
            )
            .optional()?;
        if let Some(r) = exact {
            return Ok(r);
        }
        let named = self
            .conn
            .query_row(
                "SELECT * FROM runs WHERE name = ?1 ORDER BY started_at DESC, id DESC LIMIT 1",
                [run_id],
                row_to_record,
            )
            .optional()?;
        if let Some(r) = named {
            return Ok(r);
        }
        let mut stmt = self.conn.prepare(
            "SELECT DISTINCT run_id FROM runs WHERE substr(run_id, 1, length(?1)) = ?1 LIMIT 6",
        )?;
        let ids: Vec<String> = stmt
            .query_map([run_id], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        match ids.as_slice() {
            [] => bail!(
                "no run {run_id:?} in the history ({}); `firedup history` lists them",
                self.path.display()
            ),
            [one] => self.find(one),
            many => bail!(
                "{run_id:?} matches several runs ({}); give more of the id",
                many.join(", ")
            ),
        }
    }

    /// The newest earlier run of the same spec that reached further than the start: its
    /// timeline tells how long each phase took last time.
    pub fn previous_of_spec(&self, spec_hash: &str) -> Result<Option<RunRecord>> {
        Ok(self
            .conn
            .query_row(
                "SELECT * FROM runs WHERE spec_hash = ?1 AND timeline != '[]' AND from_launch = 1
                 ORDER BY (ready_s IS NOT NULL) DESC, ended_at DESC, id DESC LIMIT 1",
                [spec_hash],
                row_to_record,
            )
            .optional()?)
    }

    /// The latest run of a launch spec, whatever its verdict and timeline (the dry run's "last"
    /// line: a cell that failed has been run before).
    pub fn last_of_spec(&self, spec_hash: &str) -> Result<Option<RunRecord>> {
        Ok(self
            .conn
            .query_row(
                "SELECT * FROM runs WHERE spec_hash = ?1 ORDER BY ended_at DESC, id DESC LIMIT 1",
                [spec_hash],
                row_to_record,
            )
            .optional()?)
    }
}

#[cfg(test)]
mod tests;
