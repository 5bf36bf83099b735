//! Ctrl-C (SIGINT), SIGTERM or SIGHUP to `firedup run`: the run ends deliberately. The server is
//! stopped on its host and its teardown verified (with `--keep`: left running, and the commands to re-attach
//! or stop it are printed), one line on stderr says so, the run is recorded in the history as
//! interrupted, and firedup exits 128 + the signal (130, 143, 129).
//!
//! A signal-hook thread does it, whatever the main thread is doing (launching, watching, running
//! `--then`): the main thread hands over what it needs ([`Interrupts::arm`], updated while
//! `--then` runs) and, once it has its verdict and ends the run itself, takes the ending back
//! ([`Interrupts::finish`]). Whichever comes first ends the run; the other stands aside.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::launch::LaunchSpec;
use crate::verdict::{Outcome, Verdict};
use firedup::host::Host;
use firedup::target::Target;

/// What the signal thread needs to end a run.
#[derive(Debug)]
pub struct RunEnding {
    /// Where the run is: the stop goes there.
    pub host: Arc<dyn Host>,
    pub target: Target,
    pub grace: Duration,
    pub keep: bool,
    pub spec: LaunchSpec,
    pub spec_hash: String,
    /// When the launch began: the times reported count from it.
    pub launched_at: Instant,
    /// The verdict, once there is one (an interrupt during `--then`).
    pub outcome: Option<Outcome>,
    /// The `--then` command while it runs.
    pub then_child: Option<u32>,
}

#[derive(Debug)]
enum Stage {
    /// Nothing launched yet: a signal waits for [`Interrupts::arm`].
    Launching {
        pending: Option<i32>,
    },
    Armed(Box<RunEnding>),
    /// One side is ending the run.
    Ending,
}

/// The installed handler.
#[derive(Debug)]
pub struct Interrupts {
    stage: Arc<Mutex<Stage>>,
}

/// Catches SIGINT, SIGTERM and SIGHUP from now on.
pub fn install() -> Result<Interrupts> {
    let stage = Arc::new(Mutex::new(Stage::Launching { pending: None }));
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| anyhow::anyhow!("cannot handle Ctrl-C: {e}"))?;
    let shared = stage.clone();
    std::thread::spawn(move || {
        for sig in signals.forever() {
            let ending = {
                let Ok(mut s) = shared.lock() else { return };
                match &mut *s {
                    Stage::Launching { pending } => {
                        pending.get_or_insert(sig);
                        continue;
                    }
                    Stage::Ending => continue,
                    Stage::Armed(_) => match std::mem::replace(&mut *s, Stage::Ending) {
                        Stage::Armed(e) => e,
                        _ => unreachable!("matched as armed"),
                    },
                }
            };
            end(*ending, sig);
        }
    });
    Ok(Interrupts { stage })
}

impl Interrupts {
    /// The run is launched: from now on a signal ends it (at once, if one came while launching).
    pub fn arm(&self, ending: RunEnding) {
        let pending = {
            let Ok(mut s) = self.stage.lock() else { return };
            match &*s {
                Stage::Launching { pending: Some(sig) } => {
                    let sig = *sig;
                    *s = Stage::Ending;
                    Some(sig)
                }
                _ => {
                    *s = Stage::Armed(Box::new(ending));
                    return;
                }
            }
        };
        if let Some(sig) = pending {
            end(ending, sig);
        }
    }

    /// Changes what the signal thread knows (the verdict, the `--then` child); nothing once the
    /// run is ending.
    pub fn update(&self, change: impl FnOnce(&mut RunEnding)) {
        if let Ok(mut s) = self.stage.lock() {
            if let Stage::Armed(e) = &mut *s {
                change(e);
            }
        }
    }

    /// The main thread ends the run itself from here on. If the signal thread already is, this
    /// never returns: that thread exits the process.
    pub fn finish(&self) {
        let taken = match self.stage.lock() {
            Ok(mut s) => {
                let was_ending = matches!(*s, Stage::Ending);
                *s = Stage::Ending;
                !was_ending
            }
            Err(_) => true,
        };
        if !taken {
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
    }
}

/// Exit code for a run ended by `sig`.
pub fn exit_code(sig: i32) -> i32 {
    128 + sig
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// Stops (or keeps) the server, says so in one line, records the run, exits.
fn end(e: RunEnding, sig: i32) -> ! {
    let name = signal_name(sig);
    let after = crate::duration::format_duration(e.launched_at.elapsed());
    let run_id = e.target.run_id.clone();
    if let Some(child) = e.then_child {
        // The --then command shares firedup's terminal group (a Ctrl-C reached it already); a
        // SIGTERM or SIGHUP sent to firedup alone is passed on.
        if let Some(p) = rustix::process::Pid::from_raw(child as i32) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
        }
    }
    let host_flag = e
        .host
        .name()
        .map(|h| format!(" --host {h}"))
        .unwrap_or_default();
    let (line, teardown, running) = if e.keep {
        (
            format!(
                "firedup: interrupted ({name}) after {after}: the server is left running (--keep): watch it with `firedup watch{host_flag} {run_id}`, stop it with `firedup stop{host_flag} {run_id}`"
            ),
            "kept running (--keep)".to_string(),
            true,
        )
    } else {
        let (d, running) = match e.host.stop(&run_id, e.grace) {
            Ok(stopped) => (stopped.report.describe(), !stopped.clean()),
            Err(err) => (format!("stopping failed: {err:#}"), true),
        };
        (
            format!("firedup: interrupted ({name}) after {after}: {d}"),
            d,
            running,
        )
    };
    eprintln!("{line}");
    let mut outcome = e.outcome.unwrap_or_else(|| Outcome {
        attached: false,
        verdict: Verdict::MonitorError,
        signature: None,
        reason: format!("interrupted ({name}) after {after}, before a verdict"),
        line: None,
        context: Vec::new(),
        phase: None,
        elapsed_s: (e.launched_at.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
        exit: None,
        pid: e.target.pid,
        log: e.target.log.display().to_string(),
        run_id: run_id.clone(),
        timeline: Vec::new(),
        secondary: Vec::new(),
        server_running: false,
        probes: Vec::new(),
        request_gap_s: None,
        gpu: None,
        ready_s: None,
        host: e.host.name().map(String::from),
        schema: crate::verdict::OUTCOME_SCHEMA,
        name: e.spec.name.clone(),
        log_from_line: None,
        rank: None,
        url: None,
        port: None,
        job: None,
        owner: e.spec.owner.map(|o| o.pid),
    });
    outcome.server_running = running;
    crate::history::record_interrupted(&e.spec, &e.spec_hash, &outcome, &teardown);
    std::process::exit(exit_code(sig));
}
