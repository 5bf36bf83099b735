//! A re-attach to a run that has ended (`firedup watch RUN_ID` of a [`FoundRun`] whose `ended`
//! is set) reports what the run directory recorded while the run lived, not what a replay of its
//! log at the end can re-derive: read at once, every line comes at the moment of the re-attach,
//! and the probes find nothing listening.
//!
//! - [`record_verdict`]: the launching firedup records the verdict it reached (`verdict.json`),
//!   when it reaches it.
//! - [`prepare`]: the plan for judging an ended run from its log: no probes once its verdict
//!   was recorded (the run's are in it), and the recorded times the judge cannot see
//!   ([`RecordedEnd`]).
//! - [`report`]: the verdict of the re-attach. A run whose recorded verdict was its end
//!   (`failed`, `exited`, a job's `succeeded`, ...) is reported as recorded, with the exit that
//!   followed. A run recorded `ready` is judged by how it ended (the exit decides: a crash after
//!   ready is still reported as one; firedup's own stop keeps it `ready`), with its timeline,
//!   `ready_s` and probes as recorded. Without a record, the replay is reported, less the times
//!   it cannot know (`ready_s`).

use std::time::Duration;

use crate::host::FoundRun;
use crate::judge::RecordedEnd;
use crate::plan::Plan;
use crate::target::Target;
use crate::verdict::{Outcome, Verdict};

/// Records `outcome` as the run's verdict in its directory (a run on this machine), unless one
/// was recorded before. A record that cannot be written changes nothing of the verdict.
pub fn record_verdict(target: &Target, outcome: &Outcome) {
    if let Some(run) = &target.run {
        let _ = run.record_verdict(outcome);
    }
}

/// Readies `plan` for judging `found` when it has ended (nothing otherwise).
pub fn prepare(plan: &mut Plan, found: &FoundRun) {
    if !found.ended {
        return;
    }
    if found.records.verdict.is_some() {
        // Nothing of the run listens any more: a probe now could only say "never ready", or
        // find someone else's server. How the probes went while it ran is in its verdict. (Not
        // without one: the ready line alone could then make a ready that the probes never saw.)
        let probes = &mut plan.probes;
        probes.port = None;
        probes.http = None;
        probes.request = None;
        probes.notify = false;
        probes.gpu = false;
        plan.judge.ready_probes.clear();
    }
    let since_launch = |unix: f64| Duration::try_from_secs_f64(unix - found.meta.started_at).ok();
    let ready_at = found
        .records
        .verdict
        .as_ref()
        .filter(|v| v.verdict == Verdict::Ready)
        .and_then(|v| v.ready_s)
        .and_then(|s| Duration::try_from_secs_f64(s).ok());
    let ended_at = found
        .records
        .exit
        .as_ref()
        .and_then(|e| since_launch(e.ended_at));
    plan.judge.recorded_end = Some(RecordedEnd { ready_at, ended_at });
}

/// The verdict of a re-attach to `found`: `judged` (the replay's) combined with what was
/// recorded, as the module doc says. A run that has not ended is `judged` as it is.
pub fn report(judged: Outcome, found: &FoundRun) -> Outcome {
    if !found.ended {
        return judged;
    }
    let ended_s = found
        .records
        .exit
        .as_ref()
        .map(|e| round_ms((e.ended_at - found.meta.started_at).max(0.0)));
    let recorded = found.records.verdict.clone();
    let mut o = match recorded {
        // The run's verdict was its end, or firedup ended it on that verdict.
        Some(r) if !matches!(r.verdict, Verdict::Ready | Verdict::MonitorError) => {
            let mut r = r;
            r.exit = r.exit.or(judged.exit);
            r
        }
        Some(r) if r.verdict == Verdict::Ready => {
            let mut o = judged;
            if o.verdict == Verdict::Ready {
                // Ready, then stopped by firedup: the readiness as recorded, the stop as the end.
                let ending = o.reason.rfind("; then ").map(|i| o.reason[i..].to_string());
                o.reason = format!("{}{}", r.reason, ending.unwrap_or_default());
                o.line = r.line.clone();
                o.context = r.context.clone();
                o.elapsed_s = r.elapsed_s;
            } else if let Some(s) = ended_s {
                o.elapsed_s = s;
            }
            o.timeline = r.timeline;
            o.ready_s = r.ready_s;
            o.probes = r.probes;
            o.request_gap_s = r.request_gap_s;
            o.gpu = o.gpu.or(r.gpu);
            o
        }
        // No verdict recorded (firedup died before it), or firedup's own watch failed: the
        // replay, less the time of readiness it cannot know.
        _ => {
            let mut o = judged;
            o.ready_s = None;
            if let Some(s) = ended_s {
                o.elapsed_s = s;
            }
            o
        }
    };
    o.server_running = false;
    o
}

fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}
