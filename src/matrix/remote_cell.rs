//! A matrix cell on the matrix's SSH host: launched there like `firedup run --host` (the
//! supervisor, log and probes on the host), judged here from the agent's stream, then the bench
//! and the verified teardown run on the host (`firedup __cell-finish`), where the port, the
//! process tree and the GPU are.

use std::time::Duration;

use anyhow::Result;

use super::host_side::{BenchRequest, FinishAnswer, FinishRequest};
use super::runner::{Ctx, Finished, Prepared, Running, Shared, bench_timeout};
use super::teardown::Before;
use crate::engine::Target;
use crate::remote::HostSpec;
use crate::remote::commands::{Stream, agent_spec, judge_remote, launch_on, with_remote};
use crate::report::LastTime;
use crate::verdict::Verdict;

/// How long to keep reconnecting to the host during a cell before `monitor_error`.
const RECONNECT_FOR: Duration = Duration::from_secs(120);

/// Runs one cell on `host`.
pub(super) fn run(
    ctx: &Ctx<'_>,
    shared: &Shared,
    p: &Prepared,
    host: &str,
    slot: usize,
    last: Option<LastTime>,
) -> Result<Option<Finished>> {
    let hs = ctx
        .host
        .clone()
        .unwrap_or_else(|| HostSpec::new(host, Duration::from_secs(15)));
    let port = p.address.as_ref().map(|a| a.port);
    let request = serde_json::to_vec(&p.spec)?;
    let port_arg = port.map(|p| p.to_string());
    // The machine before the cell (port holders, GPU processes), then the launch: one connection.
    let launched = with_remote(&hs, |r| {
        Box::pin(async move {
            let mut args = vec!["__cell-before"];
            args.extend(port_arg.as_deref());
            let out = r.firedup(&args, None).await?;
            let before: Before = serde_json::from_str(out.stdout.trim())
                .map_err(|e| format!("{}: bad answer about the port and GPU: {e}", r.host))?;
            Ok((before, launch_on(r, &request).await?))
        })
    });
    let (before, launched) = match launched {
        Ok(x) => x,
        Err(reason) => {
            // The host could not be reached or used: firedup's own failure, named.
            anyhow::bail!("{reason}");
        }
    };
    shared.running(
        p.index,
        Running::Remote {
            run_id: launched.run_id.clone(),
        },
    );
    ctx.display.say(&format!(
        "{}: started {} on {host} (slot {slot})",
        p.label, launched.run_id
    ));
    // Ctrl-C may have come while it was being launched, before it could be stopped.
    if shared.cancel.load(std::sync::atomic::Ordering::SeqCst) {
        stop(&hs, &launched.run_id, ctx.grace);
    }
    let mut plan = crate::plan::resolve(&p.opts, &p.spec.command, &launched.log, true)?;
    plan.judge.probe_origin = format!("remote {host}");
    let hint = format!("firedup watch --host {host} {}", launched.run_id);
    let stream = Stream {
        host: &hs,
        reconnect_for: RECONNECT_FOR,
        label: &p.label,
        resume_hint: &hint,
        reached: true,
        last_time: None,
    };
    let mut progress = ctx.display.progress(&p.label, last);
    let j = judge_remote(
        &plan,
        &stream,
        agent_spec(&plan, Some(launched.run_id.clone()), None, None),
        &launched.log,
        progress.as_mut(),
        None,
    );
    progress.finish();
    let target = Target {
        log: launched.log.clone().into(),
        pid: launched.pid,
        run_id: launched.run_id.clone(),
        ..Default::default()
    };
    let mut outcome = crate::engine::outcome(j, &target);
    let verdict_at = crate::rundir::now_unix();
    outcome.host = Some(host.to_string());
    let cancelled = || shared.cancel.load(std::sync::atomic::Ordering::SeqCst);
    let bench = match (&p.bench, outcome.verdict == Verdict::Ready && !cancelled()) {
        (Some(cmd), true) => {
            ctx.display
                .say(&format!("{}: ready; running the bench on {host}", p.label));
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
    let finish = serde_json::to_vec(&FinishRequest {
        run_id: launched.run_id.clone(),
        bench,
        grace_ms: ctx.grace.as_millis() as u64,
        port,
        before,
    })?;
    let answer = with_remote(&hs, |r| {
        Box::pin(async move {
            let out = r.firedup(&["__cell-finish"], Some(&finish)).await?;
            if out.code != Some(0) {
                return Err(format!(
                    "{}: {}",
                    r.host,
                    out.stderr.trim().trim_start_matches("firedup: ")
                ));
            }
            serde_json::from_str::<FinishAnswer>(out.stdout.trim())
                .map_err(|e| format!("{}: bad answer from the teardown: {e}", r.host))
        })
    });
    let answer = match answer {
        Ok(a) => a,
        // Teardown could not be verified: the machine counts as dirty.
        Err(reason) => FinishAnswer {
            bench: None,
            teardown: super::teardown::TeardownCheck {
                clean: false,
                problems: vec![format!("teardown on {host} not verified: {reason}")],
                ..Default::default()
            },
        },
    };
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

/// Stops a cell's run on the host (Ctrl-C): its bench, if one runs, then the server, bounded by
/// the grace.
pub(super) fn stop(hs: &HostSpec, run_id: &str, grace: Duration) {
    let id = run_id.to_string();
    let g = format!("{}ms", grace.as_millis());
    let _ = with_remote(hs, |r| {
        Box::pin(async move {
            r.firedup(&["__cell-cancel", &id], None).await?;
            r.firedup(&["stop", &id, "--grace", &g], None).await
        })
    });
}
