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
//!
//! GPU memory is sampled on a timer ([`GPU_INTERVAL`]) and also at once when nudged (see
//! [`GpuNudge`]): a server that held 79 GiB and died between two timer samples would otherwise
//! report a peak of 0. The moment that decides, a line naming a failure, comes while the process
//! still holds its memory; its exit comes after the driver freed it. The readiness probes run at
//! once when nudged too ([`Nudged::Probes`]): a ready line that came before the prober saw
//! the server's listener is confirmed by the next round, which should not wait for its timer
//! (issue 28: up to [`PROBE_INTERVAL`] added to the ready verdict).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
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

/// The closest two GPU samples may be, nudges included (nvidia-smi is a process of its own).
const GPU_NUDGE_SPACING: Duration = Duration::from_millis(200);

/// Asks the prober for a GPU sample, or a round of the readiness probes, now rather than at its
/// next timer tick; nudges that come faster than one round is taken are one.
#[derive(Debug, Clone)]
pub(crate) struct GpuNudge(Sender<Nudged>);

/// What a nudge asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nudged {
    /// A GPU sample (spaced by [`GPU_NUDGE_SPACING`]), with the round it comes in.
    Gpu,
    /// The readiness probes, with no wait for the GPU's spacing.
    Probes,
}

impl GpuNudge {
    /// `what` now.
    pub(crate) fn ask(&self, what: Nudged) {
        let _ = self.0.send(what);
    }
}

/// Starts the prober. `watched` is the pid whose tree owns the server's port (0: none); it
/// changes when the launcher daemonizes. `send` returns false once nobody listens any more.
pub(crate) fn spawn(
    plan: ProbePlan,
    watched: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
    send: impl Fn(Observation) -> bool + Send + 'static,
) -> (std::thread::JoinHandle<()>, GpuNudge) {
    let gpu = GpuSampler {
        every: GPU_INTERVAL,
        sample: Box::new(|pids: &[u32]| probe::gpu::tree_memory_mib(pids)),
    };
    spawn_with(plan, gpu, watched, stop, send)
}

/// How GPU memory is sampled: `sample` (the tree's pids in, MiB out: `nvidia-smi`, or a stand-in
/// in tests) every `every`, and when nudged.
pub(crate) struct GpuSampler {
    pub every: Duration,
    #[allow(clippy::type_complexity)]
    pub sample: Box<dyn Fn(&[u32]) -> Result<Option<u64>, String> + Send>,
}

/// [`spawn`] with the GPU sampler given.
pub(crate) fn spawn_with(
    plan: ProbePlan,
    gpu: GpuSampler,
    watched: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
    send: impl Fn(Observation) -> bool + Send + 'static,
) -> (std::thread::JoinHandle<()>, GpuNudge) {
    let (tx, rx) = channel();
    let handle = std::thread::spawn(move || run(&plan, &gpu, &watched, &stop, &send, Some(rx)));
    (handle, GpuNudge(tx))
}

fn run(
    plan: &ProbePlan,
    gpu: &GpuSampler,
    watched: &AtomicU32,
    stop: &AtomicBool,
    send: &dyn Fn(Observation) -> bool,
    mut nudges: Option<Receiver<Nudged>>,
) {
    let mut next_gpu = Instant::now();
    let mut last_gpu: Option<Instant> = None;
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
                let key = request_key.as_deref();
                let o = probe::owner::with_secret(&base, ours.as_ref(), key, |key| {
                    probe::request::probe_with_key(&base, *kind, probe::REQUEST_TIMEOUT, key)
                });
                request_up = o.is_up();
                if !probe(ProbeKind::Request, o) {
                    return;
                }
            }
        }
        if gpu_due {
            last_gpu = Some(Instant::now());
            next_gpu = Instant::now() + gpu.every;
            let pids = tree.clone().unwrap_or_default();
            let obs = match (gpu.sample)(&pids) {
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
        let timeout = wake.saturating_duration_since(Instant::now());
        match nudges.as_ref().map(|n| n.recv_timeout(timeout)) {
            Some(Ok(first)) => {
                let mut gpu_asked = first == Nudged::Gpu;
                while let Some(n) = nudges.as_ref().and_then(|n| n.try_recv().ok()) {
                    gpu_asked |= n == Nudged::Gpu;
                }
                if gpu_on && gpu_asked {
                    let spaced = last_gpu.map_or(Instant::now(), |l| l + GPU_NUDGE_SPACING);
                    next_gpu = next_gpu.min(spaced.max(Instant::now()));
                    std::thread::sleep(next_gpu.saturating_duration_since(Instant::now()));
                }
            }
            Some(Err(RecvTimeoutError::Timeout)) => {}
            Some(Err(RecvTimeoutError::Disconnected)) => {
                nudges = None;
                std::thread::sleep(wake.saturating_duration_since(Instant::now()));
            }
            None => std::thread::sleep(timeout),
        }
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
        let (handle, _nudge) = spawn(
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

    /// Issue 26, class 9: with the timer's next sample an hour away, a nudge alone brings one;
    /// so does each later nudge.
    #[test]
    fn a_nudge_samples_gpu_memory_at_once() {
        let samples = Arc::new(AtomicU32::new(0));
        let counted = samples.clone();
        let gpu = GpuSampler {
            every: Duration::from_secs(3600),
            sample: Box::new(move |_: &[u32]| {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok(Some(79_000))
            }),
        };
        let plan = ProbePlan {
            gpu: true,
            ..Default::default()
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let (_handle, nudge) = spawn_with(
            plan,
            gpu,
            Arc::new(AtomicU32::new(std::process::id())),
            stop.clone(),
            move |o| tx.send(o).is_ok(),
        );
        let wait = Duration::from_secs(60);
        // The first sample comes at once, the timer's next in an hour.
        assert_eq!(rx.recv_timeout(wait), Ok(Observation::GpuMemory(79_000)));
        for _ in 0..20 {
            nudge.ask(Nudged::Gpu); // a burst (the lines of one traceback)
        }
        assert_eq!(rx.recv_timeout(wait), Ok(Observation::GpuMemory(79_000)));
        while rx.try_recv().is_ok() {} // the burst's last nudges may have made a second
        nudge.ask(Nudged::Gpu);
        assert_eq!(rx.recv_timeout(wait), Ok(Observation::GpuMemory(79_000)));
        stop.store(true, Ordering::SeqCst);
        nudge.ask(Nudged::Gpu);
        assert!(samples.load(Ordering::SeqCst) >= 3);
    }
}
