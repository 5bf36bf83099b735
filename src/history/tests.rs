use super::pending::append_pending;
use super::*;
use crate::verdict::{LineRef, PhaseAt, Signature, Verdict};
use rusqlite::params;

fn outcome(run_id: &str, verdict: Verdict, signature: Option<Signature>) -> Outcome {
    Outcome {
        attached: false,
        schema: crate::verdict::OUTCOME_SCHEMA,
        name: None,
        verdict,
        signature,
        reason: "because".into(),
        line: Some(LineRef {
            number: 7,
            text: "torch.OutOfMemoryError: CUDA out of memory".into(),
        }),
        context: vec![],
        phase: Some("load_weights".into()),
        elapsed_s: 12.5,
        exit: None,
        pid: Some(42),
        log: "/tmp/x.log".into(),
        run_id: run_id.into(),
        timeline: vec![
            PhaseAt {
                phase: "load_weights".into(),
                at_s: 1.0,
            },
            PhaseAt {
                phase: "capture_cuda_graph".into(),
                at_s: 9.0,
            },
        ],
        secondary: vec![],
        server_running: false,
        probes: vec![],
        request_gap_s: None,
        gpu: None,
        ready_s: (verdict == Verdict::Ready).then_some(12.0),
        host: None,
        log_from_line: None,
        rank: None,
        url: None,
        port: None,
        job: None,
        owner: None,
        node: None,
        nodes: None,
        settled: None,
        cause: None,
        placed: Vec::new(),
    }
}

fn record(run_id: &str, verdict: Verdict, sig: Option<Signature>, profile: &str) -> RunRecord {
    let mut r = RunRecord::new(
        "run",
        "abc".into(),
        &["sglang".into(), "serve".into()],
        &[
            ("HF_TOKEN".into(), "hf_secret".into()),
            ("FLASHMLA".into(), "1".into()),
        ],
        Some(profile.into()),
        &outcome(run_id, verdict, sig),
    );
    r.metrics.insert("throughput".into(), 123.5);
    r
}

#[test]
fn records_round_trip_with_secrets_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = History::open(&dir.path().join("h.sqlite")).unwrap();
    assert_eq!(h.schema_version().unwrap(), SCHEMA_VERSION);
    let r = record(
        "sglang-aaaaaa",
        Verdict::Failed,
        Some(Signature::CudaOom),
        "sglang",
    );
    h.record(&r).unwrap();
    let back = h.find("sglang-aaaaaa").unwrap();
    assert_eq!(back, r);
    assert_eq!(back.env["HF_TOKEN"], crate::secrets::REDACTED);
    assert_eq!(back.env["FLASHMLA"], "1");
    let raw = std::fs::read(dir.path().join("h.sqlite")).unwrap();
    let wal = std::fs::read(dir.path().join("h.sqlite-wal")).unwrap_or_default();
    for bytes in [raw, wal] {
        assert!(
            !bytes.windows(9).any(|w| w == b"hf_secret"),
            "the secret reached the database file"
        );
    }
}

#[test]
fn filters_select_what_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = History::open(&dir.path().join("h.sqlite")).unwrap();
    h.record(&record("a-1", Verdict::Ready, None, "sglang"))
        .unwrap();
    h.record(&record(
        "b-1",
        Verdict::Failed,
        Some(Signature::CudaOom),
        "sglang",
    ))
    .unwrap();
    h.record(&record(
        "c-1",
        Verdict::Failed,
        Some(Signature::PortInUse),
        "redis",
    ))
    .unwrap();
    let ids =
        |f: Filter| -> Vec<String> { h.list(&f).unwrap().into_iter().map(|r| r.run_id).collect() };
    let table: Vec<(Filter, Vec<&str>)> = vec![
        (Filter::default(), vec!["c-1", "b-1", "a-1"]),
        (
            Filter {
                profile: Some("sglang".into()),
                ..Default::default()
            },
            vec!["b-1", "a-1"],
        ),
        (
            Filter {
                verdict: Some("failed".into()),
                ..Default::default()
            },
            vec!["c-1", "b-1"],
        ),
        (
            Filter {
                signature: Some("cuda_oom".into()),
                ..Default::default()
            },
            vec!["b-1"],
        ),
        (
            Filter {
                since: Some(crate::rundir::now_unix() + 60.0),
                ..Default::default()
            },
            vec![],
        ),
        (
            Filter {
                limit: 1,
                ..Default::default()
            },
            vec!["c-1"],
        ),
    ];
    for (f, want) in table {
        assert_eq!(ids(f.clone()), want, "{f:?}");
    }
}

#[test]
fn find_takes_an_unambiguous_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = History::open(&dir.path().join("h.sqlite")).unwrap();
    h.record(&record(
        "redis-server-1a2b3c",
        Verdict::Ready,
        None,
        "redis",
    ))
    .unwrap();
    h.record(&record(
        "redis-server-1a9999",
        Verdict::Ready,
        None,
        "redis",
    ))
    .unwrap();
    assert_eq!(
        h.find("redis-server-1a2").unwrap().run_id,
        "redis-server-1a2b3c"
    );
    let e = h.find("redis-server-1a").unwrap_err().to_string();
    assert!(e.contains("several runs"), "{e}");
    let e = h.find("nope").unwrap_err().to_string();
    assert!(e.contains("no run \"nope\""), "{e}");
}

#[test]
fn a_newer_schema_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.sqlite");
    {
        let mut h = History::open(&path).unwrap();
        h.record(&record("a-1", Verdict::Ready, None, "redis"))
            .unwrap();
        h.conn
            .pragma_update(None, "user_version", SCHEMA_VERSION + 5)
            .unwrap();
    }
    let e = History::open(&path).unwrap_err().to_string();
    assert!(e.contains("newer firedup"), "{e}");
    assert!(e.contains(&path.display().to_string()), "{e}");
    // Still there for the newer firedup.
    let conn = Connection::open(&path).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn a_corrupt_file_is_refused_and_not_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.sqlite");
    let junk: Vec<u8> = (0..8192u32).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(&path, &junk).unwrap();
    let e = History::open(&path).unwrap_err().to_string();
    assert!(e.contains("left untouched"), "{e}");
    assert!(e.contains("FIREDUP_HISTORY"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), junk);
}

#[test]
fn migrating_an_existing_version_zero_file_keeps_nothing_lost() {
    // A database another program (or an interrupted first open) left at version 0 with no
    // tables: opening migrates it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.sqlite");
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE unrelated (x INTEGER); INSERT INTO unrelated VALUES (1);")
        .unwrap();
    let h = History::open(&path).unwrap();
    assert_eq!(h.schema_version().unwrap(), SCHEMA_VERSION);
    let n: i64 = h
        .conn
        .query_row("SELECT x FROM unrelated", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
}

/// Many firedup runs starting together on a history that does not exist yet: each opens it
/// (one creates it and switches it to WAL while the others open it too) and none is refused.
#[test]
fn many_runs_opening_a_new_history_at_once_are_all_let_in() {
    for round in 0..30 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite");
        let openers = 8;
        let start = std::sync::Barrier::new(openers);
        let opened: Vec<std::result::Result<(), String>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..openers)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        History::open(&path).map(|_| ()).map_err(|e| e.to_string())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in opened {
            assert!(r.is_ok(), "round {round}: {r:?}");
        }
    }
}

#[test]
fn concurrent_writers_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.sqlite");
    let writers = 8;
    let each = 40;
    std::thread::scope(|s| {
        for w in 0..writers {
            let path = path.clone();
            s.spawn(move || {
                // Each writer opens its own connection, as separate firedup processes do.
                let mut h = History::open(&path).unwrap();
                for i in 0..each {
                    h.record(&record(&format!("w{w}-{i}"), Verdict::Ready, None, "redis"))
                        .unwrap();
                }
            });
        }
    });
    let h = History::open(&path).unwrap();
    assert_eq!(h.list(&Filter::default()).unwrap().len(), writers * each);
}

#[test]
fn previous_of_spec_prefers_a_run_that_got_ready() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = History::open(&dir.path().join("h.sqlite")).unwrap();
    h.record(&record("a-1", Verdict::Ready, None, "sglang"))
        .unwrap();
    h.record(&record(
        "a-2",
        Verdict::Failed,
        Some(Signature::CudaOom),
        "sglang",
    ))
    .unwrap();
    assert_eq!(h.previous_of_spec("abc").unwrap().unwrap().run_id, "a-1");
    assert!(h.previous_of_spec("other").unwrap().is_none());
}

#[test]
fn phase_durations_run_to_the_next_phase_or_the_end() {
    let t = |p: &str, at_s: f64| PhaseAt {
        phase: p.into(),
        at_s,
    };
    let table: Vec<(Vec<PhaseAt>, f64, Vec<(&str, f64)>)> = vec![
        (vec![], 5.0, vec![]),
        (vec![t("load", 1.0)], 5.0, vec![("load", 4.0)]),
        (
            vec![t("load", 1.0), t("capture", 3.5)],
            10.0,
            vec![("load", 2.5), ("capture", 6.5)],
        ),
    ];
    for (timeline, end, want) in table {
        let got = phase_durations(&timeline, end);
        let want: Vec<(String, f64)> = want.into_iter().map(|(p, d)| (p.into(), d)).collect();
        assert_eq!(got, want);
    }
}

#[test]
fn spec_hash_ignores_secret_values_but_not_other_changes() {
    let cmd = vec!["vllm".to_string(), "serve".into()];
    let j = serde_json::json!({"profile": "vllm"});
    let base = spec_hash(&cmd, &[("HF_TOKEN".into(), "a".into())], None, None, &j);
    assert_eq!(
        base,
        spec_hash(&cmd, &[("HF_TOKEN".into(), "b".into())], None, None, &j)
    );
    assert_ne!(
        base,
        spec_hash(
            &cmd,
            &[("HF_TOKEN".into(), "a".into())],
            None,
            Some("gpu1"),
            &j
        )
    );
    assert_ne!(
        base,
        spec_hash(&cmd, &[("X".into(), "a".into())], None, None, &j)
    );
    assert_eq!(base.len(), 16);
}

#[test]
fn runs_kept_aside_are_imported_once_and_bad_lines_kept() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.sqlite");
    let pending = pending_path(&db);
    let a = record("kept-1", Verdict::Ready, None, "redis");
    let b = record("kept-2", Verdict::Failed, Some(Signature::CudaOom), "redis");
    append_pending(&pending, &a).unwrap();
    append_pending(&pending, &b).unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&pending)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"{not json\n"))
        .unwrap();
    let mut h = History::open(&db).unwrap();
    assert_eq!(h.import_pending(&pending).unwrap(), 2);
    assert!(!pending.exists());
    assert_eq!(
        std::fs::read_to_string(pending.with_extension("bad")).unwrap(),
        "{not json\n"
    );
    assert_eq!(h.find("kept-2").unwrap(), b);
    // A firedup that died after committing but before removing the file: imported again, no
    // duplicates.
    append_pending(&pending, &a).unwrap();
    std::fs::rename(&pending, pending.with_extension("importing")).unwrap();
    assert_eq!(h.import_pending(&pending).unwrap(), 0);
    assert_eq!(h.list(&Filter::default()).unwrap().len(), 2);
    assert_eq!(h.import_pending(&pending).unwrap(), 0);
}

#[test]
fn times_survive_a_json_round_trip_exactly() {
    // Kept-aside runs travel as JSON, and re-imports are matched on ended_at: a last-digit
    // change would import a run twice (serde_json's float_roundtrip feature).
    for t in [
        1_796_287_206.761_860_1_f64,
        0.1,
        1e-9,
        1_796_083_200.123_456_7,
    ] {
        let back: f64 = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back.to_bits(), t.to_bits(), "{t}");
    }
}

#[test]
fn a_later_watch_updates_the_runs_row_and_keeps_the_launchs_times() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = History::open(&dir.path().join("h.sqlite")).unwrap();
    let launched = record("srv-1", Verdict::Ready, None, "sglang");
    h.record(&launched).unwrap();
    // A re-attach that later saw the crash: its times are upper bounds (old lines at attach time).
    let mut later = record("srv-1", Verdict::Failed, Some(Signature::CudaOom), "sglang");
    later.kind = "watch".into();
    later.from_launch = false;
    later.outcome.ready_s = Some(30.0);
    later.outcome.elapsed_s = 40.0;
    later.outcome.timeline = vec![PhaseAt {
        phase: "ready".into(),
        at_s: 30.0,
    }];
    later.ended_at = launched.ended_at + 28.0;
    h.record(&later).unwrap();
    h.record(&later).unwrap();
    let rows = h.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row.outcome.verdict, Verdict::Failed);
    assert_eq!(row.outcome.elapsed_s, 40.0);
    assert_eq!(row.ended_at, later.ended_at);
    assert_eq!(row.outcome.ready_s, launched.outcome.ready_s);
    assert_eq!(row.outcome.timeline, launched.outcome.timeline);
    assert_eq!((row.kind.as_str(), row.from_launch), ("run", true));
    assert_eq!(row.started_at, launched.started_at);
}

#[test]
fn only_times_seen_from_the_launch_make_an_eta() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = History::open(&dir.path().join("h.sqlite")).unwrap();
    let mut attached = record("srv-2", Verdict::Ready, None, "sglang");
    attached.kind = "watch".into();
    attached.from_launch = false;
    h.record(&attached).unwrap();
    assert!(h.previous_of_spec("abc").unwrap().is_none());
    h.record(&record("srv-1", Verdict::Ready, None, "sglang"))
        .unwrap();
    assert_eq!(h.previous_of_spec("abc").unwrap().unwrap().run_id, "srv-1");
}

#[test]
fn a_version_one_database_is_migrated_with_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.sqlite");
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch(MIGRATIONS[0]).unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
    }
    // Rows as firedup 1 wrote them: a run, and a re-attach of it with attach-relative times.
    let (run, mut watch) = (
        record("old-1", Verdict::Ready, None, "sglang"),
        record("old-1", Verdict::Ready, None, "sglang"),
    );
    watch.kind = "watch".into();
    {
        let mut c = Connection::open(&path).unwrap();
        let tx = c.transaction().unwrap();
        for r in [&run, &watch] {
            let o = &r.outcome;
            tx.execute(
                "INSERT INTO runs (run_id, kind, spec_hash, command, env, started_at, ended_at,
                    verdict, reason, timeline, elapsed_s, metrics, outcome, version)
                 VALUES (?1, ?2, ?3, '[]', '{}', ?4, ?5, ?6, ?7, ?8, ?9, '{}', ?10, '0.1.0')",
                params![
                    r.run_id,
                    r.kind,
                    r.spec_hash,
                    r.started_at,
                    r.ended_at,
                    o.verdict.as_str(),
                    o.reason,
                    serde_json::to_string(&o.timeline).unwrap(),
                    o.elapsed_s,
                    serde_json::to_string(o).unwrap(),
                ],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }
    let h = History::open(&path).unwrap();
    assert_eq!(h.schema_version().unwrap(), SCHEMA_VERSION);
    let rows = h.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 2);
    let kinds: Vec<(String, bool)> = rows
        .iter()
        .map(|r| (r.kind.clone(), r.from_launch))
        .collect();
    assert!(kinds.contains(&("run".into(), true)), "{kinds:?}");
    assert!(kinds.contains(&("watch".into(), false)), "{kinds:?}");
    assert_eq!(rows[0].name, None);
}

fn slurm_job(id: &str, state: &str) -> Option<crate::verdict::JobSummary> {
    Some(crate::verdict::JobSummary {
        scheduler: "slurm".into(),
        id: id.into(),
        state: state.into(),
        nodes: vec!["node1".into(), "node2".into()],
        reason: None,
    })
}

#[test]
fn a_batch_jobs_id_state_and_nodes_are_recorded_and_selectable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.sqlite");
    let mut h = History::open(&path).unwrap();
    let mut job = record(
        "job-1",
        Verdict::Killed,
        Some(Signature::OomKilled),
        "generic",
    );
    job.outcome.job = slurm_job("4711", "OUT_OF_MEMORY");
    h.record(&job).unwrap();
    h.record(&record("plain-1", Verdict::Ready, None, "generic"))
        .unwrap();
    let found = h
        .list(&Filter {
            job: Some("4711".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].run_id, "job-1");
    assert_eq!(found[0].outcome.job, slurm_job("4711", "OUT_OF_MEMORY"));
    // The columns themselves, for a person querying the file.
    let cols: (Option<String>, Option<String>, Option<String>) = Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT job_id, job_state, job_nodes FROM runs WHERE run_id = 'job-1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(
        cols,
        (
            Some("4711".into()),
            Some("OUT_OF_MEMORY".into()),
            Some(r#"["node1","node2"]"#.into())
        )
    );
    let none: Option<String> = Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT job_id FROM runs WHERE run_id = 'plain-1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(none, None);
}

#[test]
fn a_version_two_database_gets_the_jobs_of_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.sqlite");
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch(MIGRATIONS[0]).unwrap();
        c.execute_batch(MIGRATIONS[1]).unwrap();
        c.pragma_update(None, "user_version", 2).unwrap();
    }
    let mut job = record("job-2", Verdict::Succeeded, None, "generic");
    job.outcome.job = slurm_job("99", "COMPLETED");
    let plain = record("plain-2", Verdict::Ready, None, "generic");
    {
        let c = Connection::open(&path).unwrap();
        for r in [&job, &plain] {
            c.execute(
                "INSERT INTO runs (run_id, kind, spec_hash, command, env, started_at, ended_at,
                    verdict, reason, timeline, elapsed_s, metrics, outcome, version)
                 VALUES (?1, 'run', 'h', '[]', '{}', 1.0, 2.0, ?2, 'r', '[]', 1.0, '{}', ?3, '0.1.0')",
                params![
                    r.run_id,
                    r.outcome.verdict.as_str(),
                    serde_json::to_string(&r.outcome).unwrap()
                ],
            )
            .unwrap();
        }
    }
    let h = History::open(&path).unwrap();
    assert_eq!(h.schema_version().unwrap(), SCHEMA_VERSION);
    let ids: Vec<String> = h
        .list(&Filter {
            job: Some("99".into()),
            ..Default::default()
        })
        .unwrap()
        .into_iter()
        .map(|r| r.run_id)
        .collect();
    assert_eq!(ids, vec!["job-2".to_string()]);
    assert_eq!(h.list(&Filter::default()).unwrap().len(), 2);
}

#[test]
fn the_owners_end_is_kept_whichever_records_first_the_supervisor_or_run() {
    // Issue 23: the supervisor marks a run owner_gone once it has stopped it; `run` records its
    // own verdict before or after that. Either way the row says owner_gone and keeps run's
    // outcome (its times, its reason).
    let gone = |mut r: RunRecord| {
        r.owner_gone = true;
        r.teardown = Some("stopped because its owner, pid 7, ended: ...".into());
        r
    };
    for supervisor_first in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut h = History::open(&dir.path().join("h.sqlite")).unwrap();
        let mut from_run = record("web-1", Verdict::Killed, None, "generic");
        from_run.outcome.reason = "stopped: its owner, pid 7, ended".into();
        from_run.outcome.ready_s = Some(1.5);
        let mut synthetic = record("web-1", Verdict::Killed, None, "generic");
        synthetic.outcome.reason = "from the run directory".into();
        if supervisor_first {
            h.record_owner_gone(&gone(synthetic)).unwrap();
            h.record(&from_run).unwrap();
        } else {
            h.record(&from_run).unwrap();
            h.record_owner_gone(&gone(synthetic)).unwrap();
        }
        let back = h.find("web-1").unwrap();
        assert_eq!(back.verdict_text(), "owner_gone", "{supervisor_first}");
        assert!(back.owner_gone, "{supervisor_first}");
        assert_eq!(
            back.outcome.reason, "stopped: its owner, pid 7, ended",
            "{supervisor_first}: run's outcome is kept"
        );
        assert_eq!(back.outcome.ready_s, Some(1.5), "{supervisor_first}");
        let f = Filter {
            verdict: Some("owner_gone".into()),
            limit: 10,
            ..Default::default()
        };
        assert_eq!(h.list(&f).unwrap().len(), 1, "{supervisor_first}");
    }
}
