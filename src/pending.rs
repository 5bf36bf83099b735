//! `watch --for DURATION` with no verdict by then: `pending` (exit 75, docs/contract.md). Not a
//! verdict: the run is still starting and nothing was changed. What is said is where it stands:
//! its phase, the time since its launch, what readiness still waits for, and the ETA from how
//! the last run of the same launch went. Under `--json` it is one object in the JSON verdict's
//! shape with `"verdict": "pending"`, plus `eta_s`, `waiting_for` and `last_line`.

use crate::history::LastTime;
use firedup::session::Pending;
use firedup::target::Target;

/// The exit code of `pending`.
pub const EXIT_CODE: i32 = 75;

/// Prints `pending` for `target` and returns its exit code.
pub fn report(json: bool, p: &Pending, target: &Target, last: Option<&LastTime>) -> i32 {
    let eta_s = eta_s(p.elapsed_s, last);
    if json {
        let v = serde_json::json!({
            "schema": crate::verdict::OUTCOME_SCHEMA,
            "verdict": "pending",
            "signature": null,
            "reason": reason(p),
            "phase": p.phase,
            "elapsed_s": p.elapsed_s,
            "eta_s": eta_s,
            "waiting_for": p.waiting_for,
            "last_line": p.last_line.as_deref().map(crate::secrets::redact_text),
            "server_running": p.process_alive,
            "pid": target.pid,
            "log": target.log.display().to_string(),
            "run_id": target.run_id,
        });
        println!("{v}");
    } else {
        println!("pending: {} ({})", reason(p), target.run_id);
        if let Some(eta) = eta_s {
            println!(
                "  eta:     ~{} (the last run of this launch was ready after {})",
                crate::duration::format_duration(std::time::Duration::from_secs_f64(eta)),
                crate::duration::format_duration(std::time::Duration::from_secs_f64(
                    last.and_then(|l| l.ready_s).unwrap_or(0.0)
                ))
            );
        }
        for w in &p.waiting_for {
            println!("  waiting: {w}");
        }
        if let Some(l) = &p.last_line {
            println!("  last:    {}", crate::secrets::redact_text(l));
        }
        println!("  log:     {}", target.log.display());
        println!(
            "  next:    firedup watch {} --for DURATION   (nothing was stopped)",
            target.run_id
        );
    }
    EXIT_CODE
}

/// `still starting: in load_weights after 42s`.
fn reason(p: &Pending) -> String {
    let after =
        crate::duration::format_duration(std::time::Duration::from_secs_f64(p.elapsed_s.max(0.0)));
    match (&p.phase, p.process_alive) {
        (Some(phase), _) => format!("still starting: in {phase} after {after}"),
        (None, true) => format!("still starting after {after}"),
        (None, false) => format!("no verdict yet after {after}"),
    }
}

/// Seconds left until ready if this run goes as the last one did (`None`: no such run, or it
/// never became ready); 0 once past that time.
fn eta_s(elapsed_s: f64, last: Option<&LastTime>) -> Option<f64> {
    let ready = last?.ready_s?;
    Some(((ready - elapsed_s).max(0.0) * 10.0).round() / 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eta_is_what_is_left_of_the_last_runs_time_to_ready() {
        let last = |ready_s| LastTime {
            phases: Vec::new(),
            ready_s,
        };
        let table = [
            (10.0, None, None),
            (10.0, Some(last(None)), None),
            (10.0, Some(last(Some(42.0))), Some(32.0)),
            (50.0, Some(last(Some(42.0))), Some(0.0)),
        ];
        for (elapsed, l, want) in table {
            assert_eq!(eta_s(elapsed, l.as_ref()), want, "{elapsed} {l:?}");
        }
    }

    #[test]
    fn the_reason_names_the_phase_when_there_is_one() {
        let p = |phase: Option<&str>, alive| Pending {
            phase: phase.map(String::from),
            elapsed_s: 42.0,
            waiting_for: Vec::new(),
            last_line: None,
            process_alive: alive,
        };
        assert!(reason(&p(Some("load_weights"), true)).contains("in load_weights after"));
        assert!(reason(&p(None, true)).starts_with("still starting after"));
        assert!(reason(&p(None, false)).starts_with("no verdict yet"));
    }
}
