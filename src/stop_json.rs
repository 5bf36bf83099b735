//! `firedup stop --json`: what the teardown found, as one JSON object on stdout, for a script or a
//! test fixture that must know the run is gone before it goes on (docs/contract.md, "stop
//! --json"):
//!
//! `run_id`, `clean` (nothing of the run is left), `never_started`, `stopped` (the pids that were
//! running when the stop began), `escalated` (SIGKILL was needed), `survivors` (`{pid,
//! command}`), `escaped` (processes found by `FIREDUP_RUN_ID` outside the tree), `port` (the
//! run's port, when its launch tells it), `port_free` (no process listens on it any more; null
//! when the port is unknown or on another host), `port_holders` (pids still listening there),
//! `gpu_after_mib` (GPU memory the stopped processes still hold; null without nvidia-smi or on
//! another host), `gpu_released` (`gpu_after_mib` is 0; null when unknown), `took_s`, `job` (a
//! Slurm run's cancel) and `description` (the sentence `firedup stop` prints).

use serde_json::{Value, json};

use firedup::host::RunStop;

/// What the teardown found about the machine besides the processes (`None`: not known here).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Leftovers {
    pub port: Option<u16>,
    /// Pids still listening on `port` after the stop (`None`: not checked).
    pub port_holders: Option<Vec<u32>>,
    pub gpu_after_mib: Option<u64>,
}

/// The port a recorded run was launched on: its `--port` (the picked one for `--port auto`), else
/// its `--http` URL's or its profile's address from the command's flags.
pub(crate) fn recorded_port(run_id: &str) -> Option<u16> {
    let meta = crate::rundir::RunDir::open(run_id).ok()?.meta().ok()?;
    let mut opts = meta.options.clone().unwrap_or_default();
    if let Some(p) = opts.port {
        return Some(p);
    }
    opts.profile = opts.profile.or(Some(meta.profile.clone()));
    opts.env = meta.env.clone();
    crate::plan::resolve(&opts, &meta.command, &meta.log, true)
        .ok()?
        .address
        .map(|a| a.port)
}

/// The JSON object for a stop of `run_id`.
pub(crate) fn stop_json(run_id: &str, stop: &RunStop, left: &Leftovers) -> Value {
    let r = &stop.report;
    let survivors: Vec<Value> = r
        .survivors
        .iter()
        .map(|(pid, command)| json!({"pid": pid, "command": command}))
        .collect();
    json!({
        "run_id": run_id,
        "clean": stop.clean(),
        "never_started": stop.never_started,
        "stopped": r.targeted,
        "escalated": r.escalated,
        "survivors": survivors,
        "escaped": r.swept.map(|s| s.escaped),
        "port": left.port,
        "port_free": left.port_holders.as_ref().map(Vec::is_empty),
        "port_holders": left.port_holders,
        "gpu_after_mib": left.gpu_after_mib,
        "gpu_released": left.gpu_after_mib.map(|m| m == 0),
        "took_s": (r.took.as_secs_f64() * 1000.0).round() / 1000.0,
        "job": r.job,
        "description": stop.describe(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use firedup::{StopReport, SweepNote};
    use std::time::Duration;

    fn stop(targeted: Vec<u32>, survivors: Vec<(u32, String)>) -> RunStop {
        RunStop {
            report: StopReport {
                targeted,
                escalated: false,
                survivors,
                took: Duration::from_millis(1234),
                swept: Some(SweepNote::default()),
                job: None,
            },
            never_started: false,
        }
    }

    #[test]
    fn the_object_says_what_was_found() {
        let known = Leftovers {
            port: Some(8080),
            port_holders: Some(vec![]),
            gpu_after_mib: Some(0),
        };
        let held = Leftovers {
            port: Some(8080),
            port_holders: Some(vec![42]),
            gpu_after_mib: Some(512),
        };
        let table = [
            // (stop, leftovers, clean, port_free, gpu_released)
            (
                stop(vec![1, 2], vec![]),
                known.clone(),
                true,
                json!(true),
                json!(true),
            ),
            (
                stop(vec![1], vec![(1, "srv".into())]),
                held,
                false,
                json!(false),
                json!(false),
            ),
            (
                stop(vec![], vec![]),
                Leftovers::default(),
                true,
                Value::Null,
                Value::Null,
            ),
        ];
        for (s, left, clean, port_free, gpu_released) in table {
            let v = stop_json("demo-1", &s, &left);
            assert_eq!(v["run_id"], "demo-1");
            assert_eq!(v["clean"], clean, "{v}");
            assert_eq!(v["port_free"], port_free, "{v}");
            assert_eq!(v["gpu_released"], gpu_released, "{v}");
            assert_eq!(v["stopped"], json!(s.report.targeted));
            assert_eq!(
                v["survivors"].as_array().map(Vec::len),
                Some(s.report.survivors.len())
            );
            assert_eq!(v["took_s"], 1.234);
            assert_eq!(v["description"], s.describe());
        }
    }
}
