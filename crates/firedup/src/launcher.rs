//! The library's front door: launch a server (or a job) from Rust, wait for its verdict, and get a
//! handle that stops it, and proves it gone, when dropped. The way a test starts what it tests:
//!
//! ```text
//! Launch::new(["./server", "--port", "8080"]).ready_line("listening").timeout(d).start()?
//! ```
//!
//! [`Launch::start`] does what `firedup run` does: it resolves the options (every usage mistake is
//! an [`Error`] before anything runs), launches the command under firedup's supervisor (detached,
//! its output straight into its log, every process carrying `FIREDUP_RUN_ID`) and watches it to
//! the first verdict.
//!
//! - The verdict that was asked for (`ready`; `succeeded` with [`Launch::until_exit`]) gives a
//!   [`Running`]: its URL, port, pid, log and run id, the [`Outcome`], [`Running::wait`] for the
//!   final outcome, [`Running::stop`], and stop-and-verify when it is dropped (unless
//!   [`Running::keep`] left it running).
//! - Any other verdict is [`StartError::NotReady`], which carries the [`Outcome`] (verdict,
//!   signature, decisive line) and the teardown: the run was stopped before `start` returned,
//!   since the caller gets no handle to it. A test that only wants a ready server writes `?`; a
//!   test of a failure matches the error.
//! - firedup's own failures are [`StartError::Firedup`].
//!
//! The supervisor is a firedup binary (`firedup __supervise`): the library's caller is not one.
//! It is, in order: [`Launch::firedup_bin`]; `$FIREDUP_BIN`; this program, when it is `firedup`;
//! `firedup` beside this program or one folder up (cargo puts a test in `target/PROFILE/deps`,
//! the workspace's binaries in `target/PROFILE`); `firedup` on `PATH`. A binary is run, not
//! linked, so that the supervisor outlives the caller and `firedup ps`, `logs` and `stop` see the
//! run as any other.

#![warn(missing_docs, unreachable_pub)]

use crate::judge::Mode;
use std::path::PathBuf;
use std::time::Duration;

use std::sync::Arc;

use crate::engine::NoProgress;
use crate::error::Error;
use crate::host::{Host, HostError, LocalHost, Started};
use crate::launch::{self, LaunchSpec};
use crate::plan::{self, WatchOptions};
use crate::session::{DEFAULT_GRACE, EndPolicy, Session, Watched};
use crate::stop::StopReport;
use crate::target::Target;
use crate::verdict::{Outcome, Verdict};

use crate::firedup_bin::find_firedup;

mod running;
pub use running::Running;

/// A launch to start: the command and how to judge it (the flags of `firedup run`).
#[derive(Debug, Clone)]
pub struct Launch {
    command: Vec<String>,
    options: WatchOptions,
    env: Vec<(String, String)>,
    cwd: Option<PathBuf>,
    log: Option<PathBuf>,
    name: Option<String>,
    grace: Duration,
    firedup_bin: Option<PathBuf>,
    auto_port: bool,
    /// Where to launch; `None`: this machine.
    host: Option<Arc<dyn Host>>,
    owner: Owner,
}

/// Whose end stops a run ([`Launch::owner`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// The process that launches it (the default on this machine).
    This,
    /// Another process.
    Process(u32),
    /// None: the run lives until it is stopped.
    Nobody,
}

impl Launch {
    /// A launch of `command` (the program and its arguments, as `firedup run -- COMMAND`).
    pub fn new<I, S>(command: I) -> Launch
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Launch {
            command: command.into_iter().map(Into::into).collect(),
            options: WatchOptions::default(),
            env: Vec::new(),
            cwd: None,
            log: None,
            name: None,
            grace: DEFAULT_GRACE,
            firedup_bin: None,
            auto_port: false,
            host: None,
            owner: Owner::This,
        }
    }

    /// A log line (a regex) that means ready (`--ready-line`; repeatable: all must be seen).
    pub fn ready_line(mut self, pattern: impl Into<String>) -> Launch {
        self.options.ready_lines.push(pattern.into());
        self
    }

    /// A log line (a regex) that means failure (`--fail-line`; repeatable).
    pub fn fail_line(mut self, pattern: impl Into<String>) -> Launch {
        self.options.fail_lines.push(pattern.into());
        self
    }

    /// The deadline for becoming ready (`--timeout`; `Duration::MAX` for none).
    pub fn timeout(mut self, d: Duration) -> Launch {
        self.options.timeout = Some(duration_text(d));
        self
    }

    /// The verdict is `stalled` after this long without progress evidence (`--stall`;
    /// `Duration::MAX` for never).
    pub fn stall(mut self, d: Duration) -> Launch {
        self.options.stall = Some(duration_text(d));
        self
    }

    /// After ready, keep watching this long and report a crash inside the window (`--hold`).
    pub fn hold(mut self, d: Duration) -> Launch {
        self.options.hold = Some(duration_text(d));
        self
    }

    /// The server profile (`--profile`; default: detected from the command, else `generic`).
    pub fn profile(mut self, name: impl Into<String>) -> Launch {
        self.options.profile = Some(name.into());
        self
    }

    /// A profile file of your own (`--profile-file`; repeatable).
    pub fn profile_file(mut self, path: impl Into<PathBuf>) -> Launch {
        self.options.profile_files.push(path.into());
        self
    }

    /// Job mode (`--until exit`): [`Launch::start`] waits for the process to end, and `succeeded`
    /// is the verdict asked for.
    pub fn until_exit(mut self) -> Launch {
        self.options.until_exit = true;
        self
    }

    /// Ready only when this URL answers 2xx (`--http`; a `/path` means the server's own address).
    pub fn http(mut self, url: impl Into<String>) -> Launch {
        self.options.http = Some(url.into());
        self
    }

    /// Ready only when this TCP port accepts connections from the run's processes (`--port`).
    pub fn port(mut self, port: u16) -> Launch {
        self.options.port = Some(port);
        self.auto_port = false;
        self
    }

    /// Let firedup pick a free port (`--port auto`): it replaces every `{port}` in the command's
    /// arguments, is given to the command as `FIREDUP_PORT`, and must accept connections from the
    /// run's processes; [`Running::port`] and [`Running::url`] tell it (see [`crate::auto_port`]).
    pub fn auto_port(mut self) -> Launch {
        self.auto_port = true;
        self
    }

    /// Judge readiness by the log alone: no profile probes (`--no-probe`).
    pub fn no_probe(mut self) -> Launch {
        self.options.no_probe = true;
        self
    }

    /// An environment variable for the command (`--env KEY=VALUE`; repeatable).
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Launch {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The command's working directory (`--cwd`).
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Launch {
        self.cwd = Some(dir.into());
        self
    }

    /// The log to append the command's output to (`--log`; default: in the run directory).
    pub fn log(mut self, path: impl Into<PathBuf>) -> Launch {
        self.log = Some(path.into());
        self
    }

    /// A name for the run (`--name`): `firedup stop NAME`, `logs NAME` find it.
    pub fn name(mut self, name: impl Into<String>) -> Launch {
        self.name = Some(name.into());
        self
    }

    /// The grace between SIGTERM and SIGKILL when the run is stopped (`--grace`; default 10 s).
    pub fn grace(mut self, d: Duration) -> Launch {
        self.grace = d;
        self
    }

    /// The firedup binary that supervises the run (see the crate doc for where it is looked for
    /// without this); a test of the firedup package itself gives `env!("CARGO_BIN_EXE_firedup")`.
    pub fn firedup_bin(mut self, path: impl Into<PathBuf>) -> Launch {
        self.firedup_bin = Some(path.into());
        self
    }

    /// The process whose end stops the run, however it ends (SIGKILL included), as `firedup run
    /// --owner PID`: by default the process that launches it, so a test killed mid-run takes its
    /// servers with it (the supervisor stops them and verifies). On another host ([`Launch::host`])
    /// there is no owner.
    pub fn owner(mut self, pid: u32) -> Launch {
        self.owner = Owner::Process(pid);
        self
    }

    /// No owner: the run lives until it is stopped ([`Running::stop`], a drop, `firedup stop`),
    /// also after this process has ended (with [`Running::keep`]).
    pub fn without_owner(mut self) -> Launch {
        self.owner = Owner::Nobody;
        self
    }

    /// Where to launch: this machine (the default, supervised by the firedup binary found as the
    /// crate doc says), or any [`Host`] (another machine over SSH, a Slurm batch job), whose
    /// own firedup supervises the run there.
    pub fn host(mut self, host: Arc<dyn Host>) -> Launch {
        self.host = Some(host);
        self
    }

    /// Launches the command and waits for the first verdict: a [`Running`] when it is the one
    /// asked for (`ready`, or `succeeded` in job mode), else [`StartError::NotReady`] with the
    /// [`Outcome`] once the run was stopped. [`StartError::Firedup`] when firedup itself failed
    /// (a usage mistake is found before anything is launched).
    pub fn start(mut self) -> Result<Running, StartError> {
        if self.auto_port {
            crate::auto_port::apply(&mut self.command, &mut self.env, &mut self.options)?;
        }
        let mut options = self.options.clone();
        options.env = self.env.clone();
        // Resolved once before launching, so that usage mistakes launch nothing.
        let checked = plan::resolve(&options, &self.command, "", true)?;
        let spec = LaunchSpec {
            command: self.command.clone(),
            cwd: self.cwd.clone(),
            env: self.env.clone(),
            log: self.log.clone(),
            profile: checked.profile,
            mode: if options.until_exit {
                Mode::UntilExit
            } else {
                Mode::UntilReady
            },
            judging: options.clone(),
            name: self.name.clone(),
            // On this machine the run belongs to this process: killed (SIGKILL included), it
            // takes the run with it; the supervisor does the stopping.
            owner: match (&self.host, self.owner) {
                (None, Owner::This) => Some(crate::rundir::Owner::resolve(std::process::id())?),
                (None, Owner::Process(pid)) => Some(crate::rundir::Owner::resolve(pid)?),
                (Some(_), Owner::Process(_)) => {
                    return Err(StartError::Firedup(Error::Usage(
                        "an owner process does not go with a launch on another host yet: its supervisor would be there".into(),
                    )));
                }
                _ => None,
            },
            grace_ms: Some(self.grace.as_millis() as u64),
        };
        let (host, started) = match self.host.take() {
            Some(host) => {
                let started = host.launch(&spec).map_err(host_error)?;
                (host, started)
            }
            None => {
                let firedup = find_firedup(self.firedup_bin.as_deref())?;
                let launched = launch::launch_with(&spec, &firedup)?;
                let started = Started {
                    target: Target::from_launch(&launched),
                    supervisor: Some(launched.supervisor),
                };
                (Arc::new(LocalHost) as Arc<dyn Host>, started)
            }
        };
        // From here on a failure of firedup's own drops the session's `Running`, which stops it;
        // the plan was resolved above, so this one cannot fail on the options.
        let session = Session::launched(host, started, &options, &self.command)
            .map_err(host_error)?
            .with_grace(self.grace);
        let mut running = Running {
            address: session.plan().address.clone(),
            session,
            options,
            command: self.command,
            outcome: None,
            ended: false,
            grace: self.grace,
            stopped: None,
            kept: false,
        };
        let Watched::Verdict(outcome) = running.session.watch(&mut NoProgress, None, None) else {
            unreachable!("an unbounded watch ends with a verdict");
        };
        let mut outcome = *outcome;
        // The verdict in the run directory, for a later `firedup watch RUN_ID`.
        running.session.record_verdict(&outcome);
        let wanted = if running.options.until_exit {
            Verdict::Succeeded
        } else {
            Verdict::Ready
        };
        if outcome.verdict == wanted {
            running.session.end(&mut outcome, EndPolicy::Leave);
            running.ended = outcome.verdict == Verdict::Succeeded;
            running.outcome = Some(outcome);
            return Ok(running);
        }
        let teardown = running.stop_once();
        outcome.server_running = !teardown.survivors.is_empty();
        Err(StartError::NotReady {
            outcome: Box::new(outcome),
            teardown,
        })
    }
}

/// A host's failure as the library's caller sees it.
fn host_error(e: HostError) -> StartError {
    StartError::Firedup(host_failure(e))
}

/// A host's failure as firedup's own error: one that cannot be reached says so in its sentence.
fn host_failure(e: HostError) -> Error {
    match e {
        HostError::Failed(e) => e,
        HostError::Unreachable(reason) => Error::Remote(reason),
    }
}

/// A duration as the flags write it (`Duration::MAX`: `off`).
fn duration_text(d: Duration) -> String {
    if d == Duration::MAX {
        "off".into()
    } else {
        format!("{}s", d.as_secs_f64())
    }
}

/// Why [`Launch::start`] did not give a [`Running`].
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// firedup itself failed (a usage mistake, its state directory, its supervisor).
    #[error(transparent)]
    Firedup(#[from] Error),
    /// The server (or job) did not reach the verdict asked for: the outcome says how it ended
    /// (verdict, signature, decisive line). The run was stopped; `teardown` says how that went.
    #[error("{}", not_ready(outcome))]
    NotReady {
        /// How the run ended: the verdict, its signature and decisive line.
        outcome: Box<Outcome>,
        /// The stop that followed, and what it found left.
        teardown: StopReport,
    },
}

impl StartError {
    /// The outcome, when the server's failure (not firedup's) is why.
    pub fn outcome(&self) -> Option<&Outcome> {
        match self {
            StartError::NotReady { outcome, .. } => Some(outcome),
            StartError::Firedup(_) => None,
        }
    }
}

/// `run demo-1a2b3c: failed (cuda_oom): CUDA out of memory (line 12 of /path/output.log)`.
fn not_ready(o: &Outcome) -> String {
    let signature = o
        .signature
        .map(|s| format!(" ({})", s.as_str()))
        .unwrap_or_default();
    let line = o
        .line
        .as_ref()
        .map(|l| format!(" (line {} of {})", l.number, o.log))
        .unwrap_or_else(|| format!(" (log {})", o.log));
    format!(
        "run {}: {}{signature}: {}{line}",
        o.run_id, o.verdict, o.reason
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_as_the_flags_parse_them() {
        let table = [
            (Duration::from_secs(30), Some(Duration::from_secs(30))),
            (Duration::from_millis(250), Some(Duration::from_millis(250))),
            (Duration::MAX, None),
        ];
        for (d, parsed) in table {
            let text = duration_text(d);
            match parsed {
                Some(want) => assert_eq!(crate::duration::parse_duration(&text), Ok(want)),
                None => assert_eq!(text, "off"),
            }
        }
    }

    #[test]
    fn a_usage_mistake_launches_nothing() {
        let e = Launch::new(["true"])
            .firedup_bin("/bin/sh")
            .start()
            .unwrap_err();
        assert!(e.to_string().starts_with("no readiness condition"), "{e}");
        assert!(e.outcome().is_none());
    }
}
