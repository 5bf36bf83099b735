//! One run's life cycle, written once for every command and every host: a run is launched (or
//! found again, or attached to by its log), watched to a verdict (or, with a bound, to
//! [`Watched::Pending`]), and ended by an [`EndPolicy`]: left running, kept, stopped and its
//! teardown verified, or handed to a `then` command and stopped after it ([`then`]).
//!
//! `firedup run`, `firedup watch`, every matrix cell and the library's [`crate::Launch`] are a
//! [`Session`] over a [`Host`], so the plan, the watch and the teardown are the same on this
//! machine, over SSH and under Slurm. SIGINT, SIGTERM and SIGHUP end the runs of a process
//! through one handler, [`interrupts`]. Nothing here prints: progress goes to a [`Progress`],
//! what happened is returned.

pub mod interrupts;
pub mod then;

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::{self, Progress};
use crate::host::{Host, HostError, RunStop, Started};
use crate::launch::LaunchSpec;
use crate::plan::{self, Plan, WatchOptions};
use crate::target::Target;
use crate::verdict::{Outcome, Verdict};

/// How long a stop waits between SIGTERM and SIGKILL unless told otherwise (as `firedup run
/// --grace`).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// A run and how it is watched.
#[derive(Debug)]
pub struct Session {
    host: Arc<dyn Host>,
    target: Target,
    plan: Plan,
    /// Attached by log: a run of its own that firedup did not launch.
    attached: bool,
    /// The supervisor, when this process started it (reaped after the watch and the stop).
    supervisor: Option<std::process::Child>,
    /// The grace between SIGTERM and SIGKILL of this session's stops.
    grace: Duration,
    /// The source of the last local watch, stood down at its verdict and kept until the session
    /// ends or watches again: letting it go waits for a helper thread (the inotify watch's
    /// removal is answered by the thread that reads the instance), which is no part of the
    /// verdict (issue 28: 0.1 to 0.7 ms of the ready latency).
    spent_source: Option<SpentSource>,
}

/// A watch's source once its verdict is known, kept only to be let go later.
struct SpentSource(#[allow(dead_code)] Box<dyn crate::source::Source + Send>);

impl std::fmt::Debug for SpentSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpentSource")
    }
}

/// How a watch ended.
#[derive(Debug)]
pub enum Watched {
    /// The verdict.
    Verdict(Box<Outcome>),
    /// The bound passed with no verdict: the run is still starting, and nothing was changed.
    Pending(Pending),
}

/// Where a run stands when a bounded watch ends before its verdict (`watch --for`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Pending {
    /// The last startup phase reached.
    pub phase: Option<String>,
    /// Seconds from the launch (from the attach, for a log attached to) to now.
    pub elapsed_s: f64,
    /// The readiness conditions not met yet, in words.
    pub waiting_for: Vec<String>,
    /// The last meaningful log line.
    pub last_line: Option<String>,
    /// Whether the watched process is alive.
    pub process_alive: bool,
}

/// How a run ends once its verdict is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndPolicy {
    /// The run is someone else's to end (`firedup watch`; a ready server handed to its caller).
    Leave,
    /// `firedup run`: a ready server is left serving; any other verdict stops what is left of
    /// the run and verifies it gone, unless `keep`; after `monitor_error` (firedup's own watch
    /// failed, so it cannot tell whether the server works) it is left running, never stopped on
    /// firedup's fault.
    Run {
        /// `--keep`: left running whatever the verdict.
        keep: bool,
    },
    /// Stopped and verified gone whatever the verdict (after `--then`; a verdict the library's
    /// caller did not ask for).
    Stop,
}

/// How [`Session::end`] ended the run.
#[derive(Debug, Clone, Default)]
pub struct Ending {
    /// The teardown in words, when there is something to say (stopped, kept, left running).
    pub teardown: Option<String>,
    /// The stop, when one was made and reached the host.
    pub stop: Option<RunStop>,
}

impl Session {
    /// Launches `spec` on `host` and resolves its plan against the launched log. `registered`
    /// hears of the run as soon as it exists (before anything else can fail), so that a signal
    /// handler can end it ([`interrupts::Interrupts::register`]).
    pub fn launch(
        host: Arc<dyn Host>,
        spec: &LaunchSpec,
        registered: &mut dyn FnMut(&Target),
    ) -> Result<Session, HostError> {
        let started = host.launch(spec)?;
        registered(&started.target);
        Session::launched(host, started, &spec.judging, &spec.command)
    }

    /// A session over what a launch `started` (the library launches with a firedup binary of its
    /// caller's choosing), judged by `options`.
    pub fn launched(
        host: Arc<dyn Host>,
        started: Started,
        options: &WatchOptions,
        command: &[String],
    ) -> Result<Session, HostError> {
        let plan = plan_for(host.as_ref(), options, command, &started.target, true)?;
        Ok(Session {
            host,
            target: started.target,
            plan,
            attached: false,
            supervisor: started.supervisor,
            grace: DEFAULT_GRACE,
            spent_source: None,
        })
    }

    /// A session over a run found again or a log attached to, with its plan already resolved.
    pub fn resumed(host: Arc<dyn Host>, target: Target, plan: Plan, attached: bool) -> Session {
        Session {
            host,
            target,
            plan,
            attached,
            supervisor: None,
            grace: DEFAULT_GRACE,
            spent_source: None,
        }
    }

    /// The grace between SIGTERM and SIGKILL when this session stops the run (`--grace`).
    pub fn with_grace(mut self, grace: Duration) -> Session {
        self.grace = grace;
        self
    }

    /// The grace between SIGTERM and SIGKILL of this session's stops.
    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// The run.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The run, to add what only the caller knows (the sd_notify socket it bound).
    pub fn target_mut(&mut self) -> &mut Target {
        &mut self.target
    }

    /// How it is judged.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Where it runs.
    pub fn host(&self) -> &Arc<dyn Host> {
        &self.host
    }

    /// Watches the run to its verdict, or until `bound` passes ([`Watched::Pending`]).
    /// `events` receives the NDJSON event stream when given.
    pub fn watch(
        &mut self,
        progress: &mut dyn Progress,
        events: Option<&mut dyn Write>,
        bound: Option<Instant>,
    ) -> Watched {
        // The previous watch's source goes before this one watches the same log.
        self.spent_source = None;
        let mut source = self.host.source(&self.plan, &self.target, self.attached);
        let meta = engine::launch_record(&self.target);
        let judged = engine::judge_loop_bounded(
            &self.plan,
            &self.target.log,
            source.as_mut(),
            progress,
            events,
            bound,
        );
        source.stand_down();
        // Only this machine's source is kept: another host's holds its connection open.
        if self.host.name().is_none() {
            self.spent_source = Some(SpentSource(source));
        }
        self.reap();
        match judged {
            Ok(j) => {
                let mut outcome = engine::outcome(j, &self.plan, &self.target, meta);
                outcome.attached = self.attached;
                outcome.host = self.host.name().map(String::from);
                // On another host, the URL names that host, not its loopback (docs/contract.md).
                if let (Some(h), Some(a)) = (self.host.name(), &self.plan.address) {
                    outcome.url = Some(a.url_on(Some(h)));
                }
                Watched::Verdict(Box::new(outcome))
            }
            Err(stood) => {
                let (status, at) = *stood;
                Watched::Pending(Pending {
                    phase: status.phase,
                    elapsed_s: (at.as_secs_f64() * 1000.0).round() / 1000.0,
                    waiting_for: status.waiting_for,
                    last_line: status.last_line,
                    process_alive: status.process_alive,
                })
            }
        }
    }

    /// Records `outcome` in the run's directory on its host (`verdict.json`), for a later
    /// `firedup watch RUN_ID` of the run once it has ended (only the first verdict is kept).
    pub fn record_verdict(&self, outcome: &Outcome) {
        self.host.record_verdict(&self.target, outcome);
    }

    /// Ends the run as `policy` says once `outcome` is its verdict: sets
    /// `outcome.server_running` (and the GPU memory left after a stop) and says what was done.
    pub fn end(&mut self, outcome: &mut Outcome, policy: EndPolicy) -> Ending {
        let alive = |s: &Session, otherwise: bool| s.host.alive(&s.target).unwrap_or(otherwise);
        let ending = match policy {
            EndPolicy::Stop => self.stop_and_check(outcome),
            // A host that cannot tell from here whether the run lives goes by the judgement.
            EndPolicy::Leave => {
                outcome.server_running = alive(self, outcome.server_running);
                Ending::default()
            }
            EndPolicy::Run { .. } if outcome.verdict == Verdict::Ready => {
                outcome.server_running = alive(self, true);
                Ending::default()
            }
            EndPolicy::Run { keep: true } => {
                outcome.server_running = alive(self, outcome.server_running);
                Ending {
                    teardown: outcome
                        .server_running
                        .then(|| "kept running (--keep)".to_string()),
                    stop: None,
                }
            }
            EndPolicy::Run { keep: false } if outcome.verdict == Verdict::MonitorError => {
                outcome.server_running = alive(self, outcome.pid.is_some());
                Ending {
                    teardown: outcome
                        .server_running
                        .then(|| self.left_running_after_monitor_error()),
                    stop: None,
                }
            }
            EndPolicy::Run { keep: false } => {
                if alive(self, outcome.server_running) {
                    self.stop_and_check(outcome)
                } else {
                    outcome.server_running = false;
                    Ending::default()
                }
            }
        };
        self.reap();
        ending
    }

    /// Stops the run, verifies what is left and says so; a stop that failed leaves it running.
    fn stop_and_check(&mut self, outcome: &mut Outcome) -> Ending {
        let grace = self.grace;
        let (said, stop) = stop_in_words(self.host.as_ref(), &self.target.run_id, grace);
        match &stop {
            Some(stop) => {
                if let Some(gpu) = outcome.gpu.as_mut() {
                    if let Some(mib) = self.host.gpu_after_stop(stop) {
                        gpu.after_teardown_mib = Some(mib);
                    }
                }
                outcome.server_running = !stop.clean();
            }
            None => outcome.server_running = true,
        }
        Ending {
            teardown: Some(said),
            stop,
        }
    }

    /// Stops the run now (the library's `Running::stop`, a drop), bounded by `grace`.
    pub fn stop(&mut self, grace: Duration) -> Result<RunStop, HostError> {
        let stop = self.host.stop(&self.target.run_id, grace);
        self.reap_within(SUPERVISOR_REAP_WAIT);
        stop
    }

    /// Whether anything of the run lives (`None`: the host cannot tell from here).
    pub fn alive(&self) -> Option<bool> {
        self.host.alive(&self.target)
    }

    /// Re-plans the watch (the library's `Running::wait`: judged to the end as `--until exit`).
    pub fn replan(&mut self, options: &WatchOptions, command: &[String]) -> Result<(), HostError> {
        self.plan = plan_for(self.host.as_ref(), options, command, &self.target, true)?;
        // The supervisor's pipe was the first watch's; the exit record is read instead.
        self.target.exit_pipe = None;
        Ok(())
    }

    fn left_running_after_monitor_error(&self) -> String {
        let run_id = &self.target.run_id;
        match self.host.name() {
            None => format!(
                "left running: firedup could not watch it, so it cannot tell whether the server works; \
                 re-attach with `firedup watch {run_id}`, stop it with `firedup stop {run_id}`"
            ),
            Some(h) => format!("left running on {h}: firedup watch --host {h} {run_id}"),
        }
    }

    /// Reaps the supervisor if it is done (it stays as long as the server does).
    fn reap(&mut self) {
        if let Some(s) = self.supervisor.as_mut() {
            let _ = s.try_wait();
        }
    }

    /// Waits (bounded) for the supervisor to end once the run is stopped.
    fn reap_within(&mut self, wait: Duration) {
        let deadline = Instant::now() + wait;
        if let Some(s) = self.supervisor.as_mut() {
            while matches!(s.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

/// How long a stop waits for the supervisor this process started to end before leaving it to init.
const SUPERVISOR_REAP_WAIT: Duration = Duration::from_secs(2);

/// The plan of a launched (or found) run on `host`: `options` resolved against its log; a run
/// on another host probes from there.
pub fn plan_for(
    host: &dyn Host,
    options: &WatchOptions,
    command: &[String],
    target: &Target,
    watches_process: bool,
) -> Result<Plan, HostError> {
    let mut plan = plan::resolve(
        options,
        command,
        &target.log.display().to_string(),
        watches_process && host.watches_process(),
    )
    .map_err(HostError::failed)?;
    // Paid now, not at the server's first non-ASCII line: what firedup allocates while the
    // server fills a memory cgroup they share can get firedup OOM-killed after the server.
    plan.judge.classifier.prepare_for_any_text();
    if let Some(h) = host.name() {
        plan.judge.probe_origin = format!("remote {h}");
    }
    Ok(plan)
}

/// Stops run `run_id` on `host` and says how it went in words, with the stop when it was made.
pub fn stop_in_words(host: &dyn Host, run_id: &str, grace: Duration) -> (String, Option<RunStop>) {
    match (host.stop(run_id, grace), host.name()) {
        (Ok(s), None) => (s.report.describe(), Some(s)),
        (Ok(s), Some(h)) => (format!("stopped on {h}: {}", s.describe()), Some(s)),
        (Err(e), None) => (format!("stopping failed: {e}"), None),
        (Err(e), Some(h)) => (
            format!(
                "stopped on {h}, but stopping failed: {e}; stop it with: firedup stop --host {h} {run_id}"
            ),
            None,
        ),
    }
}
