//! What `firedup run` says and records when SIGINT (Ctrl-C), SIGTERM or SIGHUP ends its run.
//! The ending itself (the stop, or `--keep`'s leaving it, and the exit 128 + the signal) is the
//! library's one handler (`firedup::session::interrupts`); this is the run's side: one line on
//! stderr, and the run recorded in the history as interrupted.
//!
//! Everything here runs on the handler's thread while the process is about to exit: a write to a
//! stderr whose reader is gone fails quietly instead of panicking, and the history is written
//! after the line.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::launch::LaunchSpec;
use crate::verdict::{Outcome, Verdict};
use firedup::session::interrupts::{Heard, InterruptedRun, RunEnded, signal_name};

/// What the handler needs to say and record an interrupted run.
#[derive(Debug)]
pub struct RunContext {
    pub spec: LaunchSpec,
    pub spec_hash: String,
    /// When the launch began: the times reported count from it.
    pub launched_at: Instant,
    /// The verdict, once there is one (an interrupt during `--then`).
    pub outcome: Option<Outcome>,
}

/// Says and records what a signal ended (the handler's callback).
pub fn report(context: &Arc<Mutex<RunContext>>, heard: &Heard) {
    let Heard::Ended(ended) = heard else {
        return;
    };
    let Ok(c) = context.lock() else { return };
    let name = signal_name(ended.signal);
    let after = crate::duration::format_duration(c.launched_at.elapsed());
    let Some(run) = ended.runs.first() else {
        // The signal came before anything was launched.
        let _ = writeln!(
            std::io::stderr(),
            "firedup: interrupted ({name}) after {after}, before the launch: nothing was started"
        );
        return;
    };
    let (line, teardown, running) = describe(run, name, &after);
    let _ = writeln!(std::io::stderr(), "{line}");
    let mut outcome = c.outcome.clone().unwrap_or_else(|| {
        let mut o = Outcome::without_watch(
            Verdict::MonitorError,
            format!("interrupted ({name}) after {after}, before a verdict"),
            &run.target.run_id,
            &run.target.log.display().to_string(),
            run.target.pid,
        );
        o.elapsed_s = (c.launched_at.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
        o.host = run.host.clone();
        o.name = c.spec.name.clone();
        o
    });
    outcome.server_running = running;
    crate::history::record_interrupted(&c.spec, &c.spec_hash, &outcome, &teardown);
}

/// The line on stderr, the teardown in words, and whether the server is still running.
fn describe(run: &InterruptedRun, name: &str, after: &str) -> (String, String, bool) {
    let run_id = &run.target.run_id;
    let host_flag = run
        .host
        .as_ref()
        .map(|h| format!(" --host {h}"))
        .unwrap_or_default();
    match &run.ended {
        RunEnded::Kept | RunEnded::Cancelled => (
            format!(
                "firedup: interrupted ({name}) after {after}: the server is left running (--keep): watch it with `firedup watch{host_flag} {run_id}`, stop it with `firedup stop{host_flag} {run_id}`"
            ),
            "kept running (--keep)".to_string(),
            true,
        ),
        RunEnded::Stopped(stop) => {
            let (d, running) = match stop {
                Ok(stopped) => (stopped.describe(), !stopped.clean()),
                Err(err) => (format!("stopping failed: {err}"), true),
            };
            (
                format!("firedup: interrupted ({name}) after {after}: {d}"),
                d,
                running,
            )
        }
    }
}
