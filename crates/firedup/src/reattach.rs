//! A re-attach to a run that has ended (`firedup watch RUN_ID` of a [`FoundRun`] whose `ended`
//! is set) reports what the run directory recorded while the run lived, not what a replay of its
//! log at the end can re-derive: read at once, every line comes at the moment of the re-attach,
//! and the probes find nothing listening.
//!
//! - The launching firedup records the verdict it reached (`verdict.json`), when it reaches it
//!   ([`crate::host::Host::record_verdict`]).
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
use crate::verdict::{Outcome, Verdict};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rundir::{ExitRecord, RunRecords};
    use crate::target::Target;
    use crate::verdict::{ExitInfo, PhaseAt};

    fn outcome(verdict: Verdict, reason: &str, ready_s: Option<f64>, elapsed_s: f64) -> Outcome {
        Outcome {
            attached: false,
            schema: crate::verdict::OUTCOME_SCHEMA,
            name: None,
            verdict,
            signature: None,
            reason: reason.into(),
            line: None,
            context: Vec::new(),
            phase: None,
            elapsed_s,
            exit: None,
            pid: Some(42),
            log: "/l".into(),
            run_id: "r-1".into(),
            timeline: ready_s
                .map(|at_s| PhaseAt {
                    phase: "ready".into(),
                    at_s,
                })
                .into_iter()
                .collect(),
            secondary: Vec::new(),
            server_running: true,
            probes: Vec::new(),
            request_gap_s: None,
            gpu: None,
            ready_s,
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

    fn found(ended: bool, verdict: Option<Outcome>) -> FoundRun {
        let meta = serde_json::from_value(serde_json::json!({
            "run_id": "r-1", "command": ["srv"], "cwd": "/", "env": [], "log": "/l",
            "profile": "generic", "mode": "ready", "started_at": 1000.0, "firedup_version": "0"
        }))
        .unwrap();
        FoundRun {
            target: Target::default(),
            meta,
            ended,
            records: RunRecords {
                verdict,
                exit: Some(ExitRecord {
                    exit: Some(ExitInfo::signal(15, false)),
                    spawn_error: None,
                    ended_at: 1004.0,
                }),
                stop: None,
            },
        }
    }

    #[test]
    fn an_ended_run_is_reported_as_recorded() {
        let ready = outcome(
            Verdict::Ready,
            "ready after 1.5s: matched X",
            Some(1.5),
            1.5,
        );
        let stopped = "ready after 9.0s: matched X; then firedup stop (pid 7, uid 0) stopped it 2.5s after becoming ready (signal 15 (SIGTERM))";
        let mut failed = outcome(Verdict::Failed, "CUDA out of memory", None, 2.0);
        failed.exit = None;
        let mut killed = outcome(Verdict::Killed, "killed by SIGTERM", Some(9.0), 9.0);
        killed.exit = Some(ExitInfo::signal(15, false));
        let crashed = outcome(Verdict::Exited, "exit code 1", Some(9.0), 9.0);
        // (name, ended, recorded, judged, verdict, reason starts, ready_s, elapsed_s, exit signal)
        let cases = [
            (
                "ready, then firedup's stop: ready as recorded, the stop as the end",
                true,
                Some(ready.clone()),
                outcome(Verdict::Ready, stopped, Some(9.0), 9.0),
                Verdict::Ready,
                "ready after 1.5s: matched X; then firedup stop (pid 7, uid 0) stopped it 2.5s",
                Some(1.5),
                1.5,
                None,
            ),
            (
                "ready, then a crash: the exit decides, at the recorded times",
                true,
                Some(ready.clone()),
                crashed.clone(),
                Verdict::Exited,
                "exit code 1",
                Some(1.5),
                4.0,
                None,
            ),
            (
                "a failure recorded before the stop: as recorded, with the exit that followed",
                true,
                Some(failed),
                killed.clone(),
                Verdict::Failed,
                "CUDA out of memory",
                None,
                2.0,
                Some(15),
            ),
            (
                "no verdict recorded: the replay, without a time of readiness",
                true,
                None,
                crashed.clone(),
                Verdict::Exited,
                "exit code 1",
                None,
                4.0,
                None,
            ),
            (
                "a live run: as judged",
                false,
                Some(ready),
                crashed,
                Verdict::Exited,
                "exit code 1",
                Some(9.0),
                9.0,
                None,
            ),
        ];
        for (name, ended, recorded, judged, verdict, reason, ready_s, elapsed_s, signal) in cases {
            let o = report(judged, &found(ended, recorded));
            assert_eq!(o.verdict, verdict, "{name}");
            assert!(o.reason.starts_with(reason), "{name}: {}", o.reason);
            assert_eq!(o.ready_s, ready_s, "{name}");
            assert_eq!(o.elapsed_s, elapsed_s, "{name}");
            if let Some(s) = signal {
                assert_eq!(o.exit.and_then(|e| e.signal), Some(s), "{name}");
            }
            assert_eq!(o.server_running, !ended, "{name}");
        }
    }
}
