//! `firedup run`: launch a command on a [`Host`] (this machine or `--host` over SSH), watch it
//! to a verdict, and end the run as the verdict says: leave a ready server running, stop a
//! failed one and verify its teardown, run `--then`, keep it with `--keep`. Written once for
//! every host; the host launches, observes and stops, this command decides and reports.

use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};

use crate::engine;
use crate::judge_args::{JudgeArgs, grace_flag, open_events};
use crate::launch::{self, LaunchSpec};
use crate::plan::{self, WatchOptions};
use crate::report;
use crate::verdict::{Outcome, Verdict};
use firedup::host::{Host, HostError, RunStop};

/// The flags of `firedup run` besides the judging ones.
#[derive(Debug)]
pub(crate) struct RunArgs {
    pub log: Option<PathBuf>,
    pub env: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub then: Option<String>,
    pub keep: bool,
    pub notify: bool,
    pub grace: String,
    pub name: Option<String>,
    pub command: Vec<String>,
}

/// `firedup run [--host HOST] ... -- COMMAND`.
pub(crate) fn run(host: Arc<dyn Host>, judge: &JudgeArgs, mut a: RunArgs) -> Result<i32> {
    if a.notify && host.name().is_some() {
        bail!(
            "--notify is not supported with --host yet: the sd_notify socket would be on the other machine"
        );
    }
    let grace = grace_flag(&a.grace)?;
    let mut env: Vec<(String, String)> = a
        .env
        .iter()
        .map(|e| plan::parse_env(e))
        .collect::<Result<_, _>>()?;
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
    let mut spec = launch_spec(judge, &opts, &a.command, a.cwd, env, a.log)?;
    spec.name = a.name;
    let spec_hash = crate::history::launch_hash(&spec, host.name());
    let mut events = open_events(&judge.events)?;
    // From the launch on, Ctrl-C, SIGTERM and SIGHUP end the run deliberately.
    let interrupts = crate::interrupt::install()?;
    let launched_at = std::time::Instant::now();
    let mut started = match host.launch(&spec) {
        Ok(s) => s,
        Err(HostError::Unreachable(reason)) => {
            return Ok(transport_verdict(judge.json, host.name(), reason));
        }
        Err(HostError::Failed(e)) => return Err(e.into()),
    };
    let mut target = started.target.clone();
    interrupts.arm(crate::interrupt::RunEnding {
        host: Arc::clone(&host),
        target: target.clone(),
        grace,
        keep: a.keep,
        spec: spec.clone(),
        spec_hash: spec_hash.clone(),
        launched_at,
        outcome: None,
        then_child: None,
    });
    let mut plan = plan::resolve(
        &opts,
        &a.command,
        &target.log.display().to_string(),
        host.watches_process(),
    )?;
    if let Some(h) = host.name() {
        plan.judge.probe_origin = format!("remote {h}");
    }
    target.notify = notify_socket;
    let mut progress =
        report::progress_for_stderr(&target.run_id, crate::history::last_time(&spec_hash));
    let judgement = {
        let mut source = host.source(&plan, &target, false);
        engine::judge_loop(
            &plan,
            &target.log,
            source.as_mut(),
            progress.as_mut(),
            events.as_mut().map(|e| e.as_mut() as &mut dyn Write),
        )
    };
    let mut outcome = engine::outcome(judgement, &plan, &target);
    outcome.host = host.name().map(String::from);
    outcome.name = spec.name.clone();
    // Issue 23 (item 8): the verdict in the run directory, for a later `watch RUN_ID`.
    host.record_verdict(&target, &outcome);
    started.reap();

    let mut teardown: Option<String> = None;
    let mut exit_code = outcome.verdict.exit_code();
    if let (Verdict::Ready, Some(cmd)) = (outcome.verdict, a.then) {
        interrupts.update(|e| e.outcome = Some(outcome.clone()));
        // The server's address is given to a --then running next to it; one on another host is
        // reached by the --then's own means.
        let address = plan.address.as_ref().filter(|_| host.name().is_none());
        let then_status = run_then(&cmd, &outcome, address, &|pid| {
            interrupts.update(|e| e.then_child = Some(pid))
        });
        interrupts.finish();
        let (stopped, stop) = stop_for_run(host.as_ref(), &target.run_id, grace);
        after_stop(host.as_ref(), &mut outcome, stop.as_ref());
        teardown = Some(stopped.clone());
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
    // A host that cannot tell from here whether the run lives goes by the judgement.
    if outcome.verdict == Verdict::Ready {
        outcome.server_running = host.alive(&target).unwrap_or(true);
    } else if a.keep {
        outcome.server_running = host.alive(&target).unwrap_or(outcome.server_running);
        if outcome.server_running {
            teardown = Some("kept running (--keep)".into());
        }
    } else if outcome.verdict == Verdict::MonitorError {
        // firedup's own watch failed, so it cannot tell what the server is doing: stopping it
        // would end a healthy server on firedup's fault. It is left running for a later watch.
        outcome.server_running = host.alive(&target).unwrap_or(outcome.pid.is_some());
        if outcome.server_running {
            teardown = Some(match host.name() {
                None => report::left_running_after_monitor_error(&target.run_id),
                Some(h) => format!(
                    "left running on {h}: firedup watch --host {h} {}",
                    target.run_id
                ),
            });
        }
    } else if host.alive(&target).unwrap_or(outcome.server_running) {
        let (stopped, stop) = stop_for_run(host.as_ref(), &target.run_id, grace);
        after_stop(host.as_ref(), &mut outcome, stop.as_ref());
        teardown = Some(stopped);
    } else {
        outcome.server_running = false;
    }
    print_outcome(judge.json, &outcome, teardown.as_deref(), None);
    // The verdict first: recording it must not delay what the user waits for.
    crate::history::record_launch("run", &spec, &spec_hash, &outcome, teardown.as_deref());
    Ok(exit_code)
}

/// Stops the run at the end of `run`: the teardown in words, and the stop when it was made.
fn stop_for_run(
    host: &dyn Host,
    run_id: &str,
    grace: std::time::Duration,
) -> (String, Option<RunStop>) {
    match (host.stop(run_id, grace), host.name()) {
        (Ok(s), None) => (s.report.describe(), Some(s)),
        (Ok(s), Some(h)) => (format!("stopped on {h}: {}", s.describe()), Some(s)),
        (Err(e), None) => (format!("stopping failed: {e:#}"), None),
        (Err(e), Some(h)) => (
            format!(
                "stopped on {h}, but stopping failed: {e:#}; stop it with: firedup stop --host {h} {run_id}"
            ),
            None,
        ),
    }
}

/// What a stop says about the server: whether anything survived, and the GPU memory its
/// processes still hold (where the host can tell). A stop that failed leaves it running.
fn after_stop(host: &dyn Host, outcome: &mut Outcome, stop: Option<&RunStop>) {
    let Some(stop) = stop else {
        outcome.server_running = true;
        return;
    };
    if let Some(gpu) = outcome.gpu.as_mut() {
        if let Some(mib) = host.gpu_after_stop(stop) {
            gpu.after_teardown_mib = Some(mib);
        }
    }
    outcome.server_running = !stop.clean();
}

/// A verdict reached before any watch could start: firedup could not reach or use the host.
pub(crate) fn transport_verdict(json: bool, host: Option<&str>, reason: String) -> i32 {
    let o = Outcome {
        attached: false,
        schema: crate::verdict::OUTCOME_SCHEMA,
        name: None,
        verdict: Verdict::MonitorError,
        signature: None,
        reason,
        line: None,
        context: Vec::new(),
        phase: None,
        elapsed_s: 0.0,
        exit: None,
        pid: None,
        log: String::new(),
        run_id: String::new(),
        timeline: Vec::new(),
        secondary: Vec::new(),
        server_running: false,
        probes: Vec::new(),
        request_gap_s: None,
        gpu: None,
        ready_s: None,
        host: host.map(String::from),
        log_from_line: None,
        rank: None,
        url: None,
        port: None,
        job: None,
    };
    print_outcome(json, &o, None, None);
    o.verdict.exit_code()
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
