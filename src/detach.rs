//! `firedup run --detach`: launch the command and leave at once, for an agent or a script that
//! cannot block for the whole start. Once the command has started, the run is printed (its id,
//! log and pid; under `--json` the JSON verdict's shape with `verdict` null) and firedup exits 0;
//! `firedup watch RUN_ID --for DURATION` then waits for the verdict in steps. A command that
//! could not start is its verdict, `never_started`, as `run` says it.

use std::sync::Arc;

use anyhow::Result;

use crate::launch::LaunchSpec;
use crate::verdict::{Outcome, Verdict};
use firedup::host::{Host, HostError};

/// Launches `spec` on `host` and prints the run.
pub fn detach(host: Arc<dyn Host>, spec: &LaunchSpec, json: bool) -> Result<i32> {
    let mut started = match host.launch(spec) {
        Ok(s) => s,
        Err(HostError::Unreachable(reason)) => {
            return Ok(crate::report::transport_verdict(json, host.name(), reason));
        }
        Err(HostError::Failed(e)) => return Err(e.into()),
    };
    started.reap();
    let t = &started.target;
    let log = t.log.display().to_string();
    if let Some(reason) = &t.spawn_error {
        let mut o =
            Outcome::without_watch(Verdict::NeverStarted, reason.clone(), &t.run_id, &log, None);
        o.host = host.name().map(String::from);
        o.name = spec.name.clone();
        crate::report::print_outcome(json, &o, None, None);
        return Ok(o.verdict.exit_code());
    }
    let on_host = host
        .name()
        .map(|h| format!(" --host {h}"))
        .unwrap_or_default();
    let address = crate::plan::resolve(&spec.judging, &spec.command, &log, true)
        .ok()
        .and_then(|p| p.address);
    if json {
        let mut o = Outcome::without_watch(
            Verdict::MonitorError,
            format!(
                "started and detached: `firedup watch{on_host} {} --for DURATION` waits for the verdict",
                t.run_id
            ),
            &t.run_id,
            &log,
            t.pid,
        );
        o.host = host.name().map(String::from);
        o.name = spec.name.clone();
        o.server_running = true;
        o.url = address.as_ref().map(|a| a.url_on(host.name()));
        o.port = address.as_ref().map(|a| a.port);
        let mut v = serde_json::to_value(&o)?;
        if let Some(map) = v.as_object_mut() {
            // No verdict yet: that is what `null` says (docs/contract.md, "Detached launches").
            map.insert("verdict".into(), serde_json::Value::Null);
        }
        println!("{v}");
    } else {
        let pid = t.pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        println!("firedup: started {}{pid}{on_host}, detached", t.run_id);
        println!("  log:     {log}");
        println!(
            "  next:    firedup watch{on_host} {} --for 60s   (the verdict, or `pending` with exit 75 while it starts)",
            t.run_id
        );
        println!("           firedup stop{on_host} {}", t.run_id);
    }
    Ok(0)
}
