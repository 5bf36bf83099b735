//! The command line: argument definitions and the dispatch to the commands. `run`
//! (`run_cmd.rs`), `watch` (`watch_cmd.rs`) and `stop` (`runs_cmd.rs`, with `ps` and `logs`) are
//! written once against a [`Host`]: this machine, or `--host` over SSH. Firedup's own failures
//! reach the user as one sentence and exit 2.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::duration::parse_duration;
use crate::plan::WatchOptions;
use crate::profiles_cmd::ProfilesAction;
use crate::remote::HostSpec;
use crate::verdict::USAGE_EXIT_CODE;
use firedup::host::{Host, LocalHost, LogFrom, SshHost};

#[derive(Debug, Parser)]
#[command(
    name = "firedup",
    version,
    about = "Launch or attach to a slow-starting server or job and end with one verdict that cannot be mistaken.",
    after_help = "Verdicts and exit codes: ready 0, succeeded 0, failed 1, usage error 2, exited 3, killed 4, never_started 5, stalled 6, timed_out 124, monitor_error 7."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Until {
    /// Server mode: the verdict is `ready` once the readiness conditions hold.
    Ready,
    /// Job mode: watch until the process exits (`succeeded` or a failure verdict).
    Exit,
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
    /// Ready only when this TCP port accepts connections from the watched process tree.
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
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
    /// Overall deadline for becoming ready (e.g. 20m; `off` for none).
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Verdict `stalled` after this long without progress evidence (`off` for never).
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
    /// Write an NDJSON stream of observations and phase changes to this file (`-` for stderr).
    #[arg(long, value_name = "PATH")]
    pub events: Option<PathBuf>,
}

impl JudgeArgs {
    pub(crate) fn options(&self, from_end: bool) -> WatchOptions {
        WatchOptions {
            until_exit: self.until == Until::Exit,
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
            port: self.port,
            ready_request: self.ready_request.clone(),
            notify: false,
            no_probe: self.no_probe,
            phase_timeouts: self.phase_timeout.clone(),
            env: Vec::new(),
        }
    }
}

/// Where the server runs, when not here.
#[derive(Debug, Args, Clone)]
pub struct RemoteArgs {
    /// Run or watch on this SSH host (as you write it for ssh: an alias of ~/.ssh/config,
    /// user@host). firedup copies itself to ~/.cache/firedup/bin there on first use.
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// How long to wait for the first SSH connection.
    #[arg(
        long = "connect-timeout",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub connect_timeout: String,
    /// After losing contact with the host, how long to keep reconnecting before `monitor_error`
    /// (the server keeps running there).
    #[arg(long = "reconnect-for", value_name = "DURATION", default_value = "5m")]
    pub reconnect_for: String,
}

impl RemoteArgs {
    /// The host the command acts on: this machine, or `--host` over SSH.
    fn host(&self) -> Result<Arc<dyn Host>> {
        Ok(match self.ssh_host()? {
            Some(h) => Arc::new(h),
            None => Arc::new(LocalHost),
        })
    }

    /// The `--host`, when one is given.
    fn ssh_host(&self) -> Result<Option<SshHost>> {
        let Some(host) = &self.host else {
            return Ok(None);
        };
        let connect = parse_duration(&self.connect_timeout)
            .map_err(|e| anyhow::anyhow!("--connect-timeout: {e}"))?;
        let reconnect = parse_duration(&self.reconnect_for)
            .map_err(|e| anyhow::anyhow!("--reconnect-for: {e}"))?;
        Ok(Some(SshHost::new(HostSpec::new(host, connect), reconnect)))
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Launch COMMAND (detached, output straight into its log) and watch it to a verdict.
    Run {
        #[command(flatten)]
        judge: JudgeArgs,
        /// Log file to append the command's stdout and stderr to (default: in the run directory).
        #[arg(long, value_name = "PATH")]
        log: Option<PathBuf>,
        /// Environment variable for the command (repeatable).
        #[arg(long = "env", value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// Working directory of the command.
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// After ready, run CMD (sh -c), then stop the server and exit with CMD's status.
        #[arg(long, value_name = "CMD")]
        then: Option<String>,
        /// Leave the server running whatever the verdict (also on Ctrl-C, which otherwise stops
        /// it and exits 130).
        #[arg(long)]
        keep: bool,
        /// Give the command a NOTIFY_SOCKET (sd_notify) and count `READY=1` as a readiness
        /// condition; `STATUS=` is shown, `EXTEND_TIMEOUT_USEC=` moves the deadline.
        #[arg(long)]
        notify: bool,
        /// Grace between SIGTERM and SIGKILL when stopping the server.
        #[arg(long, value_name = "DURATION", default_value = "10s")]
        grace: String,
        /// A name for the run ([A-Za-z0-9._-], unique among live runs): `stop`, `logs`,
        /// `watch`, `show` and `compare` take it where a RUN_ID goes (the newest run of a name).
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        #[command(flatten)]
        remote: RemoteArgs,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Attach to something started another way: `--log PATH [--pid PID]` or a RUN_ID.
    Watch {
        #[command(flatten)]
        judge: JudgeArgs,
        /// A run id (or name) from `firedup run` / `firedup ps`.
        run_id: Option<String>,
        /// The log to follow (it may not exist yet).
        #[arg(long, value_name = "PATH")]
        log: Option<PathBuf>,
        /// The process to watch.
        #[arg(long)]
        pid: Option<u32>,
        /// With --log: judge only lines written from now on.
        #[arg(long = "from-end", conflicts_with = "from_start")]
        from_end: bool,
        /// With --log: judge what the log already holds too. Without either flag, a log that
        /// already holds something is refused unless it predates the watched process.
        #[arg(long = "from-start")]
        from_start: bool,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Stop a run: SIGTERM to its group and to every process carrying its FIREDUP_RUN_ID,
    /// grace, SIGKILL, then verify nothing of it is left.
    Stop {
        /// A run id or name.
        run_id: String,
        #[arg(long, value_name = "DURATION", default_value = "10s")]
        grace: String,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// List the server profiles; `profiles show NAME` prints one, `profiles check FILE` validates yours.
    Profiles {
        #[command(subcommand)]
        action: Option<ProfilesAction>,
        /// Also load this profile file (repeatable).
        #[arg(long = "profile-file", value_name = "FILE", global = true)]
        profile_file: Vec<PathBuf>,
    },
    /// List the live runs (`--all`: every run) and their state.
    Ps {
        #[arg(long)]
        json: bool,
        /// Every run in the state dir, ended ones too.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Print a run's log (its own part of an appended --log).
    Logs {
        /// A run id or name.
        run_id: String,
        /// Drop noise lines (blank lines, banners, repeated progress redraws).
        #[arg(long)]
        meaningful: bool,
        /// Keep printing new lines until the run ends.
        #[arg(long, short)]
        follow: bool,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Run the same launch under a grid of env vars, flags and arguments: every cell to a
    /// verdict, a bench on ready cells, verified teardown between cells, a grouped table.
    #[command(
        after_help = "Exit codes: 0 every run became ready (or succeeded), 1 some did not, 7 the matrix stopped on a machine left dirty (or firedup itself failed on a cell), 130 interrupted (Ctrl-C), 2 usage error. Worked example: docs/matrix.md."
    )]
    Matrix {
        #[command(flatten)]
        args: crate::matrix::args::MatrixArgs,
    },
    /// List earlier runs from the history (newest first), with filters.
    History {
        #[command(flatten)]
        args: crate::history_cmd::HistoryArgs,
    },
    /// Remove the run directories (logs included) of runs that ended long ago; never a live run.
    Prune {
        /// Remove runs that ended (or started, when their end is unknown) longer ago than this.
        #[arg(long = "older-than", value_name = "DURATION", default_value = "7d")]
        older_than: String,
        /// Say what would be removed, remove nothing.
        #[arg(long = "dry-run")]
        dry_run: bool,
    },
    /// Print one recorded run: its launch, verdict, decisive line, phase times and metrics.
    Show {
        /// A run id or name (or an unambiguous start of an id) from `firedup history`.
        run_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Two recorded runs side by side: what differs in the launch, phase times, metrics.
    Compare {
        run_a: String,
        run_b: String,
        #[arg(long)]
        json: bool,
    },
    #[command(name = "__supervise", hide = true)]
    Supervise { run_dir: PathBuf },
    /// The remote side of a watch over SSH (reads its spec on stdin).
    #[command(name = "__agent", hide = true)]
    Agent,
    #[command(name = "__remote-launch", hide = true)]
    RemoteLaunch,
    #[command(name = "__meta", hide = true)]
    Meta { run_id: String },
    #[command(name = "__cell-finish", hide = true)]
    CellFinish,
    #[command(name = "__cell-cancel", hide = true)]
    CellCancel { run_id: String },
    #[command(name = "__cell-before", hide = true)]
    CellBefore { port: Option<u16> },
    /// `stop` for the SSH host: the stop's report as JSON.
    #[command(name = "__stop", hide = true)]
    StopForHost { run_id: String, grace_ms: u64 },
}

/// Entry point: returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { USAGE_EXIT_CODE } else { 0 };
        }
    };
    // A reader that went away (`firedup history | head -1`) ends the command quietly, whichever
    // command it is: see `closed_pipe`.
    crate::closed_pipe::install();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dispatch(cli))) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) if crate::closed_pipe::is_closed_pipe_error(&e) => crate::closed_pipe::EXIT_CODE,
        Ok(Err(e)) => {
            let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            eprintln!("firedup: {}", chain.join(": "));
            USAGE_EXIT_CODE
        }
        Err(p) if crate::closed_pipe::is_closed_pipe_panic(p.as_ref()) => {
            crate::closed_pipe::EXIT_CODE
        }
        Err(p) => std::panic::resume_unwind(p),
    }
}

fn dispatch(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Run {
            judge,
            log,
            env,
            cwd,
            then,
            keep,
            notify,
            grace,
            name,
            remote,
            command,
        } => {
            if let Some(n) = &name {
                crate::rundir::check_name(n)?;
            }
            let args = crate::run_cmd::RunArgs {
                log,
                env,
                cwd,
                then,
                keep,
                notify,
                grace,
                name,
                command,
            };
            crate::run_cmd::run(remote.host()?, &judge, args)
        }
        Command::Watch {
            judge,
            run_id,
            log,
            pid,
            from_end,
            from_start,
            remote,
        } => crate::watch_cmd::watch(
            remote.host()?.as_ref(),
            &judge,
            run_id,
            log,
            pid,
            LogFrom {
                start: from_start,
                end: from_end,
            },
        ),
        Command::Stop {
            run_id,
            grace,
            remote,
        } => crate::runs_cmd::stop(remote.host()?.as_ref(), &run_id, &grace),
        Command::Ps { json, all, remote } => match remote.ssh_host()? {
            Some(host) => {
                let mut args = vec!["ps"];
                if json {
                    args.push("--json");
                }
                if all {
                    args.push("--all");
                }
                crate::runs_cmd::pass_through(&host, &args)
            }
            None => crate::runs_cmd::ps(json, all),
        },
        Command::Prune {
            older_than,
            dry_run,
        } => crate::prune::prune(&older_than, dry_run),
        Command::Profiles {
            action,
            profile_file,
        } => crate::profiles_cmd::profiles(action, &profile_file),
        Command::Logs {
            run_id,
            meaningful,
            follow,
            remote,
        } => match remote.ssh_host()? {
            Some(host) => {
                let mut args = vec!["logs", run_id.as_str()];
                if meaningful {
                    args.push("--meaningful");
                }
                if follow {
                    args.push("--follow");
                }
                crate::runs_cmd::pass_through(&host, &args)
            }
            None => crate::runs_cmd::logs(&run_id, meaningful, follow),
        },
        Command::Matrix { args } => crate::matrix::runner::matrix(&args),
        Command::History { args } => crate::history_cmd::history(&args),
        Command::Show { run_id, json } => crate::history_cmd::show(&run_id, json),
        Command::Compare { run_a, run_b, json } => {
            crate::history_cmd::compare(&run_a, &run_b, json)
        }
        Command::Supervise { run_dir } => crate::hidden_commands::supervise(&run_dir),
        Command::Agent => crate::hidden_commands::agent(),
        Command::RemoteLaunch => crate::hidden_commands::remote_launch(),
        Command::Meta { run_id } => crate::hidden_commands::meta(&run_id),
        Command::CellFinish => crate::matrix::host_side::cell_finish(),
        Command::CellCancel { run_id } => crate::matrix::host_side::cell_cancel(&run_id),
        Command::CellBefore { port } => crate::matrix::host_side::cell_before(port),
        Command::StopForHost { run_id, grace_ms } => {
            crate::matrix::host_side::stop_for_host(&run_id, grace_ms)
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
        Some(p) => Some(Box::new(std::fs::File::create(p).with_context(|| {
            format!("cannot create --events file {}", p.display())
        })?)),
    })
}
