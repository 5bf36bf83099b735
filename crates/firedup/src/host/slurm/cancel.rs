//! Stopping a Slurm run: `scancel`, then the proof that it is gone (a terminal state, `squeue`,
//! no process of the run left on this machine), each check said in the report.

use std::time::{Duration, Instant};

use super::{CANCEL_WAIT, PROCESSES_GONE_WAIT, SlurmHost};
use crate::process;
use crate::rundir::{ExitRecord, RunDir, now_unix};
use crate::slurm::{CANCEL_MARKER, is_this_host};
use crate::stop::{JobStop, StopReport};

impl SlurmHost {
    /// `scancel`, then the proof: a terminal state (bounded wait), `squeue -j`, and on this
    /// machine no process carrying the run's id (nor listed by `scontrol listpids`).
    pub(super) fn cancel_job(
        &self,
        run: Option<&RunDir>,
        job: &str,
        grace: Duration,
    ) -> StopReport {
        let began = Instant::now();
        let run_id = run.map(|r| r.id.clone()).unwrap_or_default();
        if let Some(run) = run {
            // Read by the watch: this CANCELLED is firedup's own, not someone else's.
            let _ = std::fs::write(run.path.join(CANCEL_MARKER), b"");
        }
        let mut checked = Vec::new();
        let before = self.slurm.show_job(job);
        let here =
            matches!(&before, Ok(Some(i)) if i.batch_host.as_deref().is_some_and(is_this_host));
        let mut targeted = process::of_run(&run_id).pids;
        if here {
            targeted.extend(self.slurm.listpids(job).unwrap_or_default());
        }
        targeted.sort_unstable();
        targeted.dedup();
        let active = matches!(&before, Ok(Some(i)) if !i.is_terminal());
        let mut cancelled = false;
        if active {
            match self.slurm.cancel(job) {
                Ok(()) => {
                    cancelled = true;
                    checked.push(format!("scancel {job}"));
                }
                Err(e) => checked.push(format!("scancel {job} failed: {e}")),
            }
        } else {
            checked.push(format!("job {job} had already ended: nothing to cancel"));
        }
        let deadline = Instant::now() + CANCEL_WAIT + grace;
        let mut state = None;
        let mut ended = false;
        let mut exit = None;
        loop {
            match self.slurm.show_job(job) {
                Ok(Some(i)) => {
                    ended = i.is_terminal();
                    exit = i.exit();
                    state = Some(i.state);
                }
                Ok(None) => ended = true,
                Err(e) => state = Some(format!("unknown (scontrol failed: {e})")),
            }
            if ended || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        checked.push(format!(
            "scontrol show job {job}: {}",
            state.as_deref().unwrap_or("no longer known")
        ));
        match self.slurm.queue_state(job) {
            Ok(None) => checked.push(format!("squeue -j {job}: not listed")),
            Ok(Some(s)) => {
                let done = crate::slurm::job_info::JobInfo {
                    state: s.clone(),
                    ..Default::default()
                }
                .is_terminal();
                ended &= done;
                checked.push(format!("squeue -j {job}: {s}"));
            }
            Err(e) => checked.push(format!("squeue -j {job} failed: {e}")),
        }
        // The processes of the job on this machine: by the run's id, and as Slurm lists them.
        let gone_by = Instant::now() + PROCESSES_GONE_WAIT;
        let mut left = process::of_run(&run_id).pids;
        while !left.is_empty() && Instant::now() < gone_by {
            std::thread::sleep(Duration::from_millis(100));
            left = process::of_run(&run_id).pids;
        }
        if !run_id.is_empty() {
            checked.push(format!(
                "processes carrying FIREDUP_RUN_ID={run_id} here: {}",
                if left.is_empty() {
                    "none".to_string()
                } else {
                    left.len().to_string()
                }
            ));
        }
        if here {
            match self.slurm.listpids(job) {
                Some(p) if !p.is_empty() => {
                    checked.push(format!("scontrol listpids {job}: {}", p.len()));
                    left.extend(p);
                }
                Some(_) => checked.push(format!("scontrol listpids {job}: none")),
                None => checked.push(format!(
                    "scontrol listpids {job}: no processes on this node"
                )),
            }
        }
        left.sort_unstable();
        left.dedup();
        left.retain(|p| process::is_alive(*p, None));
        // The end, for `ps` and a later `watch` (the watch, when one runs, records it first).
        if let (Some(run), true) = (run, ended) {
            if run.exit().is_none() {
                let _ = run.write_exit(&ExitRecord {
                    exit,
                    spawn_error: None,
                    ended_at: now_unix(),
                });
            }
        }
        StopReport {
            targeted,
            escalated: false,
            survivors: left.into_iter().map(|p| (p, process::cmdline(p))).collect(),
            took: began.elapsed(),
            swept: None,
            job: Some(Box::new(JobStop {
                id: job.to_string(),
                state,
                ended,
                cancelled,
                checked,
            })),
        }
    }
}
