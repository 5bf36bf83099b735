//! `run`, `watch`, `stop`, `ps` and `logs` with `--host`: the same commands, with the server on
//! another machine. The judge runs here, on observations streamed by the agent there.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::HostSpec;
use super::session::{self, Remote};
use super::source::RemoteSource;
use crate::agent::RemoteLaunched;
use crate::cli::{
    JudgeArgs, RemoteArgs, launch_spec, open_events, overlay, print_outcome, run_then,
};
use crate::duration::parse_duration;
use crate::engine::{self, Target};
use crate::judge::Judgement;
use crate::plan::{self, Plan, WatchOptions};
use crate::report;
use crate::rundir::RunMeta;
use crate::verdict::{Outcome, Verdict};
use crate::wire::AgentSpec;

fn host_spec(ra: &RemoteArgs, host: &str) -> Result<(HostSpec, Duration)> {
    let connect = parse_duration(&ra.connect_timeout)
        .map_err(|e| anyhow::anyhow!("--connect-timeout: {e}"))?;
    let reconnect =
        parse_duration(&ra.reconnect_for).map_err(|e| anyhow::anyhow!("--reconnect-for: {e}"))?;
    Ok((HostSpec::new(host, connect), reconnect))
}

/// A verdict reached before any watch could start: firedup could not reach or use the host.
fn transport_verdict(json: bool, host: &str, reason: String) -> i32 {
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
        host: Some(host.to_string()),
        log_from_line: None,
    };
    print_outcome(json, &o, None, None);
    o.verdict.exit_code()
}

/// Runs `f` with an open connection to `host`, on a small runtime of its own.
pub(crate) fn with_remote<T>(
    host: &HostSpec,
    f: impl for<'a> FnOnce(
        &'a Remote,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<T, String>> + 'a>,
    >,
) -> Result<T, String> {
    let rt = session::runtime()?;
    rt.block_on(async {
        let remote = session::open(host).await?;
        let out = f(&remote).await;
        remote.close().await;
        out
    })
}

pub(crate) fn agent_spec(
    plan: &Plan,
    run_id: Option<String>,
    log: Option<PathBuf>,
    pid: Option<u32>,
) -> AgentSpec {
    AgentSpec {
        run_id,
        log,
        pid,
        line_cap: plan.line_cap,
        from_end: plan.from_end,
        resume: None,
        probes: plan.probes.clone(),
        sample_every_ms: engine::sample_interval(plan).as_millis() as u64,
        t0_unix: None,
    }
}

/// Launches the JSON [`crate::launch::LaunchSpec`] `request` on the host, under its supervisor.
pub(crate) async fn launch_on(r: &Remote, request: &[u8]) -> Result<RemoteLaunched, String> {
    let out = r.firedup(&["__remote-launch"], Some(request)).await?;
    if out.code != Some(0) {
        return Err(format!(
            "{}: launching failed: {}",
            r.host,
            out.stderr.trim().trim_start_matches("firedup: ")
        ));
    }
    serde_json::from_str::<RemoteLaunched>(out.stdout.trim())
        .map_err(|e| format!("{}: bad answer from the remote launch: {e}", r.host))
}

/// How one remote watch is streamed.
pub(crate) struct Stream<'a> {
    pub(crate) host: &'a HostSpec,
    pub(crate) reconnect_for: Duration,
    /// The run id or `host:log`, for the progress display.
    pub(crate) label: &'a str,
    /// The command that re-attaches later.
    pub(crate) resume_hint: &'a str,
    /// The host was already reached by this command.
    pub(crate) reached: bool,
    /// How the previous run of the same spec went, for the ETA.
    pub(crate) last_time: Option<crate::report::LastTime>,
}

pub(crate) fn judge_remote(
    plan: &Plan,
    s: &Stream,
    spec: AgentSpec,
    log: &str,
    progress: &mut dyn engine::Progress,
    events: Option<&mut dyn Write>,
) -> Judgement {
    let mut source = RemoteSource::start(
        s.host.clone(),
        spec,
        s.reconnect_for,
        s.resume_hint,
        s.reached,
    );
    engine::judge_loop(plan, Path::new(log), &mut source, progress, events)
}

/// `firedup run --host HOST ... -- COMMAND`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    judge: &JudgeArgs,
    ra: &RemoteArgs,
    host: &str,
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
    if notify {
        bail!(
            "--notify is not supported with --host yet: the sd_notify socket would be on the other machine"
        );
    }
    let (hs, reconnect_for) = host_spec(ra, host)?;
    crate::cli::grace_flag(grace)?;
    let env: Vec<(String, String)> = env
        .iter()
        .map(|e| plan::parse_env(e))
        .collect::<Result<_, _>>()?;
    let mut opts = judge.options(false);
    opts.env = env.clone();
    let mut spec = launch_spec(judge, &opts, &command, cwd, env, log)?;
    spec.name = name;
    let spec_hash = crate::history::launch_hash(&spec, Some(host));
    let mut events = open_events(&judge.events)?;
    let request = serde_json::to_vec(&spec).context("cannot encode the launch spec")?;
    let launched = with_remote(&hs, |r| {
        Box::pin(async move { launch_on(r, &request).await })
    });
    let launched = match launched {
        Ok(l) => l,
        Err(reason) => return Ok(transport_verdict(judge.json, host, reason)),
    };
    let mut plan = plan::resolve(&opts, &command, &launched.log, true)?;
    plan.judge.probe_origin = format!("remote {host}");
    let hint = format!("firedup watch --host {host} {}", launched.run_id);
    let agent = agent_spec(&plan, Some(launched.run_id.clone()), None, None);
    let stream = Stream {
        host: &hs,
        reconnect_for,
        label: &launched.run_id,
        resume_hint: &hint,
        reached: true,
        last_time: crate::history::last_time(&spec_hash),
    };
    let mut progress = report::progress_for_stderr(stream.label, stream.last_time.clone());
    let j = judge_remote(
        &plan,
        &stream,
        agent,
        &launched.log,
        progress.as_mut(),
        events.as_mut().map(|e| e.as_mut() as &mut dyn Write),
    );
    let target = Target {
        log: PathBuf::from(&launched.log),
        pid: launched.pid,
        run_id: launched.run_id.clone(),
        ..Default::default()
    };
    let mut outcome = engine::outcome(j, &target);
    outcome.host = Some(host.to_string());
    outcome.name = spec.name.clone();
    let stop_remote = |why: &str| -> String {
        let id = launched.run_id.clone();
        let grace = grace.to_string();
        match with_remote(&hs, |r| {
            Box::pin(async move { r.firedup(&["stop", &id, "--grace", &grace], None).await })
        }) {
            Ok(out) => format!(
                "{why}: {}",
                out.stdout
                    .trim()
                    .trim_start_matches(&format!("{}: ", launched.run_id))
            ),
            Err(e) => format!(
                "{why}, but stopping failed: {e}; stop it with: firedup stop --host {host} {}",
                launched.run_id
            ),
        }
    };
    let mut teardown = None;
    if outcome.verdict == Verdict::Ready {
        if let Some(cmd) = then {
            let status = run_then(&cmd, &outcome, None, &|_| {})?;
            teardown = Some(stop_remote(&format!("stopped on {host}")));
            outcome.server_running = false;
            print_outcome(
                judge.json,
                &outcome,
                teardown.as_deref(),
                Some((cmd.as_str(), status)),
            );
            // The verdict first: recording it must not delay what the user waits for.
            crate::history::record_launch("run", &spec, &spec_hash, &outcome, teardown.as_deref());
            return Ok(status);
        }
        outcome.server_running = true;
    } else if outcome.verdict == Verdict::MonitorError {
        // firedup could not see the server: it is not stopped, so a later watch can judge it.
        outcome.server_running = outcome.pid.is_some();
        teardown = Some(format!("left running on {host}: {hint}"));
    } else if keep {
        teardown = Some("kept running (--keep)".into());
    } else if outcome.server_running {
        teardown = Some(stop_remote(&format!("stopped on {host}")));
        outcome.server_running = false;
    }
    print_outcome(judge.json, &outcome, teardown.as_deref(), None);
    // The verdict first: recording it must not delay what the user waits for.
    crate::history::record_launch("run", &spec, &spec_hash, &outcome, teardown.as_deref());
    Ok(outcome.verdict.exit_code())
}

/// `firedup watch --host HOST (RUN_ID | --log PATH [--pid PID])`.
pub fn watch(
    judge: &JudgeArgs,
    ra: &RemoteArgs,
    host: &str,
    run_id: Option<String>,
    log: Option<PathBuf>,
    pid: Option<u32>,
    from_end: bool,
) -> Result<i32> {
    let (hs, reconnect_for) = host_spec(ra, host)?;
    let mut opts: WatchOptions = judge.options(from_end);
    let mut recorded_meta = None;
    let mut ended = false;
    let (spec_run, spec_log, command, log_shown, expect) = match (&run_id, &log) {
        (Some(id), None) => {
            let id2 = id.clone();
            let meta = with_remote(&hs, |r| {
                Box::pin(async move {
                    let out = r.firedup(&["__meta", &id2], None).await?;
                    if out.code != Some(0) {
                        return Err(format!(
                            "{}: {}",
                            r.host,
                            out.stderr.trim().trim_start_matches("firedup: ")
                        ));
                    }
                    let bad = |e: serde_json::Error| format!("{}: bad run record: {e}", r.host);
                    let v: serde_json::Value =
                        serde_json::from_str(out.stdout.trim()).map_err(bad)?;
                    let ended = v["ended"].as_bool().unwrap_or(false);
                    Ok((serde_json::from_value::<RunMeta>(v).map_err(bad)?, ended))
                })
            });
            let meta = match meta {
                Ok((m, has_ended)) => {
                    ended = has_ended;
                    m
                }
                Err(reason) => return Ok(transport_verdict(judge.json, host, reason)),
            };
            if let Some(recorded) = meta.options.clone() {
                opts = overlay(recorded, opts);
            }
            opts.profile = opts.profile.or(Some(meta.profile.clone()));
            if meta.mode == "exit" {
                opts.until_exit = true;
            }
            recorded_meta = Some(meta.clone());
            (
                Some(meta.run_id.clone()),
                None,
                meta.command.clone(),
                meta.log.clone(),
                true,
            )
        }
        (None, Some(l)) => {
            let shown = l.display().to_string();
            (None, Some(l.clone()), Vec::new(), shown, pid.is_some())
        }
        (Some(_), Some(_)) => bail!("give either a RUN_ID or --log PATH, not both"),
        (None, None) => {
            bail!("nothing to watch: give a RUN_ID or --log PATH (with --pid PID if you know it)")
        }
    };
    // A name given for RUN_ID is resolved on the host: the run's own id from here on. An attach
    // by log gets an id of its own, for the history.
    let run_id = recorded_meta.as_ref().map(|m| m.run_id.clone()).or(run_id);
    let attach_id = crate::rundir::fresh_id(
        &crate::rundir::id_stem(&[Path::new(&log_shown)
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()]),
        0,
    );
    let mut plan = plan::resolve(&opts, &command, &log_shown, expect)?;
    plan.judge.probe_origin = format!("remote {host}");
    // As locally: a run that has ended is judged by how it ended, not by a ready line it printed.
    if ended && plan.judge.hold.is_none() {
        eprintln!(
            "firedup: note: {label_id} on {host} is no longer running: judging how it ended",
            label_id = run_id.as_deref().unwrap_or_default()
        );
        plan.judge.hold = Some(crate::cli::ENDED_RUN_HOLD);
    }
    // Validate first, open last: a refused watch truncates no --events file.
    let mut events = open_events(&judge.events)?;
    let label = run_id
        .clone()
        .unwrap_or_else(|| format!("{host}:{log_shown}"));
    let hint = match &run_id {
        Some(id) => format!("firedup watch --host {host} {id}"),
        None => format!("firedup watch --host {host} --log {log_shown}"),
    };
    let name = recorded_meta.as_ref().and_then(|m| m.name.clone());
    let launched_spec = recorded_meta.map(|m| {
        let spec = crate::launch::LaunchSpec::from_meta(&m, &plan.profile, &opts);
        let hash = crate::history::launch_hash(&spec, Some(host));
        (spec, hash)
    });
    let spec_hash = match &launched_spec {
        Some((_, h)) => h.clone(),
        None => crate::history::attach_hash(
            Path::new(&log_shown),
            &command,
            Some(&plan.profile),
            Some(host),
        ),
    };
    let spec = agent_spec(&plan, spec_run, spec_log, pid);
    let stream = Stream {
        host: &hs,
        reconnect_for,
        label: &label,
        resume_hint: &hint,
        reached: run_id.is_some(),
        last_time: crate::history::last_time(&spec_hash),
    };
    let mut progress = report::progress_for_stderr(stream.label, stream.last_time.clone());
    let j = judge_remote(
        &plan,
        &stream,
        spec,
        &log_shown,
        progress.as_mut(),
        events.as_mut().map(|e| e.as_mut() as &mut dyn Write),
    );
    let attached = run_id.is_none();
    let target = Target {
        log: PathBuf::from(&log_shown),
        pid,
        run_id: run_id.unwrap_or(attach_id),
        ..Default::default()
    };
    let mut outcome = engine::outcome(j, &target);
    outcome.attached = attached;
    outcome.host = Some(host.to_string());
    outcome.name = name;
    print_outcome(judge.json, &outcome, None, None);
    crate::history::record_watch(&launched_spec, spec_hash, &command, &plan.profile, &outcome);
    Ok(outcome.verdict.exit_code())
}

/// `stop`, `ps` and `logs` with `--host`: the remote firedup answers; its output and exit code
/// are passed through.
pub fn passthrough(ra: &RemoteArgs, host: &str, args: &[&str]) -> Result<i32> {
    let (hs, _) = host_spec(ra, host)?;
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let out = with_remote(&hs, |r| {
        Box::pin(async move {
            let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
            let mut cmd = r.firedup_command(&refs);
            cmd.stdin(openssh::Stdio::null())
                .stdout(openssh::Stdio::inherit())
                .stderr(openssh::Stdio::inherit());
            let status = cmd.status().await.map_err(|e| format!("{}: {e}", r.host))?;
            Ok(status.code().unwrap_or(1))
        })
    });
    match out {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("firedup: {e}");
            Ok(crate::verdict::Verdict::MonitorError.exit_code())
        }
    }
}
