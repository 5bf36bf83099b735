//! What firedup says while a person waits on it at a terminal: `stop`'s grace period (one line
//! before the wait, the result after), and Ctrl-C on `watch`, which detaches: the run goes on,
//! and the line says how to stop it (exit 128 + the signal, 130 for Ctrl-C, as `run`'s
//! interrupt; nothing is stopped, so no verdict is printed).

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;

use crate::duration::format_duration;
use firedup::session::interrupts::{AfterSignal, Heard, Interrupts};

/// The line `stop` prints before its grace period, on a terminal only (a script reads the
/// result line alone).
pub(crate) fn stopping_line(
    run_id: &str,
    host: Option<&str>,
    grace: Duration,
    slurm_job: Option<String>,
) -> Option<String> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let on = host.map(|h| format!(" on {h}")).unwrap_or_default();
    if let Some(job) = slurm_job {
        return Some(format!(
            "firedup: stopping {run_id}{on}: cancelling slurm job {job} (scancel), waiting for it to end…"
        ));
    }
    Some(format!(
        "firedup: stopping {run_id}{on}: SIGTERM sent, waiting up to {} for it to end (then SIGKILL)…",
        format_duration(grace)
    ))
}

/// What Ctrl-C on `watch` says: the run it watches (once known) is left running.
#[derive(Debug, Default)]
pub(crate) struct Detach {
    /// `firedup stop ...` for the watched run, once it is known; `None` for a log firedup did
    /// not launch.
    stop_command: Mutex<Option<String>>,
}

impl Detach {
    /// From now until exit, SIGINT, SIGTERM and SIGHUP detach: one line, exit 128 + the signal.
    pub(crate) fn install() -> Result<(Arc<Detach>, Interrupts)> {
        let detach = Arc::new(Detach::default());
        let said = Arc::clone(&detach);
        let interrupts = Interrupts::install(AfterSignal::Exit, move |heard| {
            if let Heard::Signal(_) = heard {
                let _ = writeln!(std::io::stderr(), "{}", said.line());
            }
        })?;
        Ok((detach, interrupts))
    }

    /// The watched run, stopped by `stop` (`firedup stop [--host H] RUN`).
    pub(crate) fn watching(&self, stop: String) {
        if let Ok(mut s) = self.stop_command.lock() {
            *s = Some(stop);
        }
    }

    fn line(&self) -> String {
        // After the terminal's `^C`, on a line of its own.
        let start = if std::io::stderr().is_terminal() {
            "\n"
        } else {
            ""
        };
        match self.stop_command.lock().ok().and_then(|s| s.clone()) {
            Some(stop) => format!("{start}firedup: detached; still running: {stop}"),
            None => format!("{start}firedup: detached; nothing was stopped"),
        }
    }
}
