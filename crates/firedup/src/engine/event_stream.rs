//! The `--events` stream (NDJSON): each observation, each log line with what the judge made of
//! it, each judge event, one JSON object per line with its time `t` on the watch's clock. The file
//! is stored: secret-shaped values are redacted, as in the verdict.

use std::io::Write;
use std::time::Duration;

use crate::classify::LineClass;
use crate::judge::{Event, Observation};

/// A log line in the event stream, with what the judge made of it.
pub(super) fn write_line(
    w: &mut dyn Write,
    at: Duration,
    number: u64,
    text: &str,
    class: &LineClass,
) {
    let v = serde_json::json!({
        // The event file is stored: secret-shaped values in a line are redacted, as in the verdict.
        "t": at.as_secs_f64(), "kind": "line", "number": number, "text": crate::secrets::redact_text(text),
        "signatures": class.hits.iter().map(|h| h.signature.map(|s| s.as_str()).unwrap_or("fail_line")).collect::<Vec<_>>(),
        "ready": class.ready, "progress": class.progress, "noise": class.noise,
    });
    let _ = writeln!(w, "{v}");
}

/// Every observation but a line (see [`write_line`]) in the event stream.
pub(super) fn write_observation(w: &mut dyn Write, at: Duration, obs: &Observation) {
    let t = at.as_secs_f64();
    let v = match obs {
        Observation::Line { .. } => return,
        Observation::Log(s) => {
            serde_json::json!({"t": t, "kind": "log", "state": format!("{s:?}")})
        }
        Observation::Started { pid } => serde_json::json!({"t": t, "kind": "started", "pid": pid}),
        Observation::SpawnFailed { reason } => {
            serde_json::json!({"t": t, "kind": "spawn_failed", "reason": reason})
        }
        Observation::Gone => serde_json::json!({"t": t, "kind": "gone"}),
        Observation::Exited(e) => serde_json::json!({"t": t, "kind": "exited", "exit": e}),
        Observation::LauncherLeft {
            pid,
            command,
            output,
        } => {
            serde_json::json!({"t": t, "kind": "launcher_left", "pid": pid, "command": crate::secrets::redact_text(command), "output": output.as_deref().map(crate::secrets::redact_text)})
        }
        Observation::Usage {
            cpu_ticks,
            read_bytes,
        } => {
            serde_json::json!({"t": t, "kind": "usage", "cpu_ticks": cpu_ticks, "read_bytes": read_bytes})
        }
        Observation::OwnerGone { pid } => {
            serde_json::json!({"t": t, "kind": "owner_gone", "owner": pid})
        }
        Observation::OomEvidence(e) => {
            serde_json::json!({"t": t, "kind": "oom_evidence", "text": e})
        }
        Observation::Job(s) => serde_json::json!({"t": t, "kind": "job", "job": s}),
        Observation::FiredupStop { by } => {
            serde_json::json!({"t": t, "kind": "firedup_stop", "by": by})
        }
        Observation::MonitorFault(r) => {
            serde_json::json!({"t": t, "kind": "monitor_fault", "reason": r})
        }
        Observation::Probe { kind, outcome } => {
            let (state, latency) = match outcome {
                crate::probe::ProbeOutcome::Up { latency, .. } => {
                    ("up", Some(latency.as_secs_f64() * 1000.0))
                }
                crate::probe::ProbeOutcome::NotYet { .. } => ("not_yet", None),
                crate::probe::ProbeOutcome::Foreign { .. } => ("foreign", None),
                crate::probe::ProbeOutcome::Rejected { .. } => ("rejected", None),
                crate::probe::ProbeOutcome::Fault { .. } => ("fault", None),
            };
            serde_json::json!({"t": t, "kind": "probe", "probe": kind.as_str(), "state": state, "detail": outcome.detail(), "latency_ms": latency})
        }
        Observation::Notify(m) => {
            serde_json::json!({"t": t, "kind": "notify", "ready": m.ready, "status": m.status, "extend_timeout_s": m.extend_timeout.map(|d| d.as_secs_f64())})
        }
        Observation::GpuMemory(mib) => serde_json::json!({"t": t, "kind": "gpu", "mib": mib}),
        Observation::GpuError(e) => serde_json::json!({"t": t, "kind": "gpu_error", "error": e}),
        Observation::RankEnded { rank, pid, exit } => {
            serde_json::json!({"t": t, "kind": "rank_ended", "rank": rank, "pid": pid, "exit": exit})
        }
        Observation::RankOutsideCollective { rank, evidence } => {
            serde_json::json!({"t": t, "kind": "rank_outside_collective", "rank": rank, "evidence": evidence})
        }
        // Evidence the verdict carries (a group compares it across nodes), not an event.
        Observation::RankPlaces { .. } | Observation::Tick => return,
    };
    let _ = writeln!(w, "{v}");
}

pub(super) fn write_event(w: &mut dyn Write, e: &Event) {
    let v = match e {
        Event::Phase { phase, at } => {
            serde_json::json!({"t": at.as_secs_f64(), "kind": "phase", "phase": phase})
        }
        Event::Ready { at } => serde_json::json!({"t": at.as_secs_f64(), "kind": "ready"}),
        Event::Job { note, at } => {
            serde_json::json!({"t": at.as_secs_f64(), "kind": "job", "note": note})
        }
        Event::Verdict(j) => {
            serde_json::json!({"t": j.at.as_secs_f64(), "kind": "verdict", "verdict": j.verdict, "signature": j.signature, "reason": j.reason})
        }
    };
    let _ = writeln!(w, "{v}");
}
