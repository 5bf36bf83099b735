//! The commands about the runs on a host: `stop` (written once against a [`Host`]), and `ps`
//! and `logs` (here, or passed through to the firedup on `--host`).

use crate::fitted_table::{Fit, fitted, table_width};
use std::io::Write;
use std::time::Duration;

use anyhow::Result;

use crate::duration::format_duration;
use crate::plan::{self, WatchOptions};
use crate::process;
use crate::remote_args::RemoteArgs;
use crate::rundir::RunDir;
use crate::verdict::Verdict;
use firedup::host::{Host, HostError, SshHost};

use crate::judge_args::grace_flag;

/// `firedup stop [--host HOST] [--json] RUN_ID`: stops the run on its host and verifies nothing
/// of it is left (exit 1 when something survived); `--json` says what the teardown found
/// (`stop_json`).
pub(crate) fn stop(host: &dyn Host, run_id: &str, grace: &str, json: bool) -> Result<i32> {
    let grace = grace_flag(grace)?;
    // The port and the GPU are checked here only for a run on this machine.
    let here = host.name().is_none();
    let port = if json && here {
        crate::stop_json::recorded_port(run_id)
    } else {
        None
    };
    if !json {
        // A batch job here is cancelled through its scheduler, not signalled.
        let job = RunDir::open(run_id)
            .ok()
            .filter(|_| here)
            .and_then(|r| r.meta().ok())
            .and_then(|m| m.job)
            .map(|j| j.id);
        let line = crate::said_while_waiting::stopping_line(run_id, host.name(), grace, job);
        if let Some(line) = line {
            eprintln!("{line}");
        }
    }
    match host.stop(run_id, grace) {
        Ok(stopped) => {
            if json {
                let left = crate::stop_json::Leftovers {
                    port,
                    port_holders: port.map(crate::probe::tcp::listener_pids),
                    gpu_after_mib: if here {
                        host.gpu_after_stop(&stopped)
                    } else {
                        None
                    },
                };
                let id = RunDir::open(run_id).map_or_else(|_| run_id.to_string(), |r| r.id);
                println!("{}", crate::stop_json::stop_json(&id, &stopped, &left));
            } else {
                println!("{run_id}: {}", stopped.describe());
            }
            Ok(if stopped.clean() { 0 } else { 1 })
        }
        Err(HostError::Unreachable(reason)) => {
            eprintln!("firedup: {reason}");
            Ok(Verdict::MonitorError.exit_code())
        }
        Err(HostError::Failed(e)) => Err(e.into()),
    }
}

/// `ps` and `logs` with `--host`: the remote firedup answers; its output and exit code are passed
/// through.
pub(crate) fn pass_through(host: &SshHost, args: &[&str]) -> Result<i32> {
    match host.pass_through(args) {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("firedup: {e}");
            Ok(Verdict::MonitorError.exit_code())
        }
    }
}

/// A run's live state, in words.
fn run_state(run: &RunDir) -> String {
    if let Some(job) = run.meta().ok().and_then(|m| m.job) {
        return match firedup::slurm::Slurm.show_job(&job.id) {
            Ok(Some(info)) => format!("slurm job {}: {}", job.id, info.state),
            Ok(None) => match run.exit().and_then(|e| e.exit) {
                Some(x) => format!("slurm job {}: ended: {}", job.id, x.describe()),
                None => format!("slurm job {}: ended (no longer known)", job.id),
            },
            Err(e) => format!("slurm job {}: unknown ({e})", job.id),
        };
    }
    if let Some(e) = run.exit() {
        return match (e.spawn_error, e.exit) {
            (Some(err), _) => format!("never started: {err}"),
            (None, Some(x)) if x.code == Some(0) && run.daemon().is_some() => format!(
                "running (daemon {}; the launcher exited 0)",
                run.daemon().unwrap_or_default()
            ),
            (None, Some(x)) => match run.owner_gone() {
                Some(g) => format!("ended: owner {} gone: {}", g.owner, x.describe()),
                None => format!("ended: {}", x.describe()),
            },
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

/// Whether a run lives: its process, or for a batch job, what the scheduler says.
fn live(run: &RunDir) -> bool {
    match run.meta().ok().and_then(|m| m.job) {
        Some(job) => run.is_live() && firedup::slurm::job_active(&job.id),
        None => run.is_live(),
    }
}

/// `firedup ps`: the runs here, and the multi-node runs launched from here, one entry each
/// (`group_ps`).
pub(crate) fn ps(json: bool, all: bool, wide: bool, remote: &RemoteArgs) -> Result<i32> {
    let runs: Vec<RunDir> = RunDir::list()
        .into_iter()
        .filter(|r| all || live(r))
        .collect();
    let groups = crate::group_ps::groups(remote, all);
    if json {
        let mut v: Vec<serde_json::Value> = runs
            .iter()
            .filter_map(|r| {
                let m = r.meta().ok()?;
                Some(serde_json::json!({
                    "run_id": r.id, "name": m.name, "state": run_state(r), "job": m.job.as_ref().map(|j| j.id.clone()), "pid": r.process().map(|p| p.pid), "owner": m.owner.map(|o| o.pid),
                    "command": crate::secrets::redact_args(&m.command), "log": m.log, "profile": m.profile, "started_at": m.started_at,
                }))
            })
            .collect();
        v.extend(groups.iter().map(|g| g.json()));
        println!("{}", serde_json::Value::Array(v));
        return Ok(0);
    }
    if runs.is_empty() && groups.is_empty() {
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
    let mut rows = Vec::new();
    for r in runs {
        let Ok(m) = r.meta() else { continue };
        let pid = r
            .process()
            .map(|p| p.pid.to_string())
            .unwrap_or_else(|| "-".into());
        let owner = m.owner.map_or_else(|| "-".into(), |o| o.pid.to_string());
        let age = format_duration(Duration::from_secs_f64((now - m.started_at).max(0.0)));
        rows.push(vec![
            r.id.clone(),
            m.name.clone().unwrap_or_else(|| "-".into()),
            pid,
            owner,
            age,
            run_state(&r),
            crate::secrets::redact_args(&m.command).join(" "),
        ]);
    }
    for g in groups {
        let age = format_duration(Duration::from_secs_f64(
            (now - g.record.started_at).max(0.0),
        ));
        rows.push(vec![
            g.record.id.clone(),
            g.record.name.clone().unwrap_or_else(|| "-".into()),
            g.pids(),
            "-".into(),
            age,
            g.state.clone(),
            g.record.command.join(" "),
        ]);
    }
    let header = ["RUN", "NAME", "PID", "OWNER", "AGE", "STATE", "COMMAND"];
    let fit = Fit {
        whole: vec![0],
        elastic: Some(6),
        wide,
        ..Fit::default()
    };
    let header = header.into_iter().map(String::from).collect();
    println!("{}", fitted(header, rows, &fit, table_width()));
    Ok(0)
}

/// The most blank lines `logs` prints in a row (a log of a million empty lines is not useful as such).
const MAX_BLANK_RUN: u64 = 10_000;

pub(crate) fn logs(run_id: &str, meaningful: bool, follow: bool) -> Result<i32> {
    crate::run_elsewhere::check_here(run_id, "logs")?;
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
    // ... and what the next launch appended after it ended is the next run's.
    if let Some(end) = meta
        .log_file
        .and_then(|file| Some((file, run.log_part_end(&file)?)))
    {
        follower.end_at(end.0, end.1);
    }
    let mut out = std::io::stdout().lock();
    let mut last_shape = String::new();
    let mut buf = Vec::new();
    // The number of the last line printed without --meaningful (its newline is still to come).
    let mut printed_through: Option<u64> = None;
    // With --meaningful: the last segment of the line being read (number, text).
    let mut pending: Option<(u64, String)> = None;
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
                    // A line redrawn with `\r` (a progress bar) counts in its last state: its
                    // segments share a number, and the last one replaces the others.
                    if let Some((_, text)) = pending.take_if(|(n, _)| *n != raw.number) {
                        write_meaningful(&mut out, &text, &plan, &mut last_shape)?;
                    }
                    pending = Some((
                        raw.number,
                        crate::lines::clean_text(&raw.bytes).into_owned(),
                    ));
                } else {
                    // The log as it is, line for line: the blank lines the splitter does not
                    // emit are put back, and a line redrawn with `\r` stays one line, so the
                    // N-th line printed is the verdict's line N.
                    match printed_through {
                        Some(n) if raw.number == n => out.write_all(b"\r")?,
                        Some(n) => {
                            let blanks = raw.number.saturating_sub(n + 1).min(MAX_BLANK_RUN);
                            out.write_all(b"\n")?;
                            for _ in 0..blanks {
                                out.write_all(b"\n")?;
                            }
                        }
                        None => {}
                    }
                    out.write_all(&raw.bytes)?;
                    printed_through = Some(raw.number);
                }
            }
        }
        // Following, a redraw split across two reads may show one of its earlier states.
        if let Some((_, text)) = pending.take() {
            write_meaningful(&mut out, &text, &plan, &mut last_shape)?;
        }
        if (!follow || ended) && printed_through.is_some() {
            out.write_all(b"\n")?;
        }
        out.flush()?;
        if !follow || ended {
            return Ok(0);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Writes `text` for `logs --meaningful` unless it is noise, blank, or the same shape as the
/// line written before it (a progress bar redrawn on new lines).
fn write_meaningful(
    out: &mut impl Write,
    text: &str,
    plan: &plan::Plan,
    last_shape: &mut String,
) -> Result<()> {
    if plan.judge.classifier.classify(text).noise || text.trim().is_empty() {
        return Ok(());
    }
    let shape = crate::line_shape::line_shape(text);
    if shape == *last_shape {
        return Ok(());
    }
    *last_shape = shape;
    writeln!(out, "{text}")?;
    Ok(())
}
