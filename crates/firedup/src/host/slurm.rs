//! [`SlurmHost`]: a run as a Slurm batch job (`firedup run --slurm`, `watch --slurm-job`).
//! Launching is `sbatch` ([`crate::slurm::submit`]), observing is
//! [`crate::slurm::source::SlurmSource`] (the job's log and its state), stopping is `scancel`
//! followed by checks that the job ended and that none of its processes is left.
//!
//! The run directory is the same as a local run's (`meta.json` with the job's id in `job`, the
//! generated batch script `job.sh`, `output.log`); there is no supervisor and no process record:
//! the job's processes run under slurmstepd, each carrying the run's `FIREDUP_RUN_ID`.
//! `sbatch` refusing the job is the run's spawn error (`never_started`, with sbatch's own line);
//! Slurm not answering at all is [`HostError::Unreachable`] (`monitor_error`).
//!
//! - [`cancel`]: `scancel` and the proof that the job is gone (`firedup stop`).
//! - [`login`]: [`login::SlurmLoginHost`], the same runs driven through a login node over SSH.
//! - [`login_side`]: the login node's side of it (`__slurm-submit`, `__slurm-job`).

mod cancel;
#[cfg(feature = "ssh")]
pub mod login;
pub mod login_side;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::teardown::{Before, TeardownCheck};
use super::{
    Attached, FinishAnswer, FinishRequest, FoundRun, Host, HostError, LocalHost, LogFrom, RunStop,
    Started,
};
use crate::error::usage;
use crate::launch::{self, LaunchSpec};
use crate::plan::Plan;
use crate::process;
use crate::rundir::{ExitRecord, JobRecord, RunDir, RunMeta, now_unix};
use crate::slurm::source::SlurmSource;
use crate::slurm::{Slurm, submit};
use crate::source::Source;
use crate::target::Target;

/// How long a stop waits for the cancelled job to reach a terminal state (COMPLETING can last
/// seconds while the node kills the job's processes), on top of the grace.
const CANCEL_WAIT: Duration = Duration::from_secs(30);
/// How long a stop waits for the job's processes on this machine to be gone after it ended.
const PROCESSES_GONE_WAIT: Duration = Duration::from_secs(10);
/// How long a submit waits for Slurm to show the job it just accepted.
const SHOW_WAIT: Duration = Duration::from_secs(10);

/// Slurm, from this machine: see the module doc.
#[derive(Debug, Clone, Default)]
pub struct SlurmHost {
    slurm: Slurm,
    /// `--sbatch-arg`s, given to every submit after firedup's own.
    sbatch_args: Vec<String>,
    /// The job attached to (`watch --slurm-job`), for a target with no run directory.
    job: Option<String>,
}

impl SlurmHost {
    /// Submits with `sbatch_args` after firedup's own arguments.
    pub fn new(sbatch_args: Vec<String>) -> SlurmHost {
        SlurmHost {
            sbatch_args,
            ..Default::default()
        }
    }

    /// Attaches to job `job_id`, submitted some other way: its log is the job's `StdOut=`.
    pub fn attach_job(
        &mut self,
        job_id: &str,
        note: &mut dyn FnMut(String),
    ) -> Result<Attached, HostError> {
        self.slurm
            .reachable()
            .map_err(|e| HostError::Unreachable(format!("cannot reach Slurm: {e}")))?;
        let info = match self.slurm.show_job(job_id) {
            Ok(Some(info)) => info,
            Ok(None) => {
                return Err(HostError::failed(crate::Error::usage(format!(
                    "Slurm does not know job {job_id}: see `squeue` for the jobs there are"
                ))));
            }
            Err(e) => return Err(HostError::Unreachable(format!("cannot reach Slurm: {e}"))),
        };
        let Some(log) = info.std_out.clone() else {
            return Err(HostError::failed(crate::Error::usage(format!(
                "Slurm gives no output file (StdOut=) for job {job_id}: nothing to follow"
            ))));
        };
        note(format!(
            "watching Slurm job {job_id} ({}), which writes {log}",
            info.state
        ));
        self.job = Some(info.id);
        Ok(Attached {
            target: Target {
                log: PathBuf::from(log),
                ..Default::default()
            },
            from_end: false,
            command: Vec::new(),
        })
    }

    /// The job of `target`: its run's record, else the job attached to.
    fn job_of(&self, target: &Target) -> Option<String> {
        target
            .run
            .as_ref()
            .and_then(|r| r.meta().ok())
            .and_then(|m| m.job)
            .map(|j| j.id)
            .or_else(|| self.job.clone())
    }

    /// Writes the run's record and submits; the target to watch (with the spawn error when
    /// sbatch refused the job).
    fn submit(&self, spec: &LaunchSpec, run: &RunDir) -> crate::error::Result<Target> {
        let checked = launch::check(spec)?;
        let log = checked.log.unwrap_or_else(|| run.path.join("output.log"));
        let sub = submit::plan(
            &spec.command,
            &self.sbatch_args,
            &log,
            &run.id,
            &run.path.join("job.sh"),
        );
        let (log_file, log_start) = if sub.sets_output {
            let (file, id) = launch::prepare_log(&log)?;
            (Some(id), crate::logstart::measure_open(&file)?)
        } else {
            (None, None)
        };
        let mut meta = RunMeta {
            run_id: run.id.clone(),
            command: crate::secrets::redact_args(&spec.command),
            cwd: checked.cwd.display().to_string(),
            env: spec
                .env
                .iter()
                .map(|(k, v)| (k.clone(), crate::secrets::shown_value(k, v).to_string()))
                .collect(),
            log: log.display().to_string(),
            profile: spec.profile.clone(),
            mode: spec.mode,
            started_at: now_unix(),
            firedup_version: env!("CARGO_PKG_VERSION").to_string(),
            ready_lines: spec.judging.ready_lines.clone(),
            fail_lines: spec.judging.fail_lines.clone(),
            stall: spec.judging.stall.clone(),
            timeout: spec.judging.timeout.clone(),
            options: Some(spec.judging.stored()),
            name: spec.name.clone(),
            log_start,
            log_file,
            job: None,
            owner: None,
            grace_ms: None,
        };
        run.write_meta(&meta)?;
        if let Some(text) = &sub.wrapper {
            std::fs::write(&sub.script, text).map_err(|e| {
                crate::Error::StateDir(format!("cannot write {}: {e}", sub.script.display()))
            })?;
        }
        let mut target = Target {
            log: log.clone(),
            run: Some(run.clone()),
            run_id: run.id.clone(),
            log_start,
            log_file,
            ..Default::default()
        };
        let id = match self.slurm.submit(
            &sub.args,
            &sub.script,
            &sub.script_args,
            &checked.cwd,
            &spec.env,
        ) {
            Ok(id) => id,
            Err(line) => {
                let reason = format!("sbatch refused the job: {line}");
                run.write_exit(&ExitRecord {
                    exit: None,
                    spawn_error: Some(reason.clone()),
                    ended_at: now_unix(),
                })?;
                target.spawn_error = Some(reason);
                return Ok(target);
            }
        };
        meta.job = Some(JobRecord {
            scheduler: "slurm".into(),
            id: id.clone(),
        });
        if !sub.sets_output {
            // The job's own output file (the user's --output, %j expanded), as Slurm has it.
            let deadline = Instant::now() + SHOW_WAIT;
            let out = loop {
                match self.slurm.show_job(&id) {
                    Ok(Some(info)) => break info.std_out,
                    _ if Instant::now() >= deadline => break None,
                    _ => std::thread::sleep(Duration::from_millis(200)),
                }
            };
            if let Some(out) = out {
                let out = match Path::new(&out) {
                    p if p.is_absolute() => p.to_path_buf(),
                    p => checked.cwd.join(p),
                };
                meta.log = out.display().to_string();
                target.log = out;
            }
        }
        run.write_meta(&meta)?;
        Ok(target)
    }
}

impl Host for SlurmHost {
    fn name(&self) -> Option<&str> {
        None
    }

    fn watches_process(&self) -> bool {
        false
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
        self.slurm.reachable().map_err(|e| {
            HostError::Unreachable(format!(
                "cannot reach Slurm: {e} (is SLURM_CONF set, and slurmctld up?)"
            ))
        })?;
        launch::check(spec).map_err(HostError::failed)?;
        let run = RunDir::create(&spec.command).map_err(HostError::failed)?;
        let target = self.submit(spec, &run).map_err(HostError::failed)?;
        Ok(Started {
            target,
            supervisor: None,
        })
    }

    fn find_run(&self, id: &str) -> Result<FoundRun, HostError> {
        let run = RunDir::open(id).map_err(HostError::failed)?;
        let meta = run.meta().map_err(HostError::failed)?;
        let Some(job) = meta.job.clone() else {
            let spawn_error = run.exit().and_then(|e| e.spawn_error);
            if spawn_error.is_none() {
                return LocalHost.find_run(id);
            }
            return Ok(FoundRun {
                target: Target {
                    log: PathBuf::from(&meta.log),
                    run_id: run.id.clone(),
                    run: Some(run.clone()),
                    spawn_error,
                    ..Default::default()
                },
                meta,
                ended: true,
                records: crate::host::RunRecords::of(&run),
            });
        };
        let ended = run.exit().is_some()
            || matches!(self.slurm.show_job(&job.id), Ok(None))
            || matches!(self.slurm.show_job(&job.id), Ok(Some(i)) if i.is_terminal());
        Ok(FoundRun {
            target: Target {
                log: PathBuf::from(&meta.log),
                log_start: meta.log_start,
                log_file: meta.log_file,
                run_id: run.id.clone(),
                run: Some(run.clone()),
                ..Default::default()
            },
            meta,
            ended,
            records: crate::host::RunRecords::of(&run),
        })
    }

    fn attach_log(
        &self,
        _log: &Path,
        _pid: Option<u32>,
        _from: LogFrom,
        _note: &mut dyn FnMut(String),
    ) -> Result<Attached, HostError> {
        Err(HostError::failed(crate::Error::usage(
            "a Slurm job is watched by its id (--slurm-job JOBID) or its run id, not by --log",
        )))
    }

    fn source(&self, plan: &Plan, target: &Target, _attached: bool) -> Box<dyn Source + Send> {
        let job = self.job_of(target).unwrap_or_default();
        Box::new(SlurmSource::new(plan, target, &job))
    }

    fn alive(&self, target: &Target) -> Option<bool> {
        let Some(job) = self.job_of(target) else {
            return Some(false);
        };
        let active = match self.slurm.show_job(&job) {
            Ok(Some(info)) => !info.is_terminal(),
            Ok(None) => false,
            Err(_) => return None,
        };
        Some(active || !process::of_run(&target.run_id).pids.is_empty())
    }

    fn stop(&self, run_id: &str, grace: Duration) -> Result<RunStop, HostError> {
        let run = RunDir::open(run_id).map_err(HostError::failed)?;
        let meta = run.meta().map_err(HostError::failed)?;
        let Some(job) = meta.job else {
            if run.exit().is_some_and(|e| e.spawn_error.is_some()) {
                return Ok(RunStop {
                    report: crate::stop::stop_run(None, None, &run.id, grace),
                    never_started: true,
                });
            }
            return LocalHost.stop(run_id, grace);
        };
        Ok(RunStop {
            report: self.cancel_job(Some(&run), &job.id, grace),
            never_started: false,
        })
    }

    fn gpu_after_stop(&self, _stop: &RunStop) -> Option<u64> {
        None
    }

    fn before_cell(&self, port: Option<u16>) -> Result<Before, HostError> {
        Ok(Before::capture(port))
    }

    fn finish_cell(&self, req: &FinishRequest, cancel: &AtomicBool) -> FinishAnswer {
        let began = Instant::now();
        let run = match RunDir::open(&req.run_id) {
            Ok(run) => run,
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
        // The bench runs here, where firedup runs (it reaches the job's server by its address).
        let bench = req
            .bench
            .as_ref()
            .map(|b| super::local::run_bench(b, &run, cancel));
        let job = run.meta().ok().and_then(|m| m.job);
        let mut teardown = match job {
            Some(job) => {
                let stop =
                    self.cancel_job(Some(&run), &job.id, Duration::from_millis(req.grace_ms));
                let clean = stop.clean();
                let state = stop
                    .job
                    .as_ref()
                    .and_then(|j| j.state.clone())
                    .unwrap_or_else(|| "no longer known".into());
                TeardownCheck {
                    clean,
                    problems: if clean {
                        Vec::new()
                    } else {
                        vec![stop.describe()]
                    },
                    notes: vec![format!("slurm job {} {state}", job.id)],
                    ..Default::default()
                }
            }
            // sbatch refused it: nothing was queued.
            None => TeardownCheck {
                clean: true,
                ..Default::default()
            },
        };
        teardown.took_s = began.elapsed().as_secs_f64();
        FinishAnswer { bench, teardown }
    }

    fn cancel(&self, target: &Target, grace: Duration) {
        if let Some(job) = self.job_of(target) {
            let _ = self.cancel_job(target.run.as_ref(), &job, grace);
        }
    }
}

/// A usage mistake of `--slurm` with another flag, in one sentence.
pub fn refuse_with(flag: &str) -> crate::error::Result<()> {
    usage!("{flag} does not go with --slurm: the job runs under Slurm, not firedup's supervisor")
}
