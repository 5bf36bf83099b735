//! [`LocalHost`]: this machine. Launching is [`crate::launch`] (the supervisor), observing is
//! `LocalObserver` (inotify, pidfd, the prober), stopping is `stop_run` (the tree and the run's
//! `FIREDUP_RUN_ID`, then a check that none is left) and a
//! matrix cell's teardown is [`teardown::teardown`]. The SSH host's remote side runs this same
//! code through the copied firedup's hidden commands.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::teardown::{self, Before, TeardownCheck};
use super::{
    Attached, FinishAnswer, FinishRequest, FoundRun, Host, HostError, LogFrom, RunStop, Started,
    bench,
};
use crate::judge::Observation;
use crate::launch::{self, LaunchSpec};
use crate::observe::{LocalObserver, ObserveSettings};
use crate::plan::Plan;
use crate::process;
use crate::rundir::RunDir;
use crate::rundir::stop_record::stop_recorded_run;
use crate::source::{Seen, Source, sample_interval};
use crate::target::Target;

/// This machine.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalHost;

/// Where a running bench's process group is written, in the run directory (`__cell-cancel`
/// reads it).
const BENCH_PGID: &str = "bench.pgid";

/// Runs a cell's bench next to its run (bench.log and the bench's process group in the run's
/// directory), bounded by its timeout; stopped early by `cancel`, or by `__cell-cancel`, which
/// kills the process group recorded here.
pub(super) fn run_bench(
    b: &super::BenchRequest,
    run: &RunDir,
    cancel: &AtomicBool,
) -> bench::BenchResult {
    // The regexes were checked when the matrix was read.
    let metrics: Vec<(String, regex::Regex)> = b
        .metrics
        .iter()
        .filter_map(|(n, r)| Some((n.clone(), regex::Regex::new(r).ok()?)))
        .collect();
    bench::run(
        &b.command,
        &b.env,
        &run.path.join("bench.log"),
        Duration::from_millis(b.timeout_ms),
        &metrics,
        cancel,
        Some(&run.path.join(BENCH_PGID)),
    )
}

/// How long `stop` waits for the supervisor to record the exit, so that `firedup ps` right after
/// a stop shows how the run ended.
const EXIT_RECORD_WAIT: Duration = Duration::from_secs(2);

/// How long a stop waits for the driver to release the GPU memory of the stopped processes
/// (nvidia-smi lists a process's memory for a moment after the process is gone).
const GPU_RELEASE_WAIT: Duration = Duration::from_secs(10);

impl Host for LocalHost {
    fn name(&self) -> Option<&str> {
        None
    }

    fn check_launch(
        &self,
        command: &[String],
        cwd: Option<&Path>,
        log: Option<&Path>,
    ) -> crate::error::Result<()> {
        launch::check_paths(command, cwd, log)?;
        Ok(())
    }

    fn launch(&self, spec: &LaunchSpec) -> Result<Started, HostError> {
        let launched = launch::launch(spec).map_err(HostError::failed)?;
        let target = Target::from_launch(&launched);
        Ok(Started {
            target,
            supervisor: Some(launched.supervisor),
        })
    }

    fn find_run(&self, id: &str) -> Result<FoundRun, HostError> {
        let run = RunDir::open(id).map_err(HostError::failed)?;
        let meta = run.meta().map_err(HostError::failed)?;
        let proc_rec = run.process();
        let target = Target {
            log_start: meta.log_start,
            log_file: meta.log_file,
            log: PathBuf::from(&meta.log),
            pid: proc_rec.map(|p| p.pid),
            start_ticks: proc_rec.map(|p| p.start_ticks).filter(|t| *t != 0),
            spawn_error: run.exit().and_then(|e| e.spawn_error),
            run_id: run.id.clone(),
            run: Some(run.clone()),
            notify: None,
            exit_pipe: None,
            // Found again after the launch: the watch's own baseline.
            oom_kills_before: None,
        };
        Ok(FoundRun {
            target,
            meta,
            ended: !run.is_live(),
            records: super::RunRecords::of(&run),
        })
    }

    fn attach_log(
        &self,
        log: &Path,
        pid: Option<u32>,
        from: LogFrom,
        note: &mut dyn FnMut(String),
    ) -> Result<Attached, HostError> {
        let log = crate::plan::absolute(log);
        crate::logpath::check_for_reading(&log).map_err(HostError::failed)?;
        // Attached by log alone: the process writing it, if any, is the one to watch; a log
        // that is not there yet is waited for, and its writer found when it appears.
        let missing_at_attach = !log.exists();
        let watched = pid.or_else(|| {
            let w = match from.wait_for_log.filter(|_| !log.exists()) {
                Some(grace) => {
                    note(format!(
                        "{} does not exist yet: waiting for it to appear, to find the process that writes it",
                        log.display()
                    ));
                    super::late_writer::wait_for_writer(&log, grace)?
                }
                None => process::writers_of(&log).into_iter().next()?,
            };
            note(format!(
                "watching process {w} ({}), which writes {}",
                crate::secrets::redact_text(&process::cmdline(w)),
                log.display()
            ));
            Some(w)
        });
        if let Some(p) = pid {
            if process::stat(p).is_none() {
                note(format!("note: process {p} is not running now"));
            }
        }
        let writer = watched.map(|p| crate::logstart::WriterSeen::of(p, &log));
        // A log that did not exist when the watch began holds nothing of an earlier run: every
        // byte in it came after the attach.
        let from_start = from.start || (missing_at_attach && !from.end);
        let (from_end, said) =
            crate::logstart::attach_from_end(&log, writer.as_ref(), from_start, from.end)
                .map_err(HostError::failed)?;
        if let Some(said) = said {
            note(format!("note: {said}"));
        }
        Ok(Attached {
            target: Target {
                start_ticks: watched.and_then(|p| process::stat(p).map(|s| s.start_ticks)),
                log,
                pid: watched,
                ..Default::default()
            },
            from_end,
            // The command of the process watched (given, or found writing the log): the run's id
            // and the history name it, and the plan takes the profile and the server's address
            // from it as from a launched command (a server started with nohup on its own port).
            command: watched.map(process::argv).unwrap_or_default(),
        })
    }

    fn output_of(&self, pid: u32) -> Result<PathBuf, HostError> {
        process::output_file(pid).map_err(|e| HostError::failed(crate::Error::Usage(e)))
    }

    fn source(&self, plan: &Plan, target: &Target, _attached: bool) -> Box<dyn Source + Send> {
        Box::new(LocalSource::new(plan, target))
    }

    fn alive(&self, target: &Target) -> Option<bool> {
        Some(run_alive(target) || !process_tree_empty(target))
    }

    fn stop(&self, run_id: &str, grace: Duration) -> Result<RunStop, HostError> {
        let run = RunDir::open(run_id).map_err(HostError::failed)?;
        let record = run.process();
        // Also without a process record: whatever carries the run's id is the run's.
        let report = stop_recorded_run(
            &run,
            record.map(|p| p.pid),
            record.map(|p| p.start_ticks),
            grace,
        );
        if record.is_none() && report.targeted.is_empty() && report.survivors.is_empty() {
            return Ok(RunStop {
                report,
                never_started: true,
            });
        }
        // The supervisor records the exit a moment after the process ends: wait for it (bounded).
        let deadline = Instant::now() + EXIT_RECORD_WAIT;
        while record.is_some() && run.exit().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(RunStop {
            report,
            never_started: false,
        })
    }

    fn gpu_after_stop(&self, stop: &RunStop) -> Option<u64> {
        let deadline = Instant::now() + GPU_RELEASE_WAIT;
        let mut held = None;
        loop {
            match crate::probe::gpu::tree_memory_mib(&stop.report.targeted) {
                Ok(Some(mib)) => {
                    held = Some(mib);
                    if mib == 0 || Instant::now() >= deadline {
                        return held;
                    }
                }
                _ => return held,
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn before_cell(&self, port: Option<u16>) -> Result<Before, HostError> {
        Ok(Before::capture(port))
    }

    fn finish_cell(&self, req: &FinishRequest, cancel: &AtomicBool) -> FinishAnswer {
        let (run, target) = match run_target(&req.run_id) {
            Ok(x) => x,
            Err(e) => {
                return FinishAnswer {
                    bench: None,
                    teardown: TeardownCheck {
                        clean: false,
                        problems: vec![format!("teardown not verified: {e:#}")],
                        ..Default::default()
                    },
                };
            }
        };
        let bench = req.bench.as_ref().map(|b| run_bench(b, &run, cancel));
        let check = teardown::teardown(
            &target,
            Duration::from_millis(req.grace_ms),
            req.port,
            &req.before,
        );
        FinishAnswer {
            bench,
            teardown: check,
        }
    }

    fn cancel(&self, target: &Target, grace: Duration) {
        // A bench running here sees the matrix's cancel flag; the server is stopped here.
        if let Some(pid) = target.pid {
            crate::stop::stop_tree(pid, target.start_ticks, grace);
        }
    }
}

impl LocalHost {
    /// Kills the process group of run `run_id`'s bench, if one runs (`firedup __cell-cancel`).
    pub fn cancel_bench(&self, run_id: &str) -> crate::error::Result<()> {
        let run = RunDir::open(run_id)?;
        if let Ok(text) = std::fs::read_to_string(run.path.join(BENCH_PGID)) {
            if let Some(pg) = text
                .trim()
                .parse::<i32>()
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process_group(pg, rustix::process::Signal::KILL);
            }
        }
        Ok(())
    }
}

/// A run's directory and the target its teardown stops.
fn run_target(run_id: &str) -> crate::error::Result<(RunDir, Target)> {
    let run = RunDir::open(run_id)?;
    let process = run.process();
    let target = Target {
        log: PathBuf::from(run.meta()?.log),
        pid: process.map(|p| p.pid),
        start_ticks: process.map(|p| p.start_ticks).filter(|t| *t != 0),
        run: Some(run.clone()),
        run_id: run.id.clone(),
        ..Default::default()
    };
    Ok((run, target))
}

/// Whether the process tree of the launched process is gone.
fn process_tree_empty(target: &Target) -> bool {
    match target.pid {
        Some(p) => process::tree(p)
            .iter()
            .all(|x| !process::is_alive(*x, None)),
        None => true,
    }
}

/// Whether anything of the run lives: the launched process, or any process of the run
/// ([`process::of_run`]: a daemon it left), its supervisor aside.
fn run_alive(target: &Target) -> bool {
    target
        .pid
        .is_some_and(|p| process::is_alive(p, target.start_ticks))
        || !process::of_run(&target.run_id)
            .beside_supervisor()
            .is_empty()
}

/// The local observer as a [`Source`], its clock counting from the run's launch.
pub struct LocalSource {
    observer: LocalObserver,
    start: Instant,
    buf: Vec<(Duration, Observation)>,
    /// See [`Source::checked_through`].
    checked: Option<Duration>,
}

impl std::fmt::Debug for LocalSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalSource").finish_non_exhaustive()
    }
}

impl LocalSource {
    /// Observes `target` as `plan` says (line cap, where to start, probes, sampling).
    pub fn new(plan: &Plan, target: &Target) -> LocalSource {
        let start = launch_instant(target);
        let settings = ObserveSettings {
            line_cap: plan.line_cap,
            from_end: plan.from_end,
            resume: None,
            probes: plan.probes.clone(),
            sample_every: sample_interval(plan),
            follow_run: plan.judge.mode == crate::judge::Mode::UntilReady,
        };
        LocalSource {
            observer: LocalObserver::new(target, &settings, start),
            start,
            buf: Vec::new(),
            checked: None,
        }
    }
}

impl Source for LocalSource {
    fn collect(&mut self, out: &mut Vec<Seen>) {
        let look = self.now();
        if let Some(note) = self.observer.take_note() {
            out.push(Seen::Note(self.now(), note));
        }
        self.observer.collect(&mut self.buf);
        out.extend(self.buf.drain(..).map(|(at, o)| Seen::Obs(at, o)));
        if self.observer.caught_up() {
            self.checked = Some(look);
        }
    }
    fn checked_through(&self) -> Option<Duration> {
        self.checked
    }
    fn wait(&mut self, until: Instant) {
        self.observer.wait(until)
    }
    fn now(&self) -> Duration {
        self.start.elapsed()
    }
    fn next_wake(&self) -> Instant {
        self.observer.next_wake()
    }
    fn caught_up(&self) -> bool {
        self.observer.caught_up()
    }
    fn read_through(&self) -> Option<Duration> {
        self.observer.read_through()
    }
    fn decisive_moment(&mut self) {
        self.observer.nudge_prober(crate::prober::Nudged::Gpu)
    }
    fn ready_line_seen(&mut self) {
        self.observer.nudge_prober(crate::prober::Nudged::Probes)
    }

    fn stand_down(&mut self) {
        // The prober and the exit watches stop at their next look; nothing is waited for.
        self.observer
            .stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Time zero of a watch: the launch recorded in the run directory, when firedup launched the run
/// (also for a later `watch RUN_ID`: times count from the launch, by the wall clock's distance
/// to it), else now (an attach by log counts from the attach).
fn launch_instant(target: &Target) -> Instant {
    let now = Instant::now();
    let Some(launched_at) = target
        .run
        .as_ref()
        .and_then(|r| r.meta().ok())
        .map(|m| m.started_at)
    else {
        return now;
    };
    let ago = (crate::rundir::now_unix() - launched_at).max(0.0);
    Duration::try_from_secs_f64(ago)
        .ok()
        .and_then(|d| now.checked_sub(d))
        .unwrap_or(now)
}
