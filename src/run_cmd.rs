//! `firedup run`: launch a command on a [`Host`] (this machine, `--host` over SSH, Slurm) as a
//! [`Session`], watch it to a verdict, and end the run as the verdict says (the library's
//! [`EndPolicy::Run`]): leave a ready server running, stop a failed one and verify its teardown,
//! run `--then` and stop it after, keep it with `--keep`. `--detach` launches and leaves the
//! watching to a later `firedup watch RUN_ID` (`detach.rs`). This command parses and reports;
//! SIGINT, SIGTERM and SIGHUP end the run through the library's one handler (what is said and
//! recorded then: `interrupted.rs`).

use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};

use crate::judge_args::{JudgeArgs, grace_flag, open_events};
use crate::launch::LaunchSpec;
use crate::plan::{self, WatchOptions};
use crate::report;
use crate::report::{print_outcome, transport_verdict};
use crate::verdict::Verdict;
use firedup::host::{Host, HostError};
use firedup::session::interrupts::{AfterSignal, Interrupts, OnSignal};
use firedup::session::then::run_then;
use firedup::session::{EndPolicy, Session, Watched};

/// The flags of `firedup run` besides the judging ones.
#[derive(Debug)]
pub(crate) struct RunArgs {
    pub log: Option<PathBuf>,
    pub env: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub then: Option<String>,
    pub keep: bool,
    pub detach: bool,
    pub notify: bool,
    pub grace: String,
    pub name: Option<String>,
    pub owner: Option<firedup::rundir::Owner>,
    pub command: Vec<String>,
}

/// `firedup run [--host HOST] ... -- COMMAND`.
pub(crate) fn run(host: Arc<dyn Host>, judge: &JudgeArgs, mut a: RunArgs) -> Result<i32> {
    if a.notify && host.name().is_some() {
        bail!(
            "--notify is not supported with --host yet: the sd_notify socket would be on the other machine"
        );
    }
    if a.detach && (a.then.is_some() || a.notify || judge.events.is_some()) {
        bail!(
            "--detach leaves the watching to a later `firedup watch RUN_ID`: --then, --notify and --events need this firedup to stay; drop them or drop --detach"
        );
    }
    let grace = grace_flag(&a.grace)?;
    let mut env: Vec<(String, String)> = a
        .env
        .iter()
        .map(|e| plan::parse_env(e))
        .collect::<Result<_, _>>()?;
    // Known before anything is shown: the server may print them (also on another host).
    firedup::secrets::learn_launch(&env, &a.command);
    // Resolve once before launching, so usage mistakes launch nothing.
    let mut opts = judge.options(false);
    if judge.auto_port() {
        if let Some(h) = host.name() {
            bail!(
                "--port auto is not supported with --host yet: the port would be picked on this machine, not on {h}; give --port N"
            );
        }
        if !a
            .command
            .iter()
            .any(|x| x.contains(firedup::auto_port::PLACEHOLDER))
        {
            // Not an error: the server may read FIREDUP_PORT. One listening elsewhere never
            // becomes ready, so say why before the wait.
            eprintln!(
                "firedup: --port auto: COMMAND has no {{port}} argument; the server must listen on $FIREDUP_PORT"
            );
        }
        firedup::auto_port::apply(&mut a.command, &mut env, &mut opts)?;
    }
    opts.notify = a.notify;
    opts.env = env.clone();
    // Validate first, create last: a refused run leaves no notify socket, run directory or
    // truncated --events file behind.
    host.check_launch(&a.command, a.cwd.as_deref(), a.log.as_deref())?;
    let notify_socket = if a.notify {
        let sock = crate::probe::notify::NotifySocket::bind(&notify_socket_path()?)?;
        env.push(("NOTIFY_SOCKET".into(), sock.path.display().to_string()));
        Some(Arc::new(sock))
    } else {
        None
    };
    let mut spec = match launch_spec(judge, &opts, &a.command, a.cwd, env, a.log) {
        Ok(spec) => spec,
        // A command that does not exist (here, where it would run) is the first thing to fix:
        // say it before the flags.
        Err(e) => match crate::launch::missing_program(&a.command)
            .filter(|_| host.name().is_none() && host.watches_process())
        {
            Some(missing) => bail!("{missing}; also {e:#}"),
            None => return Err(e),
        },
    };
    spec.name = a.name;
    spec.owner = a.owner;
    spec.grace_ms = Some(grace.as_millis() as u64);
    if a.detach {
        return crate::detach::detach(host, &spec, judge.json);
    }
    let spec_hash = crate::history::launch_hash(&spec, host.name());
    let mut events = open_events(&judge.events)?;
    // From the launch on, Ctrl-C, SIGTERM and SIGHUP end the run deliberately.
    let ending = Arc::new(Mutex::new(crate::interrupted::RunContext {
        spec: spec.clone(),
        spec_hash: spec_hash.clone(),
        launched_at: std::time::Instant::now(),
        outcome: None,
    }));
    let interrupts = {
        let ending = Arc::clone(&ending);
        Interrupts::install(AfterSignal::Exit, move |heard| {
            crate::interrupted::report(&ending, &heard)
        })?
    };
    let on_signal = if a.keep {
        OnSignal::Keep
    } else {
        OnSignal::Stop
    };
    // A signal during the launch waits for its run to be registered, and ends it.
    let Some(launching) = interrupts.launching() else {
        // A signal came first: `finish` waits for its handler to exit the process.
        interrupts.finish();
        bail!("interrupted before the launch: nothing was started");
    };
    let launched = Session::launch(Arc::clone(&host), &spec, &mut |target| {
        interrupts.register(Arc::clone(&host), target, grace, on_signal);
    });
    drop(launching);
    // The watcher that would give the verdict is not the one the OOM killer picks in a cgroup it
    // shares with the server (a `--then` gets back the value this process was started with).
    firedup::oom_score::protect_own();
    let mut session = match launched {
        Ok(s) => s.with_grace(grace),
        Err(HostError::Unreachable(reason)) => {
            interrupts.finish();
            return Ok(transport_verdict(judge.json, host.name(), reason));
        }
        Err(HostError::Failed(e)) => {
            interrupts.finish();
            return Err(e.into());
        }
    };
    session.target_mut().notify = notify_socket;
    let run_id = session.target().run_id.clone();
    let mut progress = report::progress_for_stderr(&run_id, crate::history::last_time(&spec_hash));
    let watched = session.watch(
        progress.as_mut(),
        events.as_mut().map(|e| e.as_mut() as &mut dyn Write),
        None,
    );
    let Watched::Verdict(outcome) = watched else {
        unreachable!("an unbounded watch ends with a verdict");
    };
    let mut outcome = *outcome;
    outcome.name = spec.name.clone();
    // Issue 23 (item 8): the verdict in the run directory, for a later `watch RUN_ID`.
    session.record_verdict(&outcome);

    if let (Verdict::Ready, Some(cmd)) = (outcome.verdict, a.then) {
        if let Ok(mut e) = ending.lock() {
            e.outcome = Some(outcome.clone());
        }
        // The server's address is given to a --then running next to it; one on another host is
        // reached by the --then's own means.
        let address = session
            .plan()
            .address
            .clone()
            .filter(|_| host.name().is_none() && host.watches_process());
        let then_status = run_then(&cmd, &outcome, address.as_ref(), &|pid| {
            interrupts.then_child(Some(pid))
        });
        interrupts.finish();
        let teardown = session.end(&mut outcome, EndPolicy::Stop).teardown;
        let stopped = teardown.clone().unwrap_or_default();
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
                bail!("{e:#}; the server was stopped: {stopped}");
            }
        };
        print_outcome(
            judge.json,
            &outcome,
            teardown.as_deref(),
            Some((cmd.as_str(), status)),
        );
        // The verdict first: recording it must not delay what the user waits for.
        let in_flight = crate::history::hold_for_record();
        crate::front::verdict_given(outcome.verdict.exit_code());
        crate::history::record_launch("run", &spec, &spec_hash, &outcome, teardown.as_deref());
        drop(in_flight);
        // The exit code is the verdict's, as for every run (docs/contract.md): CMD's own status
        // is said on its `then:` line and in the JSON's `then`, never mistaken for a verdict's
        // code (`exit 3` would read as `exited`).
        return Ok(outcome.verdict.exit_code());
    }
    interrupts.finish();
    let teardown = session
        .end(&mut outcome, EndPolicy::Run { keep: a.keep })
        .teardown;
    print_outcome(judge.json, &outcome, teardown.as_deref(), None);
    // The verdict first: recording it must not delay what the user waits for. The caller is told
    // now (`src/front.rs`); readers of the history wait for the record held in flight.
    let in_flight = crate::history::hold_for_record();
    crate::front::verdict_given(outcome.verdict.exit_code());
    crate::history::record_launch("run", &spec, &spec_hash, &outcome, teardown.as_deref());
    drop(in_flight);
    // What a local session holds (the plan's compiled classifier above all) is freed by the
    // exit that follows, not piece by piece before it: 1.5 ms of the ready latency (issue 28).
    // The sd_notify socket's file is removed now, by its drop; another host's session is
    // dropped as usual (its connection's end is its own).
    if host.name().is_none() {
        drop(session.target_mut().notify.take());
        std::mem::forget(session);
    }
    Ok(outcome.verdict.exit_code())
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
        mode: judge.until.into(),
        judging: opts.clone(),
        name: None,
        owner: None,
        grace_ms: None,
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
