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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::verdict::{Outcome, PhaseAt};

/// The schema, one migration per version: `MIGRATIONS[i]` takes version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE runs (
    id              INTEGER PRIMARY KEY,
    run_id          TEXT NOT NULL,
    kind            TEXT NOT NULL,
    spec_hash       TEXT NOT NULL,
    command         TEXT NOT NULL,
    env             TEXT NOT NULL,
    host            TEXT,
    profile         TEXT,
    started_at      REAL NOT NULL,
    ended_at        REAL NOT NULL,
    verdict         TEXT NOT NULL,
    signature       TEXT,
    reason          TEXT NOT NULL,
    line_number     INTEGER,
    line_text       TEXT,
    phase           TEXT,
    timeline        TEXT NOT NULL,
    ready_s         REAL,
    elapsed_s       REAL NOT NULL,
    metrics         TEXT NOT NULL,
    teardown        TEXT,
    outcome         TEXT NOT NULL,
    version         TEXT NOT NULL,
    matrix_id       TEXT,
    cell            TEXT,
    cell_label      TEXT,
    repeat          INTEGER
);
CREATE INDEX runs_by_spec ON runs(spec_hash, ended_at);
CREATE INDEX runs_by_end ON runs(ended_at);
CREATE INDEX runs_by_run_id ON runs(run_id);
CREATE INDEX runs_by_matrix ON runs(matrix_id, cell);
CREATE TABLE matrices (
    id          TEXT PRIMARY KEY,
    def_hash    TEXT NOT NULL,
    source      TEXT,
    started_at  REAL NOT NULL,
    ended_at    REAL,
    state       TEXT NOT NULL,
    cells       INTEGER NOT NULL,
    definition  TEXT NOT NULL,
    version     TEXT NOT NULL
);
CREATE INDEX matrices_by_def ON matrices(def_hash, started_at);
"#,
    r#"
ALTER TABLE runs ADD COLUMN name TEXT;
ALTER TABLE runs ADD COLUMN from_launch INTEGER NOT NULL DEFAULT 1;
UPDATE runs SET from_launch = 0 WHERE kind = 'watch';
CREATE INDEX runs_by_name ON runs(name);
"#,
];

/// The schema version this firedup writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// How long a writer waits for another one to finish.
const BUSY_TIMEOUT: Duration = Duration::from_secs(15);

/// Where the database lives, or `None` when history is off.
pub fn database_path() -> Option<PathBuf> {
    match std::env::var_os("FIREDUP_HISTORY") {
        Some(v) if v == "off" || v == "0" => return None,
        Some(v) if !v.is_empty() => return Some(PathBuf::from(v)),
        _ => {}
    }
    let dir = crate::rundir::state_root();
    if let Some(fs) = network_fs(&dir) {
        let uid = rustix::process::getuid().as_raw();
        note_once(&format!(
            "the state dir {} is on {fs}, where SQLite cannot lock safely; history is kept in /var/tmp/firedup-{uid}",
            dir.display()
        ));
        return Some(PathBuf::from(format!(
            "/var/tmp/firedup-{uid}/history.sqlite"
        )));
    }
    Some(dir.join("history.sqlite"))
}

/// Notes about where history lives go to stderr once per process.
fn note_once(text: &str) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| eprintln!("firedup: note: {text}"));
}

/// The network file system `dir` (or its nearest existing ancestor) is on, if any.
fn network_fs(dir: &Path) -> Option<&'static str> {
    let existing = dir.ancestors().find(|a| a.exists())?;
    let st = rustix::fs::statfs(existing).ok()?;
    // f_type magic numbers from statfs(2).
    const NETWORK: [(i64, &str); 9] = [
        (0x6969, "NFS"),
        (0x517b, "SMB"),
        (0xff53_4d42, "CIFS"),
        (0xfe53_4d42, "SMB2"),
        (0x0bd0_0bd0, "Lustre"),
        (0x4750_4653, "GPFS"),
        (0x00c3_6400, "CephFS"),
        (0x0102_1997, "9p"),
        (0x6573_5546, "FUSE"),
    ];
    #[allow(clippy::unnecessary_cast)]
    let magic = st.f_type as i64;
    NETWORK.iter().find(|(m, _)| *m == magic).map(|(_, n)| *n)
}

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
        }
    }

    /// The verdict column: the outcome's verdict, or `interrupted`.
    pub fn verdict_text(&self) -> &str {
        if self.interrupted {
            "interrupted"
        } else {
            self.outcome.verdict.as_str()
        }
    }
}

/// Env that firedup itself sets per run: not part of what the user launched.
const UNSTABLE_ENV: [&str; 1] = ["NOTIFY_SOCKET"];

/// Records a launched run in the default history (see [`record_quietly`]).
pub fn record_launch(
    kind: &str,
    spec: &crate::launch::LaunchSpec,
    hash: &str,
    outcome: &Outcome,
    teardown: Option<&str>,
) {
    let mut r = RunRecord::new(
        kind,
        hash.to_string(),
        &spec.command,
        &spec.env,
        Some(spec.profile.clone()),
        outcome,
    );
    r.teardown = teardown.map(String::from);
    r.name = spec.name.clone();
    // Only the launch's own watch saw the run from its start.
    r.from_launch = kind != "watch";
    record_quietly(&r);
}

/// Records a launched run that a signal to firedup ended (see [`RunRecord::interrupted`]).
pub fn record_interrupted(
    spec: &crate::launch::LaunchSpec,
    hash: &str,
    outcome: &Outcome,
    teardown: &str,
) {
    let mut r = RunRecord::new(
        "run",
        hash.to_string(),
        &spec.command,
        &spec.env,
        Some(spec.profile.clone()),
        outcome,
    );
    r.teardown = Some(teardown.to_string());
    r.interrupted = true;
    record_quietly(&r);
}

/// Records a watch: with the launch's spec when firedup launched the run (`launched`, with its
/// hash), else as an attach by log with `spec_hash`.
pub fn record_watch(
    launched: &Option<(crate::launch::LaunchSpec, String)>,
    spec_hash: String,
    command: &[String],
    profile: &str,
    outcome: &Outcome,
) {
    match launched {
        Some((spec, hash)) => record_launch("watch", spec, hash, outcome, None),
        None => record_quietly(&RunRecord::new(
            "watch",
            spec_hash,
            command,
            &[],
            Some(profile.to_string()),
            outcome,
        )),
    }
}

/// What identifies "the same launch" across runs: command, env (secret values reduced to their
/// names), working dir, host, profile and the judging options. Hex, 16 digits.
pub fn spec_hash(
    command: &[String],
    env: &[(String, String)],
    cwd: Option<&Path>,
    host: Option<&str>,
    judging: &serde_json::Value,
) -> String {
    let mut env: Vec<(String, String)> = env
        .iter()
        .filter(|(k, _)| !UNSTABLE_ENV.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), crate::secrets::shown_value(k, v).to_string()))
        .collect();
    env.sort();
    let canonical = serde_json::json!({
        // As recorded (secrets redacted), so a launch and its record hash the same.
        "command": crate::secrets::redact_args(command),
        "env": env,
        "cwd": cwd.map(|c| c.display().to_string()),
        "host": host,
        "judging": judging,
    });
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The spec hash of a launch: what `run` launches, judged as it is judged, where.
pub fn launch_hash(spec: &crate::launch::LaunchSpec, host: Option<&str>) -> String {
    let judging = serde_json::json!({
        "options": spec.judging,
        "profile": spec.profile,
        "mode": spec.mode,
    });
    // A local launch without --cwd runs where firedup was started: that dir is part of it.
    let cwd = match (&spec.cwd, host) {
        (Some(c), _) => Some(c.clone()),
        (None, None) => std::env::current_dir().ok(),
        (None, Some(_)) => None,
    };
    spec_hash(&spec.command, &spec.env, cwd.as_deref(), host, &judging)
}

/// The spec hash of an attach by log path (`watch --log`): the same log, judged the same way.
pub fn attach_hash(
    log: &Path,
    command: &[String],
    profile: Option<&str>,
    host: Option<&str>,
) -> String {
    let judging = serde_json::json!({"attach": log.display().to_string(), "profile": profile});
    spec_hash(command, &[], None, host, &judging)
}

/// How the newest earlier run of `spec_hash` went, for the progress display's ETA; `None` when
/// there is none or the history cannot be read (the display then shows no ETA).
pub fn last_time(spec_hash: &str) -> Option<crate::report::LastTime> {
    let h = History::open_default().ok()??;
    let o = h.previous_of_spec(spec_hash).ok()??.outcome;
    let mut phases = phase_durations(&o.timeline, o.ready_s.unwrap_or(o.elapsed_s));
    if o.ready_s.is_none() {
        // The run ended inside its last phase: that phase's time is not how long it takes.
        phases.pop();
    }
    // Reaching "ready" is an instant, not a phase that takes time.
    phases.retain(|(p, _)| p != "ready");
    Some(crate::report::LastTime {
        phases,
        ready_s: o.ready_s,
    })
}

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
    pub limit: u32,
}

/// An open history database.
#[derive(Debug)]
pub struct History {
    conn: Connection,
    pub path: PathBuf,
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
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(unreadable)?;
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

/// Records one run inside `tx`: a new row, or, when the run already has one (a later watch of
/// the same run), that row updated with how the run ended, keeping the times it already has
/// (seen earlier, so closer to the truth: a re-attach stamps old lines with the attach time).
fn upsert(tx: &rusqlite::Transaction<'_>, r: &RunRecord) -> Result<i64> {
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
                cell_label, repeat, name, from_launch, id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29)",
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

fn row_to_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRecord> {
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
    })
}

/// How long each phase of `timeline` lasted: until the next phase began, the last one until
/// `end_s` (the time to ready, or the verdict).
pub fn phase_durations(timeline: &[PhaseAt], end_s: f64) -> Vec<(String, f64)> {
    timeline
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let next = timeline.get(i + 1).map(|n| n.at_s).unwrap_or(end_s);
            (p.phase.clone(), (next - p.at_s).max(0.0))
        })
        .collect()
}

/// Records `r` in the default history. A failure never changes the verdict, and loses no run:
/// the record is appended to `history-pending.ndjson` next to the database (one line on stderr
/// says so), and moved into the database by the next firedup that can open it.
pub fn record_quietly(r: &RunRecord) {
    let Some(path) = database_path() else {
        return;
    };
    let pending = pending_path(&path);
    let result = History::open_default().and_then(|h| match h {
        Some(mut h) => h.record(r).map(|_| ()),
        None => Ok(()),
    });
    if let Err(e) = result {
        match append_pending(&pending, r) {
            Ok(()) => eprintln!(
                "firedup: this run is not in the history database ({e:#}); it was kept in {} and will be added once the database can be used",
                pending.display()
            ),
            Err(pe) => eprintln!(
                "firedup: this run was not recorded in the history: {e:#}; keeping it in {} failed too: {pe}",
                pending.display()
            ),
        }
    }
}

/// Where records wait while the database cannot be used.
/// Makes the database readable by its owner only: created 0600 before SQLite opens it (its
/// `-wal` and `-shm` files take the database's mode), and an older 0644 one of ours narrowed,
/// with its `-wal` and `-shm`: run history holds commands, paths and log lines.
fn restrict_to_owner(db: &Path) -> Result<()> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(db)
    {
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        // Let SQLite say what is wrong with the path.
        Err(_) => return Ok(()),
    }
    let me = rustix::process::geteuid().as_raw();
    for suffix in ["", "-wal", "-shm"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        let p = PathBuf::from(p);
        if let Ok(m) = std::fs::metadata(&p) {
            if m.is_file() && m.uid() == me && m.mode() & 0o077 != 0 {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
                    .with_context(|| format!("cannot make {} private", p.display()))?;
            }
        }
    }
    Ok(())
}

fn pending_path(db: &Path) -> PathBuf {
    db.with_file_name("history-pending.ndjson")
}

fn append_pending(pending: &Path, r: &RunRecord) -> Result<()> {
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

#[cfg(test)]
mod tests;
