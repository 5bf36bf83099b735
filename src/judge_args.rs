//! The flags that say how to judge a run, shared by `run`, `watch` and `matrix` (`--until`,
//! `--ready-line`, `--timeout`, ...), turned into the library's [`WatchOptions`]; and the two
//! small flag readers `run`, `watch` and `stop` share (`--grace`, `--events`).

use crate::judge::Mode;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, ValueEnum};

use crate::duration::parse_duration;
use crate::plan::WatchOptions;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Until {
    /// Server mode: the verdict is `ready` once the readiness conditions hold.
    Ready,
    /// Job mode: watch until the process exits (`succeeded` or a failure verdict).
    Exit,
}

impl From<Until> for Mode {
    fn from(u: Until) -> Mode {
        match u {
            Until::Ready => Mode::UntilReady,
            Until::Exit => Mode::UntilExit,
        }
    }
}

/// `--port N` or `--port auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortFlag {
    /// The server's port, as given.
    Given(u16),
    /// `run --port auto`: firedup picks one ([`firedup::auto_port`]).
    Auto,
}

fn parse_port_flag(s: &str) -> Result<PortFlag, String> {
    if s == "auto" {
        return Ok(PortFlag::Auto);
    }
    s.parse::<u16>()
        .map(PortFlag::Given)
        .map_err(|_| format!("'{s}' is not a port: give a number from 1 to 65535, or auto"))
}

#[derive(Debug, Args)]
pub struct JudgeArgs {
    /// Server mode (`ready`, the default) or job mode (`exit`).
    #[arg(long, value_enum, default_value = "ready")]
    pub until: Until,
    /// Print the verdict as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Server profile (default: detected from the command line, else `generic`; see `firedup profiles`).
    #[arg(long)]
    pub profile: Option<String>,
    /// A profile file of your own (repeatable; overrides a built-in of the same name).
    #[arg(long = "profile-file", value_name = "FILE")]
    pub profile_file: Vec<PathBuf>,
    /// Ready only when this URL answers 2xx (a /path means the server's own address). 503 while
    /// loading is "not yet".
    #[arg(long, value_name = "URL")]
    pub http: Option<String>,
    /// Ready only when this TCP port accepts connections from the watched process tree. `run
    /// --port auto`: firedup picks a free port, puts it in place of every `{port}` in COMMAND's
    /// arguments, sets FIREDUP_PORT for the command, and probes it.
    #[arg(long, value_name = "PORT|auto", value_parser = parse_port_flag)]
    pub port: Option<PortFlag>,
    /// Ready only when a tiny real request returns tokens (`openai`: a 1-token completion; `tgi`:
    /// /generate; default: the profile's). Reports health-ready and request-ready times.
    #[arg(long = "ready-request", value_name = "KIND", num_args = 0..=1, default_missing_value = "")]
    pub ready_request: Option<String>,
    /// Bound one startup phase: PHASE=DURATION (e.g. capture_cuda_graph=15m; repeatable).
    #[arg(long = "phase-timeout", value_name = "PHASE=DURATION")]
    pub phase_timeout: Vec<String>,
    /// A log line that means ready (regex; repeatable: all must be seen).
    #[arg(long = "ready-line", value_name = "REGEX")]
    pub ready_line: Vec<String>,
    /// A log line that means failure (regex; repeatable).
    #[arg(long = "fail-line", value_name = "REGEX")]
    pub fail_line: Vec<String>,
    /// Overall deadline for becoming ready (e.g. 20m; `off` for none). Default: the profile's
    /// (`firedup profiles show NAME` prints it).
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Verdict `stalled` after this long without progress evidence (`off` for never). Default:
    /// the profile's (`firedup profiles show NAME` prints it).
    #[arg(long, value_name = "DURATION")]
    pub stall: Option<String>,
    /// How long a missing log may stay missing while no process is known.
    #[arg(long = "log-grace", value_name = "DURATION")]
    pub log_grace: Option<String>,
    /// After ready, keep watching this long and report a crash inside the window (replaces the
    /// 500ms confirmation window after the ready condition; `0s` turns both off).
    #[arg(long, value_name = "DURATION")]
    pub hold: Option<String>,
    /// Judge readiness by the log alone: skip the profile's port/HTTP probes (e.g. when the
    /// server's port cannot be reached from here).
    #[arg(long = "no-probe")]
    pub no_probe: bool,
    /// A batch job (--slurm, --slurm-job) still waiting in the queue after this long is
    /// `timed_out`. Time queued counts toward neither --timeout nor --stall.
    #[arg(long = "queue-timeout", value_name = "DURATION")]
    pub queue_timeout: Option<String>,
    /// Write an NDJSON stream of observations and phase changes to this file (`-` for stderr).
    #[arg(long, value_name = "PATH")]
    pub events: Option<PathBuf>,
}

impl JudgeArgs {
    /// `--port auto` was given.
    pub(crate) fn auto_port(&self) -> bool {
        self.port == Some(PortFlag::Auto)
    }

    pub(crate) fn options(&self, from_end: bool) -> WatchOptions {
        WatchOptions {
            until_exit: Mode::from(self.until) == Mode::UntilExit,
            profile: self.profile.clone(),
            ready_lines: self.ready_line.clone(),
            fail_lines: self.fail_line.clone(),
            timeout: self.timeout.clone(),
            stall: self.stall.clone(),
            log_grace: self.log_grace.clone(),
            hold: self.hold.clone(),
            from_end,
            profile_files: self.profile_file.clone(),
            http: self.http.clone(),
            // `auto` is applied by `run` once it has picked the port.
            port: match self.port {
                Some(PortFlag::Given(p)) => Some(p),
                Some(PortFlag::Auto) | None => None,
            },
            ready_request: self.ready_request.clone(),
            notify: false,
            no_probe: self.no_probe,
            phase_timeouts: self.phase_timeout.clone(),
            queue_timeout: self.queue_timeout.clone(),
            env: Vec::new(),
        }
    }
}

pub(crate) fn grace_flag(g: &str) -> Result<Duration> {
    parse_duration(g).map_err(|e| anyhow::anyhow!("--grace: {e}"))
}

pub(crate) fn open_events(path: &Option<PathBuf>) -> Result<Option<Box<dyn Write>>> {
    Ok(match path {
        None => None,
        Some(p) if p.as_os_str() == "-" => Some(Box::new(std::io::stderr())),
        // Opened once, never through another user's symlink nor into another user's file.
        Some(p) => Some(Box::new(
            firedup::writable_file::open_for_writing(p, firedup::writable_file::Purpose::Events)?
                .file,
        )),
    })
}
