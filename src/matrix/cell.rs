//! One run of one matrix cell, written once for every host: the machine before it, the launch,
//! the watch to a verdict (as `run`), then the bench and the verified teardown on the cell's
//! [`Host`] (this machine, or the matrix's SSH host, where the port, the process tree and the
//! GPU are), and the record in the history. A cell's failure is a result, never an abort.

use crate::judge::Mode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Result;

use super::context::Ctx;
use super::table::RunResult;
use super::{Cell, Matrix};
use crate::duration::parse_duration;
use crate::history::{CellRef, RunRecord};
use crate::launch::LaunchSpec;
use crate::plan::{self, WatchOptions};
use crate::report::LastTime;
use crate::verdict::Verdict;
use firedup::host::{BenchRequest, FinishRequest, TeardownCheck, bench};
use firedup::session::interrupts::OnSignal;
use firedup::session::{Session, Watched};

const DEFAULT_BENCH_TIMEOUT: Duration = Duration::from_secs(600);

/// The judging options of every cell.
fn watch_options(m: &Matrix, l: &super::CellLaunch) -> WatchOptions {
    let b = &m.base;
    WatchOptions {
        until_exit: b.until.as_deref().and_then(Mode::from_name) == Some(Mode::UntilExit),
        profile: b.profile.clone(),
        ready_lines: b.ready_lines.clone(),
        fail_lines: b.fail_lines.clone(),
        timeout: b.timeout.clone(),
        stall: b.stall.clone(),
        log_grace: None,
        hold: b.hold.clone(),
        from_end: false,
        profile_files: b.profile_files.clone(),
        http: l.probes.http.clone(),
        port: l.probes.port,
        ready_request: l.probes.ready_request.clone(),
        notify: false,
        no_probe: b.no_probe,
        phase_timeouts: b.phase_timeouts.clone(),
        queue_timeout: None,
        env: l.env.clone(),
    }
}

/// The launch spec of `cell` in `slot`, checked (profile, readiness) before anything launches.
pub(super) fn cell_spec(
    m: &Matrix,
    cell: &Cell,
    slot: usize,
) -> Result<(LaunchSpec, WatchOptions, Option<String>)> {
    let l = m.launch_of(cell, slot)?;
    let opts = watch_options(m, &l);
    let checked = plan::resolve(&opts, &l.command, "", true)?;
    let spec = LaunchSpec {
        command: l.command,
        cwd: l.cwd,
        env: l.env,
        log: None,
        profile: checked.profile,
        mode: if opts.until_exit {
            Mode::UntilExit
        } else {
            Mode::UntilReady
        },
        judging: opts.clone(),
        name: None,
        owner: None,
        grace_ms: None,
    };
    Ok((spec, opts, l.bench))
}

/// One run of one cell, ready to launch.
pub(super) struct Prepared {
    pub spec: LaunchSpec,
    pub bench: Option<String>,
    pub address: Option<crate::profile::Address>,
    pub label: String,
}

/// How one run of a cell ended.
pub(super) enum CellRun {
    /// It reached its verdict and was recorded.
    Done(RunResult),
    /// Ctrl-C came first: torn down (with what teardown found, when it got that far), not
    /// recorded, so `--resume` runs it again.
    Interrupted(Option<TeardownCheck>),
}

/// What running a cell found, before it is recorded.
pub(super) struct Finished {
    pub outcome: crate::verdict::Outcome,
    /// Unix time of the verdict (the bench and teardown come after).
    pub verdict_at: f64,
    pub bench: Option<bench::BenchResult>,
    pub teardown: TeardownCheck,
}

impl Prepared {
    /// The env the bench runs with: the cell's, and where to find the server.
    pub fn bench_env(&self, outcome: &crate::verdict::Outcome) -> Vec<(String, String)> {
        let mut env = self.spec.env.clone();
        env.push(("FIREDUP_LOG".into(), outcome.log.clone()));
        env.push(("FIREDUP_RUN_ID".into(), outcome.run_id.clone()));
        if let Some(pid) = outcome.pid {
            env.push(("FIREDUP_PID".into(), pid.to_string()));
        }
        if let Some(a) = &self.address {
            env.push(("FIREDUP_HOST".into(), a.connect_host().to_string()));
            env.push(("FIREDUP_PORT".into(), a.port.to_string()));
            env.push(("FIREDUP_URL".into(), a.base_url()));
        }
        env
    }
}

/// The bench's time limit.
pub(super) fn bench_timeout(m: &Matrix) -> Duration {
    match m.bench.as_ref().and_then(|b| b.timeout.as_ref()) {
        Some(t) => parse_duration(t).unwrap_or(DEFAULT_BENCH_TIMEOUT),
        None => DEFAULT_BENCH_TIMEOUT,
    }
}

/// Launches, watches, benches and tears down one run of one cell, here or on the matrix's host,
/// and records it.
pub(super) fn run_cell(
    ctx: &Ctx<'_>,
    cancel: &AtomicBool,
    index: usize,
    slot: usize,
    repeat: u32,
) -> Result<CellRun> {
    let m = ctx.m;
    let cell = &m.cells[index];
    let (spec, opts, bench_cmd) = cell_spec(m, cell, slot)?;
    let host = m.base.host.as_deref();
    let hash = crate::history::launch_hash(&spec, host);
    let address = plan::resolve(&opts, &spec.command, "", true)?.address;
    let mut label = format!("cell {}/{} {}", index + 1, m.cells.len(), cell.label);
    if m.repeat > 1 {
        label.push_str(&format!(" (run {}/{})", repeat + 1, m.repeat));
    }
    if cancel.load(Ordering::SeqCst) {
        return Ok(CellRun::Interrupted(None));
    }
    let prepared = Prepared {
        spec,
        bench: bench_cmd,
        address,
        label,
    };
    let last = crate::history::last_time(&hash);
    let finished = run_on_host(ctx, cancel, &prepared, slot, last)?;
    let Some(Finished {
        outcome,
        verdict_at,
        bench,
        teardown: check,
    }) = finished
    else {
        return Ok(CellRun::Interrupted(None));
    };
    if cancel.load(Ordering::SeqCst) {
        return Ok(CellRun::Interrupted(Some(check)));
    }
    let metrics = bench
        .as_ref()
        .map(|b| b.metrics.clone())
        .unwrap_or_default();
    let summary = check.summary();
    let mut record = RunRecord::new(
        "matrix",
        hash,
        &prepared.spec.command,
        &prepared.spec.env,
        Some(prepared.spec.profile.clone()),
        &outcome,
    );
    record.metrics = metrics.clone();
    record.teardown = Some(summary.clone());
    record.ended_at = verdict_at;
    record.started_at = verdict_at - outcome.elapsed_s;
    record.cell = Some(CellRef {
        matrix_id: ctx.matrix_id.to_string(),
        key: cell.key.clone(),
        label: cell.label.clone(),
        repeat,
    });
    crate::history::record_quietly(&record);
    Ok(CellRun::Done(RunResult {
        run_id: outcome.run_id.clone(),
        verdict: outcome.verdict,
        signature: outcome.signature,
        phase: outcome.phase.clone(),
        ready_s: outcome.ready_s,
        elapsed_s: outcome.elapsed_s,
        line: outcome.line.as_ref().map(|l| l.text.clone()),
        metrics,
        bench_problem: bench.as_ref().and_then(|b| b.problem()),
        teardown: summary,
        clean: check.clean,
        resumed: false,
        job: outcome.job.as_ref().map(|j| j.id.clone()),
    }))
}

/// A run of a cell on the matrix's host (this machine or over SSH) as a session: the machine
/// before it, the launch, the watch to a verdict (as `run`), then the bench and the verified
/// teardown, both on the host, where the port, the process tree and the GPU are.
fn run_on_host(
    ctx: &Ctx<'_>,
    cancel: &AtomicBool,
    p: &Prepared,
    slot: usize,
    last: Option<LastTime>,
) -> Result<Option<Finished>> {
    let host = ctx.host.as_ref();
    let on_host = host.name().map(|h| format!(" on {h}")).unwrap_or_default();
    let port = p.address.as_ref().map(|a| a.port);
    // A listener already on the port, or a GPU process already running, is not the cell's
    // doing: teardown does not blame it on the cell (a taken port is the cell's finding,
    // port_in_use).
    let before = host.before_cell(port)?;
    let mut key = None;
    // A signal during the launch waits for its run to be registered.
    let launching = ctx.interrupts.launching();
    let launched = Session::launch(Arc::clone(&ctx.host), &p.spec, &mut |target| {
        key = Some(ctx.interrupts.register(
            Arc::clone(&ctx.host),
            target,
            ctx.grace,
            OnSignal::Cancel,
        ));
    });
    drop(launching);
    let mut session = launched?;
    let target = session.target().clone();
    ctx.display.say(&format!(
        "{}: started {}{on_host} (slot {slot})",
        p.label, target.run_id
    ));
    // The signal handler may have looked for running cells before this one registered.
    if cancel.load(Ordering::SeqCst) {
        host.cancel(&target, ctx.grace);
    }
    let mut progress = ctx.display.progress(&p.label, last);
    let Watched::Verdict(outcome) = session.watch(progress.as_mut(), None, None) else {
        unreachable!("an unbounded watch ends with a verdict");
    };
    let mut outcome = *outcome;
    // Issue 23 (item 8): the verdict in the run directory, for a later `watch RUN_ID`.
    session.record_verdict(&outcome);
    let verdict_at = crate::rundir::now_unix();
    progress.finish();
    let bench = match (&p.bench, outcome.verdict == Verdict::Ready) {
        (Some(cmd), true) if !cancel.load(Ordering::SeqCst) => {
            ctx.display
                .say(&format!("{}: ready; running the bench{on_host}", p.label));
            Some(BenchRequest {
                command: cmd.clone(),
                env: p.bench_env(&outcome),
                timeout_ms: bench_timeout(ctx.m).as_millis() as u64,
                metrics: ctx
                    .m
                    .metrics
                    .iter()
                    .map(|(n, r)| (n.clone(), r.as_str().to_string()))
                    .collect(),
            })
        }
        _ => None,
    };
    let finish = FinishRequest {
        run_id: target.run_id.clone(),
        bench,
        grace_ms: ctx.grace.as_millis() as u64,
        port,
        before,
    };
    // The cell's own end: the bench, then the verified teardown (a signal from here on is the
    // teardown's business: it sees `cancel`).
    let answer = host.finish_cell(&finish, cancel);
    if let Some(k) = key {
        ctx.interrupts.unregister(k);
    }
    if let Some(g) = outcome.gpu.as_mut() {
        g.after_teardown_mib = answer.teardown.gpu_after_mib;
    }
    outcome.server_running = !answer.teardown.clean;
    Ok(Some(Finished {
        outcome,
        verdict_at,
        bench: answer.bench,
        teardown: answer.teardown,
    }))
}
