//! The command line: argument definitions and the commands `run`, `watch`, `stop`, `ps`, `logs`.
//! Each command resolves a plan, calls the engine, and reports; firedup's own failures reach the
//! user as one sentence and exit 2.

use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::duration::{format_duration, parse_duration};
use crate::engine::{self, Target};
use crate::launch::{self, LaunchSpec};
use crate::plan::{self, WatchOptions};
use crate::process;
use crate::report;
use crate::rundir::RunDir;
use crate::stop::{StopReport, stop_run};
use crate::verdict::{Outcome, USAGE_EXIT_CODE, Verdict};

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

/// Options recorded at launch, with the flags given now taking precedence.
pub(crate) fn overlay(recorded: WatchOptions, now: WatchOptions) -> WatchOptions {
    fn vec_or<T>(now: Vec<T>, rec: Vec<T>) -> Vec<T> {
        if now.is_empty() { rec } else { now }
    }
    WatchOptions {
        until_exit: now.until_exit || recorded.until_exit,
        profile: now.profile.or(recorded.profile),
        ready_lines: vec_or(now.ready_lines, recorded.ready_lines),
        fail_lines: vec_or(now.fail_lines, recorded.fail_lines),
        timeout: now.timeout.or(recorded.timeout),
        stall: now.stall.or(recorded.stall),
        log_grace: now.log_grace.or(recorded.log_grace),
        hold: now.hold.or(recorded.hold),
        from_end: now.from_end,
        profile_files: vec_or(now.profile_files, recorded.profile_files),
        http: now.http.or(recorded.http),
        port: now.port.or(recorded.port),
        ready_request: now.ready_request.or(recorded.ready_request),
        // The sd_notify socket belonged to the launching firedup; it cannot be re-attached.
        notify: false,
        no_probe: now.no_probe || recorded.no_probe,
        phase_timeouts: vec_or(now.phase_timeouts, recorded.phase_timeouts),
        env: now.env,
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
        args: crate::matrix::runner::MatrixArgs,
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
}

#[derive(Debug, Subcommand)]
pub enum ProfilesAction {
    /// Print one profile's TOML.
    Show { name: String },
    /// Validate a profile file: every error names its line and field.
    Check { file: PathBuf },
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
            match remote.host.clone() {
                Some(host) => crate::remote::commands::run(
                    &judge, &remote, &host, log, &env, cwd, then, keep, notify, &grace, name,
                    command,
                ),
                None => run(
                    &judge, log, &env, cwd, then, keep, notify, &grace, name, command,
                ),
            }
        }
        Command::Watch {
            judge,
            run_id,
            log,
            pid,
            from_end,
            from_start,
            remote,
        } => match remote.host.clone() {
            Some(host) => {
                crate::remote::commands::watch(&judge, &remote, &host, run_id, log, pid, from_end)
            }
            None => watch(&judge, run_id, log, pid, from_start, from_end),
        },
        Command::Stop {
            run_id,
            grace,
            remote,
        } => match &remote.host {
            Some(host) => crate::remote::commands::passthrough(
                &remote,
                host,
                &["stop", &run_id, "--grace", &grace],
            ),
            None => stop(&run_id, &grace),
        },
        Command::Ps { json, all, remote } => match &remote.host {
            Some(host) => {
                let mut args = vec!["ps"];
                if json {
                    args.push("--json");
                }
                if all {
                    args.push("--all");
                }
                crate::remote::commands::passthrough(&remote, host, &args)
            }
            None => ps(json, all),
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
        } => match &remote.host {
            Some(host) => {
                let mut args = vec!["logs", run_id.as_str()];
                if meaningful {
                    args.push("--meaningful");
                }
                if follow {
                    args.push("--follow");
                }
                crate::remote::commands::passthrough(&remote, host, &args)
            }
            None => logs(&run_id, meaningful, follow),
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

#[allow(clippy::too_many_arguments)]
fn run(
    judge: &JudgeArgs,
    log: Option<PathBuf>,
    env: &[String],
    cwd: Option<PathBuf>,
    then: Option<String>,
    keep: bool,
    notify: bool,
    grace: &str,
    name: Option<String>,
    command: Vec<String>,
) -> Result<i32> {
    let grace = grace_flag(grace)?;
    let mut env: Vec<(String, String)> = env
        .iter()
        .map(|e| plan::parse_env(e))
        .collect::<Result<_, _>>()?;
    // Resolve once before launching, so usage mistakes launch nothing.
    let mut opts = judge.options(false);
    opts.notify = notify;
    opts.env = env.clone();
    // Validate first, create last: a refused run leaves no notify socket, run directory or
    // truncated --events file behind.
    launch::check_paths(&command, cwd.as_deref(), log.as_deref())?;
    let notify_socket = if notify {
        let sock = crate::probe::notify::NotifySocket::bind(&notify_socket_path()?)?;
        env.push(("NOTIFY_SOCKET".into(), sock.path.display().to_string()));
        Some(std::sync::Arc::new(sock))
    } else {
        None
    };
    let mut spec = launch_spec(judge, &opts, &command, cwd, env, log)?;
    spec.name = name;
    let spec_hash = crate::history::launch_hash(&spec, None);
    let mut events = open_events(&judge.events)?;
    // From the launch on, Ctrl-C, SIGTERM and SIGHUP end the run deliberately.
    let interrupts = crate::interrupt::install()?;
    let launched_at = std::time::Instant::now();
    let mut launched = launch::launch(&spec)?;
    let log_path = launched.log.display().to_string();
    let mut target = Target::from_launch(&launched);
    interrupts.arm(crate::interrupt::RunEnding {
        target: target.clone(),
        grace,
        keep,
        spec: spec.clone(),
        spec_hash: spec_hash.clone(),
        launched_at,
        outcome: None,
        then_child: None,
    });
    let plan = plan::resolve(&opts, &command, &log_path, true)?;
    target.notify = notify_socket;
    let mut progress =
        report::progress_for_stderr(&launched.run.id, crate::history::last_time(&spec_hash));
    let mut outcome = engine::watch(
        &plan,
        &target,
        progress.as_mut(),
        events.as_mut().map(|e| e.as_mut() as &mut dyn Write),
    )?;
    // Reap the supervisor if it is done (it stays alive as long as the server does).
    let _ = launched.supervisor.try_wait();

    let mut teardown: Option<String> = None;
    let mut exit_code = outcome.verdict.exit_code();
    if let (Verdict::Ready, Some(cmd)) = (outcome.verdict, then) {
        interrupts.update(|e| e.outcome = Some(outcome.clone()));
        let then_status = run_then(&cmd, &outcome, plan.address.as_ref(), &|pid| {
            interrupts.update(|e| e.then_child = Some(pid))
        });
        interrupts.finish();
        let report = stop_target(&target, grace);
        teardown = Some(report.describe());
        gpu_after_teardown(&mut outcome, &report);
        outcome.server_running = !report.survivors.is_empty();
        let status = match then_status {
            Ok(status) => status,
            Err(e) => {
                crate::history::record_launch(
                    "run",
                    &spec,
                    &spec_hash,
                    &outcome,
                    teardown.as_deref(),
                );
                bail!("{e:#}; the server was stopped: {}", report.describe());
            }
        };
        exit_code = status;
        print_outcome(
            judge.json,
            &outcome,
            teardown.as_deref(),
            Some((cmd.as_str(), status)),
        );
        // The verdict first: recording it must not delay what the user waits for.
        crate::history::record_launch("run", &spec, &spec_hash, &outcome, teardown.as_deref());
        return Ok(exit_code);
    }
    interrupts.finish();
    if outcome.verdict == Verdict::Ready {
        outcome.server_running = run_alive(&target);
    } else if keep {
        outcome.server_running = run_alive(&target);
        if outcome.server_running {
            teardown = Some("kept running (--keep)".into());
        }
    } else if outcome.verdict == Verdict::MonitorError {
        // firedup's own watch failed, so it cannot tell what the server is doing: stopping it
        // would end a healthy server on firedup's fault. It is left running for a later watch.
        outcome.server_running = run_alive(&target) || !process_tree_empty(&target);
        if outcome.server_running {
            teardown = Some(crate::report::left_running_after_monitor_error(
                &launched.run.id,
            ));
        }
    } else if run_alive(&target) || !process_tree_empty(&target) {
        let report = stop_target(&target, grace);
        teardown = Some(report.describe());
        gpu_after_teardown(&mut outcome, &report);
        outcome.server_running = !report.survivors.is_empty();
    } else {
        outcome.server_running = false;
    }
    print_outcome(judge.json, &outcome, teardown.as_deref(), None);
    // The verdict first: recording it must not delay what the user waits for.
    crate::history::record_launch("run", &spec, &spec_hash, &outcome, teardown.as_deref());
    Ok(exit_code)
}

/// What to launch, local or remote: resolved once first, so usage mistakes launch nothing.
pub(crate) fn launch_spec(
    judge: &JudgeArgs,
    opts: &WatchOptions,
    command: &[String],
    cwd: Option<PathBuf>,
    env: Vec<(String, String)>,
    log: Option<PathBuf>,
) -> Result<LaunchSpec> {
    let checked = plan::resolve(opts, command, "", true)?;
    Ok(LaunchSpec {
        command: command.to_vec(),
        cwd,
        env,
        log,
        profile: checked.profile,
        mode: if judge.until == Until::Exit {
            "exit".into()
        } else {
            "ready".into()
        },
        judging: opts.clone(),
        name: None,
    })
}

/// A short path for the sd_notify socket (sun_path holds 108 bytes; state dirs can be deep).
fn notify_socket_path() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "firedup-notify-{}-{}",
        std::process::id(),
        crate::rundir::now_unix() as u64
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("cannot create {} for the sd_notify socket", dir.display()))?;
    Ok(dir.join("notify.sock"))
}

/// How long teardown waits for the driver to release the GPU memory of the stopped processes
/// (nvidia-smi lists a process's memory for a moment after the process is gone).
const GPU_RELEASE_WAIT: Duration = Duration::from_secs(10);

/// GPU memory still held by the torn-down tree's processes, where nvidia-smi can tell: waits,
/// bounded, for it to be released, and reports what is left.
fn gpu_after_teardown(outcome: &mut Outcome, report: &StopReport) {
    let Some(gpu) = outcome.gpu.as_mut() else {
        return;
    };
    let deadline = std::time::Instant::now() + GPU_RELEASE_WAIT;
    loop {
        match crate::probe::gpu::tree_memory_mib(&report.targeted) {
            Ok(Some(mib)) => {
                gpu.after_teardown_mib = Some(mib);
                if mib == 0 || std::time::Instant::now() >= deadline {
                    return;
                }
            }
            _ => return,
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn process_tree_empty(target: &Target) -> bool {
    match target.pid {
        Some(p) => process::tree(p)
            .iter()
            .all(|x| !process::is_alive(*x, None)),
        None => true,
    }
}

/// Whether anything of the run lives: the launched process, or any process carrying the run's
/// `FIREDUP_RUN_ID` (a daemon it left), its supervisor aside.
pub(crate) fn run_alive(target: &Target) -> bool {
    target
        .pid
        .is_some_and(|p| process::is_alive(p, target.start_ticks))
        || process::of_run(&target.run_id)
            .pids
            .iter()
            .any(|p| !process::is_supervisor(*p))
}

/// Stops everything of the run and checks that nothing is left (see [`stop_run`]).
fn stop_target(target: &Target, grace: Duration) -> StopReport {
    stop_run(target.pid, target.start_ticks, &target.run_id, grace)
}

/// Runs the `--then` command (`sh -c CMD`) to its end; `started` hears its pid.
pub(crate) fn run_then(
    cmd: &str,
    o: &Outcome,
    address: Option<&crate::profile::Address>,
    started: &dyn Fn(u32),
) -> Result<i32> {
    let mut c = std::process::Command::new("sh");
    c.arg("-c")
        .arg(cmd)
        .env("FIREDUP_LOG", &o.log)
        .env("FIREDUP_RUN_ID", &o.run_id);
    if let Some(a) = address {
        c.env("FIREDUP_HOST", a.connect_host())
            .env("FIREDUP_PORT", a.port.to_string())
            .env("FIREDUP_URL", a.base_url());
    }
    if let Some(pid) = o.pid {
        c.env("FIREDUP_PID", pid.to_string());
    }
    let mut child = c.spawn().map_err(|e| {
        anyhow::anyhow!(
            "cannot run --then command '{cmd}': {}",
            launch::describe_spawn_error("sh", &e)
        )
    })?;
    started(child.id());
    let status = child
        .wait()
        .with_context(|| format!("cannot wait for --then command '{cmd}'"))?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

pub(crate) fn print_outcome(
    json: bool,
    o: &Outcome,
    teardown: Option<&str>,
    then: Option<(&str, i32)>,
) {
    if json {
        let mut v = serde_json::to_value(o).unwrap_or_default();
        if let (Some((cmd, code)), Some(map)) = (then, v.as_object_mut()) {
            map.insert(
                "then".into(),
                serde_json::json!({"command": crate::secrets::redact_text(cmd), "exit_code": code}),
            );
        }
        println!("{v}");
    } else {
        print!("{}", report::render_final(o, teardown));
        if let Some((cmd, code)) = then {
            println!(
                "  then:    '{}' exited {code}",
                crate::secrets::redact_text(cmd)
            );
        }
    }
}

fn watch(
    judge: &JudgeArgs,
    run_id: Option<String>,
    log: Option<PathBuf>,
    pid: Option<u32>,
    from_start: bool,
    mut from_end: bool,
) -> Result<i32> {
    if run_id.is_some() && (from_start || from_end) {
        bail!(
            "--from-start and --from-end go with --log: a RUN_ID is judged from where its launch began"
        );
    }
    let mut target = match (&run_id, &log) {
        (Some(id), None) => {
            let run = RunDir::open(id)?;
            let meta = run.meta()?;
            let proc_rec = run.process();
            let spawn_error = run.exit().and_then(|e| e.spawn_error);
            Target {
                log_start: meta.log_start,
                log: PathBuf::from(&meta.log),
                pid: proc_rec.map(|p| p.pid).or(pid),
                start_ticks: proc_rec.map(|p| p.start_ticks).filter(|t| *t != 0),
                run: Some(run.clone()),
                spawn_error,
                run_id: run.id.clone(),
                notify: None,
                exit_pipe: None,
            }
        }
        (None, Some(log)) => {
            let log = plan::absolute(log);
            crate::logpath::check_for_reading(&log)?;
            // Attached by log alone: the process writing it, if any, is the one to watch.
            let pid = pid.or_else(|| {
                let w = process::writers_of(&log).into_iter().next()?;
                eprintln!(
                    "firedup: watching process {w} ({}), which writes {}",
                    crate::secrets::redact_text(&process::cmdline(w)),
                    log.display()
                );
                Some(w)
            });
            Target {
                log,
                pid,
                start_ticks: pid.and_then(|p| process::stat(p).map(|s| s.start_ticks)),
                run: None,
                spawn_error: None,
                run_id: String::new(),
                notify: None,
                exit_pipe: None,
                log_start: None,
            }
        }
        (Some(_), Some(_)) => bail!("give either a RUN_ID or --log PATH, not both"),
        (None, None) => {
            bail!("nothing to watch: give a RUN_ID or --log PATH (with --pid PID if you know it)")
        }
    };
    if let Some(p) = pid {
        if target.run.is_none() && process::stat(p).is_none() {
            eprintln!("firedup: note: process {p} is not running now");
        }
    }
    if target.run.is_none() {
        let started = target.pid.and_then(crate::logstart::process_started_unix);
        let (end, note) =
            crate::logstart::attach_from_end(&target.log, started, from_start, from_end)?;
        if let Some(note) = note {
            eprintln!("firedup: note: {note}");
        }
        from_end = end;
    }
    // A run that has ended is judged by how it ended: a ready line it printed before crashing
    // is not its present state. Holding after ready makes the recorded exit (and the fatal
    // lines before it) decide. A launcher that exited 0 leaving its daemon serving has not ended.
    let ended = target.run.as_ref().is_some_and(|r| !r.is_live());
    let command: Vec<String> = match &target.run {
        Some(r) => r.meta().map(|m| m.command).unwrap_or_default(),
        None => pid
            .map(|p| process::cmdline(p).split(' ').map(String::from).collect())
            .unwrap_or_default(),
    };
    if target.run.is_none() {
        // An attach by log is a run of its own in the history, which `show` finds by this id.
        let named_after = if command.is_empty() {
            let stem = target.log.file_stem().unwrap_or_default();
            vec![stem.to_string_lossy().into_owned()]
        } else {
            command.clone()
        };
        target.run_id = crate::rundir::fresh_id(&crate::rundir::id_stem(&named_after), 0);
    }
    let mut opts = judge.options(from_end);
    if let Some(m) = target.run.as_ref().and_then(|r| r.meta().ok()) {
        // Judge a run the way it was launched, unless told otherwise.
        if let Some(recorded) = m.options.clone() {
            opts = overlay(recorded, opts);
        }
        opts.profile = opts.profile.or(Some(m.profile));
        if opts.ready_lines.is_empty() {
            opts.ready_lines = m.ready_lines;
        }
        if opts.fail_lines.is_empty() {
            opts.fail_lines = m.fail_lines;
        }
        opts.stall = opts.stall.or(m.stall);
        opts.timeout = opts.timeout.or(m.timeout);
        if m.mode == "exit" {
            opts.until_exit = true;
        }
    }
    let mut plan = plan::resolve(
        &opts,
        &command,
        &target.log.display().to_string(),
        target.pid.is_some() || target.run.is_some(),
    )?;
    if ended && plan.judge.hold.is_none() {
        eprintln!(
            "firedup: note: {} is no longer running: judging how it ended",
            target.run_id
        );
        plan.judge.hold = Some(ENDED_RUN_HOLD);
    }
    // Validate first, open last: a refused watch truncates no --events file.
    let mut events = open_events(&judge.events)?;
    let label = if target.run.is_none() {
        format!("{} ({})", target.log.display(), target.run_id)
    } else {
        target.run_id.clone()
    };
    // A run firedup launched keeps its launch's history; an attach by log is its own spec.
    let launched_spec = target.run.as_ref().and_then(|r| r.meta().ok()).map(|m| {
        let spec = LaunchSpec::from_meta(&m, &plan.profile, &opts);
        let hash = crate::history::launch_hash(&spec, None);
        (spec, hash)
    });
    let spec_hash = match &launched_spec {
        Some((_, h)) => h.clone(),
        None => crate::history::attach_hash(&target.log, &command, Some(&plan.profile), None),
    };
    let mut progress = report::progress_for_stderr(&label, crate::history::last_time(&spec_hash));
    let mut outcome = engine::watch(
        &plan,
        &target,
        progress.as_mut(),
        events.as_mut().map(|e| e.as_mut() as &mut dyn Write),
    )?;
    outcome.attached = target.run.is_none();
    print_outcome(judge.json, &outcome, None, None);
    crate::history::record_watch(&launched_spec, spec_hash, &command, &plan.profile, &outcome);
    Ok(outcome.verdict.exit_code())
}

/// The hold given to the judge when re-attaching to a run that has already ended: longer than
/// anything the exit record can take to be read, so the exit always decides.
pub(crate) const ENDED_RUN_HOLD: Duration = Duration::from_secs(24 * 3600);

fn stop(run_id: &str, grace: &str) -> Result<i32> {
    let grace = grace_flag(grace)?;
    let run = RunDir::open(run_id)?;
    let record = run.process();
    // Also without a process record: whatever carries the run's id is the run's.
    let report = stop_run(
        record.map(|p| p.pid),
        record.map(|p| p.start_ticks),
        &run.id,
        grace,
    );
    if record.is_none() && report.targeted.is_empty() && report.survivors.is_empty() {
        println!("{run_id}: never started; {}", report.describe());
        return Ok(0);
    }
    // The supervisor records the exit a moment after the process ends: wait for it (bounded), so
    // that `firedup ps` right after a stop shows how the run ended.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while record.is_some() && run.exit().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    println!("{run_id}: {}", report.describe());
    Ok(if report.survivors.is_empty() { 0 } else { 1 })
}

/// A run's live state, in words.
pub fn run_state(run: &RunDir) -> String {
    if let Some(e) = run.exit() {
        return match (e.spawn_error, e.exit) {
            (Some(err), _) => format!("never started: {err}"),
            (None, Some(x)) if x.code == Some(0) && run.daemon().is_some() => format!(
                "running (daemon {}; the launcher exited 0)",
                run.daemon().unwrap_or_default()
            ),
            (None, Some(x)) => format!("ended: {}", x.describe()),
            _ => "ended".into(),
        };
    }
    match run.process() {
        Some(p) if process::is_alive(p.pid, Some(p.start_ticks).filter(|t| *t != 0)) => {
            "running".into()
        }
        Some(_) => "gone (no exit record)".into(),
        None => "unknown".into(),
    }
}

fn ps(json: bool, all: bool) -> Result<i32> {
    let runs: Vec<RunDir> = RunDir::list()
        .into_iter()
        .filter(|r| all || r.is_live())
        .collect();
    if json {
        let v: Vec<serde_json::Value> = runs
            .iter()
            .filter_map(|r| {
                let m = r.meta().ok()?;
                Some(serde_json::json!({
                    "run_id": r.id, "name": m.name, "state": run_state(r), "pid": r.process().map(|p| p.pid),
                    "command": crate::secrets::redact_args(&m.command), "log": m.log, "profile": m.profile, "started_at": m.started_at,
                }))
            })
            .collect();
        println!("{}", serde_json::Value::Array(v));
        return Ok(0);
    }
    if runs.is_empty() {
        let which = if all { "no runs" } else { "no live runs" };
        println!(
            "{which} under {}{}",
            crate::rundir::runs_root().display(),
            if all {
                ""
            } else {
                " (`firedup ps --all` lists ended ones too)"
            }
        );
        return Ok(0);
    }
    let now = crate::rundir::now_unix();
    println!(
        "{:<32} {:<16} {:>8} {:>8}  {:<28} COMMAND",
        "RUN", "NAME", "PID", "AGE", "STATE"
    );
    for r in runs {
        let Ok(m) = r.meta() else { continue };
        let pid = r
            .process()
            .map(|p| p.pid.to_string())
            .unwrap_or_else(|| "-".into());
        let age = format_duration(Duration::from_secs_f64((now - m.started_at).max(0.0)));
        println!(
            "{:<32} {:<16} {:>8} {:>8}  {:<28} {}",
            r.id,
            m.name.as_deref().unwrap_or("-"),
            pid,
            age,
            run_state(&r),
            crate::secrets::redact_args(&m.command).join(" ")
        );
    }
    Ok(0)
}

fn logs(run_id: &str, meaningful: bool, follow: bool) -> Result<i32> {
    let run = RunDir::open(run_id)?;
    let meta = run.meta()?;
    let plan = plan::resolve(
        &WatchOptions {
            until_exit: true,
            profile: Some(meta.profile.clone()),
            ..Default::default()
        },
        &meta.command,
        &meta.log,
        true,
    )
    .or_else(|_| {
        plan::resolve(
            &WatchOptions {
                until_exit: true,
                ..Default::default()
            },
            &meta.command,
            &meta.log,
            true,
        )
    })?;
    let mut follower = crate::follow::LogFollower::new(
        std::path::Path::new(&meta.log),
        crate::lines::DEFAULT_LINE_CAP,
    );
    // This run's output only: what an appended log held before the launch is another run's.
    if let Some(start) = meta.log_start {
        follower.start_at(&start);
    }
    let mut out = std::io::stdout().lock();
    let mut last_shape = String::new();
    let mut buf = Vec::new();
    loop {
        while follower.poll(&mut buf) {}
        let ended = run.exit().is_some()
            || !run
                .process()
                .is_some_and(|p| process::is_alive(p.pid, None));
        if ended || !follow {
            follower.finish(&mut buf);
        }
        for ev in buf.drain(..) {
            if let crate::follow::FollowEvent::Line(raw) = ev {
                if meaningful {
                    let text = crate::lines::clean_text(&raw.bytes);
                    if plan.classifier.classify(&text).noise || text.trim().is_empty() {
                        continue;
                    }
                    // A progress bar redraw of the same line: keep only the last state.
                    let shape = crate::line_shape::line_shape(&text);
                    if shape == last_shape {
                        continue;
                    }
                    last_shape = shape;
                    writeln!(out, "{text}")?;
                } else {
                    out.write_all(&raw.bytes)?;
                    out.write_all(b"\n")?;
                }
            }
        }
        out.flush()?;
        if !follow || ended {
            return Ok(0);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
