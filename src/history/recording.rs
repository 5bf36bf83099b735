//! Recording runs from the commands, and reading back the ETA: a failure to record never changes
//! a verdict and loses no run (it waits in the pending file, see `pending.rs`).

use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;

use super::pending::{append_pending, pending_path};
use super::{History, RunRecord, database_path};
use crate::verdict::{Outcome, PhaseAt};

/// The database [`last_time`] opened as a watch began, with the file it was opened on (device,
/// inode), kept for the watch's record at its end: that record then costs an insert, not an open
/// and its pragmas (issue 28: 1 to 2 ms between the verdict and the exit). Used only while the
/// default database is still that file; another (moved aside, replaced) is opened afresh.
static KEPT: Mutex<Option<(History, (u64, u64))>> = Mutex::new(None);

/// The file at `path`, as (device, inode).
fn file_of(path: &std::path::Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The kept database when it is still the default one's file; else the default, opened now.
fn kept_or_default() -> anyhow::Result<Option<History>> {
    let kept = KEPT.lock().ok().and_then(|mut k| k.take());
    if let (Some((h, file)), Some(path)) = (kept, database_path()) {
        if h.path == path && file_of(&path) == Some(file) {
            return Ok(Some(h));
        }
    }
    History::open_default()
}

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
    r.name = spec.name.clone();
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

/// How the previous run of the same launch spec went (from the history): how long each phase
/// took and when it became ready, so the display can say "took 2m10s last time" (its words are
/// `report.rs`'s).
#[derive(Debug, Clone, PartialEq)]
pub struct LastTime {
    pub phases: Vec<(String, f64)>,
    pub ready_s: Option<f64>,
}

/// How the newest earlier run of `spec_hash` went, for the progress display's ETA; `None` when
/// there is none or the history cannot be read (the display then shows no ETA).
pub fn last_time(spec_hash: &str) -> Option<LastTime> {
    let h = History::open_default().ok()??;
    let previous = h.previous_of_spec(spec_hash);
    // Kept for the whole watch: without the pages the query read (~0.1 MB of SQLite's cache; the
    // record at the end reads back the few it needs).
    h.shrink_memory();
    if let (Some(file), Ok(mut kept)) = (file_of(&h.path), KEPT.lock()) {
        *kept = Some((h, file));
    }
    let o = previous.ok()??.outcome;
    let mut phases = phase_durations(&o.timeline, o.ready_s.unwrap_or(o.elapsed_s));
    if o.ready_s.is_none() {
        // The run ended inside its last phase: that phase's time is not how long it takes.
        phases.pop();
    }
    // Reaching "ready" is an instant, not a phase that takes time.
    phases.retain(|(p, _)| p != "ready");
    Some(LastTime {
        phases,
        ready_s: o.ready_s,
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
    let result = kept_or_default().and_then(|h| match h {
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
