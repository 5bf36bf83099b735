//! The prober: runs the readiness probes (port, HTTP, real request) and samples GPU memory on a
//! thread of its own, and sends what it finds as observations. Each readiness probe of this
//! machine checks who holds the listener: the watched tree, or a process of the run
//! (`process::of_run`: never another user's that sets the run's `FIREDUP_RUN_ID`;
//! `probe::owner`, `probe::tcp`).
//!
//! Probes block (each has a hard timeout), so they never run on the engine's thread, where they
//! would delay reading the log. The real request is only sent once the health probe answers (it
//! is the expensive one), and once it has returned tokens it is not sent again. The thread stops
//! at the engine's stop flag, or when the engine's channel is gone.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::judge::Observation;
use crate::plan::ProbePlan;
use crate::probe::tcp::Ours;
use crate::probe::{self, ProbeKind, ProbeOutcome};
use crate::process;

/// How often the readiness probes run while waiting.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_millis(250);
/// How often GPU memory is sampled (nvidia-smi takes tens of milliseconds).
pub(crate) const GPU_INTERVAL: Duration = Duration::from_secs(2);

/// Starts the prober. `watched` is the pid whose tree owns the server's port (0: none); it
/// changes when the launcher daemonizes. `send` returns false once nobody listens any more.
pub(crate) fn spawn(
    plan: ProbePlan,
    watched: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
    send: impl Fn(Observation) -> bool + Send + 'static,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || run(&plan, &watched, &stop, &send))
}

fn run(
    plan: &ProbePlan,
    watched: &AtomicU32,
    stop: &AtomicBool,
    send: &dyn Fn(Observation) -> bool,
) {
    let mut next_gpu = Instant::now();
    let mut gpu_on = plan.gpu;
    let mut http_up = false;
    let mut request_up = false;
    // Run records keep the command with its `--api-key` redacted: a later watch of a run (here
    // or on the host) reads the key from the live server's own arguments.
    let request_key = plan.request_key.clone().or_else(|| {
        plan.request.as_ref()?;
        crate::profile::flag_value(
            &process::argv(Some(watched.load(Ordering::Relaxed)).filter(|p| *p != 0)?),
            &["--api-key".to_string()],
        )
    });
    let probe = |kind: ProbeKind, outcome: ProbeOutcome| send(Observation::Probe { kind, outcome });
    while !stop.load(Ordering::Relaxed) {
        let round = Instant::now();
        // The tree is only needed by the owner checks of the probes and the GPU sample: building
        // it reads every /proc/PID/stat, so not on rounds that need neither.
        let gpu_due = gpu_on && Instant::now() >= next_gpu;
        let pid = Some(watched.load(Ordering::Relaxed)).filter(|p| *p != 0);
        let owner_checked = plan.port.is_some() || plan.http.is_some() || plan.request.is_some();
        let tree: Option<Vec<u32>> = if owner_checked || gpu_due {
            pid.map(process::tree)
        } else {
            None
        };
        let ours = tree.as_deref().map(|tree| Ours {
            tree,
            run_id: plan.run_id.as_deref(),
        });
        if let Some((host, port)) = &plan.port {
            // Where the run's server really listens (`::1` when told 127.0.0.1, say).
            let host = ours
                .as_ref()
                .and_then(|o| probe::listen_address::relocated_host(host, *port, o))
                .unwrap_or_else(|| host.clone());
            let o = probe::tcp::probe(&host, *port, ours.as_ref(), probe::PROBE_TIMEOUT);
            if !probe(ProbeKind::Port, o) {
                return;
            }
        }
        let at = |url: &String| {
            ours.as_ref()
                .and_then(|o| probe::listen_address::relocated_url(url, o))
                .unwrap_or_else(|| url.clone())
        };
        if let Some(url) = plan.http.as_ref().map(at) {
            let o = probe::owner::guarded(&url, ours.as_ref(), || {
                probe::http::probe(&url, probe::PROBE_TIMEOUT)
            });
            http_up = o.is_up();
            if !probe(ProbeKind::Http, o) {
                return;
            }
        }
        if let Some((base, kind)) = &plan.request {
            if !request_up && (plan.http.is_none() || http_up) {
                let base = at(base);
                let o = probe::owner::guarded(&base, ours.as_ref(), || {
                    probe::request::probe_with_key(
                        &base,
                        *kind,
                        probe::REQUEST_TIMEOUT,
                        request_key.as_deref(),
                    )
                });
                request_up = o.is_up();
                if !probe(ProbeKind::Request, o) {
                    return;
                }
            }
        }
        if gpu_due {
            next_gpu = Instant::now() + GPU_INTERVAL;
            let pids = tree.clone().unwrap_or_default();
            let obs = match probe::gpu::tree_memory_mib(&pids) {
                Ok(Some(mib)) => Some(Observation::GpuMemory(mib)),
                Ok(None) => {
                    gpu_on = false; // no nvidia-smi here
                    None
                }
                Err(e) => {
                    gpu_on = false; // a broken nvidia-smi is reported once, not every 2 s
                    Some(Observation::GpuError(e))
                }
            };
            if let Some(o) = obs {
                if !send(o) {
                    return;
                }
            }
        }
        // The engine sets `stop` at the verdict and drops its channel, so at worst one more round
        // runs after the verdict and its `send` fails.
        // With no readiness probe, only the next GPU sample is due; with neither, nothing is.
        let wake = if plan.port.is_none() && plan.http.is_none() && plan.request.is_none() {
            if !gpu_on {
                return;
            }
            next_gpu
        } else {
            round + PROBE_INTERVAL
        };
        std::thread::sleep(wake.saturating_duration_since(Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_nothing_to_probe_the_prober_ends_instead_of_spinning() {
        if crate::probe::gpu::tree_memory_mib(&[])
            .ok()
            .flatten()
            .is_some()
        {
            return; // a machine with nvidia-smi keeps sampling GPU memory, by design
        }
        let plan = ProbePlan {
            gpu: true,
            ..Default::default()
        };
        let handle = spawn(
            plan,
            Arc::new(AtomicU32::new(std::process::id())),
            Arc::new(AtomicBool::new(false)),
            |_| true,
        );
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = handle.join();
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(Duration::from_secs(10)).is_ok(),
            "the prober kept running with nothing to probe"
        );
    }
}
