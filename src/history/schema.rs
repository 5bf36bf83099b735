//! The history database's schema, one migration per version: `MIGRATIONS[i]` takes version `i`
//! to `i + 1`. A migration is never edited once released; a change is a new one appended.

/// The schema, one migration per version: `MIGRATIONS[i]` takes version `i` to `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
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
    // A batch job's id, last state and nodes (JSON array), also for the rows recorded before
    // (from the outcome they hold).
    r#"
ALTER TABLE runs ADD COLUMN job_id TEXT;
ALTER TABLE runs ADD COLUMN job_state TEXT;
ALTER TABLE runs ADD COLUMN job_nodes TEXT;
UPDATE runs SET job_id = json_extract(outcome, '$.job.id'),
                job_state = json_extract(outcome, '$.job.state'),
                job_nodes = json_extract(outcome, '$.job.nodes')
    WHERE json_valid(outcome) AND json_extract(outcome, '$.job.id') IS NOT NULL;
CREATE INDEX runs_by_job ON runs(job_id);
"#,
];

/// The schema version this firedup writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;
