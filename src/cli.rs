//! The command line: argument definitions and the dispatch to the commands. `run`
//! (`run_cmd.rs`), `watch` (`watch_cmd.rs`) and `stop` (`runs_cmd.rs`, with `ps` and `logs`) are
//! written once against a [`Host`]: this machine, or `--host` over SSH. Firedup's own failures
//! reach the user as one sentence and exit 2.

use std::path::PathBuf;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand};

use crate::duration::parse_duration;
use crate::judge_args::JudgeArgs;
use crate::profiles_cmd::ProfilesAction;
pub use crate::remote_args::RemoteArgs;
use crate::verdict::USAGE_EXIT_CODE;
use firedup::host::LogFrom;

#[derive(Debug, Parser)]
#[command(
    name = "firedup",
    version,
    about = "Launch or attach to a slow-starting server or job and end with one verdict that cannot be mistaken.",
    after_help = "Verdicts and exit codes: ready 0, succeeded 0, failed 1, usage error 2, exited 3, killed 4, never_started 5, stalled 6, timed_out 124, monitor_error 7; `watch --for` with no verdict yet: pending 75."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

const RUN_EXAMPLES: &str = "Examples:
  firedup run -- vllm serve Qwen/Qwen2.5-0.5B-Instruct --port 8000
  firedup run --until exit --timeout 2h -- torchrun --nproc-per-node 8 train.py
  firedup run --port auto --then ./e2e.sh -- sglang serve --model-path /models/qwen --port {port}";

const WATCH_EXAMPLES: &str = "Examples:
  firedup watch RUN_ID
  firedup watch --log server.log --pid 4242 --profile vllm
  firedup watch RUN_ID --for 30s --json";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Launch COMMAND (detached, output straight into its log) and watch it to a verdict.
    #[command(after_help = RUN_EXAMPLES)]
    Run {
        #[command(flatten)]
        judge: JudgeArgs,
        /// Log file to append the command's stdout and stderr to (default: in the run directory).
        #[arg(long, value_name = "PATH")]
        log: Option<PathBuf>,
        /// Environment variable for the command (repeatable). `--env KEY` alone passes KEY's value
        /// from firedup's own environment: a secret given so never shows in `ps`.
        #[arg(long = "env", value_name = "KEY[=VALUE]")]
        env: Vec<String>,
        /// Working directory of the command.
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// After ready, run CMD (sh -c), then stop the server. The exit code stays the verdict's
        /// (0); CMD's status is on the `then:` line and the JSON's `then.exit_code`. CMD's
        /// environment has FIREDUP_LOG, FIREDUP_RUN_ID, FIREDUP_PID and, for a server on this
        /// machine whose address is known, FIREDUP_HOST, FIREDUP_PORT and FIREDUP_URL.
        #[arg(long, value_name = "CMD")]
        then: Option<String>,
        /// Leave the server running whatever the verdict (also on Ctrl-C, which otherwise stops
        /// it and exits 130).
        #[arg(long)]
        keep: bool,
        /// Launch, print the run (id, log, pid; JSON with `verdict` null under --json) once the
        /// command has started, and exit 0 without watching: `firedup watch RUN_ID --for
        /// DURATION` waits for the verdict in steps.
        #[arg(long, conflicts_with_all = ["then", "notify"])]
        detach: bool,
        /// Give the command a NOTIFY_SOCKET (sd_notify) and count `READY=1` as a readiness
        /// condition; `STATUS=` is shown, `EXTEND_TIMEOUT_USEC=` moves the deadline.
        #[arg(long)]
        notify: bool,
        /// Grace between SIGTERM and SIGKILL when stopping the server.
        #[arg(long, value_name = "DURATION", default_value = "10s")]
        grace: String,
        /// Submit COMMAND as a Slurm batch job (`sbatch`) and watch it: its log, its state in the
        /// queue (the phase `queued`), how the scheduler ended it. A COMMAND that is a script
        /// with `#SBATCH` lines is submitted as it is; any other is wrapped in one. With --host,
        /// submitted and followed on that login node.
        #[arg(long)]
        slurm: bool,
        /// An argument for sbatch (repeatable), e.g. --sbatch-arg=--mem=16G --sbatch-arg=-N2.
        #[arg(
            long = "sbatch-arg",
            value_name = "ARG",
            requires = "slurm",
            allow_hyphen_values = true
        )]
        sbatch_arg: Vec<String>,
        /// A name for the run ([A-Za-z0-9._-], unique among live runs): `stop`, `logs`,
        /// `watch`, `show` and `compare` take it where a RUN_ID goes (the newest run of a name).
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// The process that owns the run: when it ends (however: SIGKILL included), the run is
        /// stopped and checked gone, also after `run` has exited (the run's supervisor watches
        /// it). Not with --host or --slurm.
        #[arg(long, value_name = "PID")]
        owner: Option<u32>,
        #[command(flatten)]
        remote: RemoteArgs,
        #[command(flatten)]
        group: crate::group_args::GroupArgs,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Attach to something started another way: `--log PATH [--pid PID]` or a RUN_ID.
    #[command(after_help = WATCH_EXAMPLES)]
    Watch {
        #[command(flatten)]
        judge: JudgeArgs,
        /// A run id (or name) from `firedup run` / `firedup ps`.
        run_id: Option<String>,
        /// The log to follow (it may not exist yet).
        #[arg(long, value_name = "PATH")]
        log: Option<PathBuf>,
        /// The process to watch (without --log: its log is the file its output goes to).
        #[arg(long)]
        pid: Option<u32>,
        /// A Slurm job submitted some other way (plain sbatch): follow its output file
        /// (StdOut=) and its state to a verdict (with --host, on that login node).
        #[arg(long = "slurm-job", value_name = "JOBID", conflicts_with_all = ["run_id", "log", "pid"])]
        slurm_job: Option<String>,
        /// With --log: judge only lines written from now on.
        #[arg(long = "from-end", conflicts_with = "from_start")]
        from_end: bool,
        /// With --log: judge what the log already holds too. Without either flag, a log that
        /// already holds something is refused unless it predates the watched process.
        #[arg(long = "from-start")]
        from_start: bool,
        /// Wait at most this long: with no verdict by then, report `pending` (exit 75) with the
        /// phase, the elapsed time and the ETA, and leave the server as it is.
        #[arg(long = "for", value_name = "DURATION")]
        for_: Option<String>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Stop a run: SIGTERM to its group and to every process carrying its FIREDUP_RUN_ID,
    /// grace, SIGKILL, then verify nothing of it is left. A Slurm run (`run --slurm`) is
    /// cancelled with scancel, then checked: its job ended, and none of its processes is left.
    Stop {
        /// A run id or name.
        run_id: String,
        /// Grace between SIGTERM and SIGKILL.
        #[arg(long, value_name = "DURATION", default_value = "10s")]
        grace: String,
        /// Print what the teardown found as one JSON object on stdout: the processes stopped,
        /// the survivors, whether the run's port is free and its GPU memory released.
        #[arg(long)]
        json: bool,
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
        /// The runs as one JSON array.
        #[arg(long)]
        json: bool,
        /// Every run in the state dir, ended ones too.
        #[arg(long)]
        all: bool,
        /// Every column, whole, whatever the terminal's width.
        #[arg(long)]
        wide: bool,
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
        after_help = "Exit codes: 0 every run became ready (or succeeded), 1 some did not, 7 the matrix stopped on a machine left dirty (or firedup itself failed on a cell), 130 interrupted (Ctrl-C; 143 SIGTERM, 129 SIGHUP), 2 usage error. Worked example: docs/matrix.md."
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
        /// The recorded run as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Two recorded runs side by side: what differs in the launch, phase times, metrics.
    Compare {
        /// The first run (id, name or unambiguous start of an id).
        run_a: String,
        /// The second run, compared with the first.
        run_b: String,
        /// The comparison as one JSON object.
        #[arg(long)]
        json: bool,
        /// Every column, whole, whatever the terminal's width.
        #[arg(long)]
        wide: bool,
    },
    /// Print a completion script for bash, zsh or fish (e.g. `firedup completions bash >
    /// ~/.local/share/bash-completion/completions/firedup`).
    Completions {
        /// The shell to write the script for.
        #[arg(value_enum)]
        shell: crate::generated_docs::CompletionShell,
    },
    /// Print the man page (roff): `firedup man | man -l -`, or save it as firedup.1.
    Man,
    #[command(name = "__supervise", hide = true)]
    Supervise {
        run_dir: PathBuf,
        /// The log file, opened by the launcher, on this descriptor.
        #[arg(long)]
        log_fd: Option<i32>,
    },
    /// The remote side of a watch over SSH (reads its spec on stdin).
    #[command(name = "__agent", hide = true)]
    Agent,
    #[command(name = "__remote-launch", hide = true)]
    RemoteLaunch,
    /// `run --slurm --host`: the login node submits (the request on stdin).
    #[command(name = "__slurm-submit", hide = true)]
    SlurmSubmit,
    /// `watch --slurm-job --host`: the login node says where the job writes.
    #[command(name = "__slurm-job", hide = true)]
    SlurmJob { job_id: String },
    #[command(name = "__meta", hide = true)]
    Meta { run_id: String },
    /// The verdict of a launch over SSH, recorded in its run directory here (JSON on stdin).
    #[command(name = "__record-verdict", hide = true)]
    RecordVerdict { run_id: String },
    #[command(name = "__cell-finish", hide = true)]
    CellFinish,
    #[command(name = "__cell-cancel", hide = true)]
    CellCancel { run_id: String },
    #[command(name = "__cell-before", hide = true)]
    CellBefore { port: Option<u16> },
    /// `stop` for the SSH host: the stop's report as JSON.
    #[command(name = "__stop", hide = true)]
    StopForHost { run_id: String, grace_ms: u64 },
    /// A multi-node run's `{master_port}`: a port free on this host.
    #[command(name = "__free-port", hide = true)]
    FreePort,
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
            detach,
            notify,
            grace,
            slurm,
            sbatch_arg,
            name,
            owner,
            remote,
            group,
            command,
        } => {
            if remote.host.len() > 1 {
                group.refuse_with((slurm, owner.is_some(), then.is_some()), detach, notify)?;
                let args = (log, env, cwd, keep, grace, name, command).into();
                return crate::group_cmd::run(&remote, &judge, &group, args);
            }
            group.refuse_single()?;
            if let Some(n) = &name {
                crate::rundir::check_name(n)?;
                if remote.host.is_empty() {
                    crate::group_names::refuse_a_live_groups(n)?;
                }
            }
            let elsewhere = remote.ssh_host()?.is_some();
            let owner = owner
                .map(|pid| firedup::rundir::Owner::for_launch(pid, slurm, elsewhere))
                .transpose()?;
            if slurm {
                if notify {
                    firedup::host::slurm::refuse_with("--notify")?;
                }
                if judge.auto_port() {
                    firedup::host::slurm::refuse_with("--port auto")?;
                }
            }
            let args = crate::run_cmd::RunArgs {
                log,
                env,
                cwd,
                then,
                keep,
                detach,
                notify,
                grace,
                name,
                owner,
                command,
            };
            let host = firedup::host::choose(remote.ssh_host()?, slurm.then_some(sbatch_arg));
            crate::run_cmd::run(host, &judge, args)
        }
        Command::Watch {
            judge,
            run_id,
            log,
            pid,
            slurm_job,
            from_end,
            from_start,
            for_,
            remote,
        } => {
            let job = match slurm_job {
                Some(id) => Some(crate::watch_cmd::JobToWatch {
                    id,
                    login: remote.ssh_host()?,
                }),
                None => None,
            };
            let bound = match for_ {
                Some(d) => Some(parse_duration(&d).map_err(|e| anyhow::anyhow!("--for: {e}"))?),
                None => None,
            };
            crate::watch_cmd::watch(
                remote.run_host(run_id.as_deref(), "watch")?,
                &judge,
                job,
                crate::watch_cmd::WatchArgs {
                    run_id,
                    log,
                    pid,
                    from: LogFrom {
                        start: from_start,
                        end: from_end,
                        wait_for_log: None,
                    },
                    bound,
                },
            )
        }
        Command::Stop {
            run_id,
            grace,
            json,
            remote,
        } => match crate::group_stop::is_group(&remote, &run_id) {
            true => crate::group_stop::stop(&remote, &run_id, &grace, json),
            false => crate::runs_cmd::stop(
                remote.run_host(Some(&run_id), "stop")?.as_ref(),
                &run_id,
                &grace,
                json,
            ),
        },
        Command::Ps {
            json,
            all,
            wide,
            remote,
        } => match remote.ssh_host()? {
            Some(host) => {
                let mut args = vec!["ps"];
                if json {
                    args.push("--json");
                }
                if all {
                    args.push("--all");
                }
                if wide {
                    args.push("--wide");
                }
                crate::runs_cmd::pass_through(&host, &args)
            }
            None => crate::runs_cmd::ps(json, all, wide, &remote),
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
        Command::Compare {
            run_a,
            run_b,
            json,
            wide,
        } => crate::history_cmd::compare(&run_a, &run_b, json, wide),
        Command::Completions { shell } => crate::generated_docs::completions(Cli::command(), shell),
        Command::Man => crate::generated_docs::man(Cli::command()),
        Command::Supervise { run_dir, log_fd } => {
            crate::hidden_commands::supervise(&run_dir, log_fd)
        }
        Command::Agent => crate::hidden_commands::agent(),
        Command::RemoteLaunch => crate::hidden_commands::remote_launch(),
        Command::Meta { run_id } => crate::hidden_commands::meta(&run_id),
        Command::RecordVerdict { run_id } => crate::hidden_commands::record_verdict(&run_id),
        Command::SlurmSubmit => crate::hidden_commands::slurm_submit(),
        Command::SlurmJob { job_id } => crate::hidden_commands::slurm_job(&job_id),
        Command::CellFinish => crate::matrix::host_side::cell_finish(),
        Command::CellCancel { run_id } => crate::matrix::host_side::cell_cancel(&run_id),
        Command::CellBefore { port } => crate::matrix::host_side::cell_before(port),
        Command::StopForHost { run_id, grace_ms } => {
            crate::matrix::host_side::stop_for_host(&run_id, grace_ms)
        }
        Command::FreePort => crate::group_cmd::free_port(),
    }
}
