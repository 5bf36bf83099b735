//! [`SshHost`]: another machine over SSH ([`crate::remote`]). Each action is one connection
//! running the copied firedup there with a JSON request on stdin and a JSON answer on stdout
//! (`__remote-launch`, `__meta`, `__stop`, `__cell-before`, `__cell-finish`, `__cell-cancel`),
//! which do there what [`super::LocalHost`] does here; observations stream from
//! `firedup __agent` through a [`RemoteSource`]. A failed connection, or a remote firedup that
//! cannot do what it is asked, is [`HostError::Unreachable`] with the reason in one sentence.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::{
    Attached, Before, FinishAnswer, FinishRequest, FoundRun, Host, HostError, LogFrom, RunStop,
    Started, TeardownCheck,
};
use crate::agent::RemoteLaunched;
use crate::launch::LaunchSpec;
use crate::plan::Plan;
use crate::remote::HostSpec;
use crate::remote::session::{self, Remote};
use crate::remote::source::RemoteSource;
use crate::rundir::RunMeta;
use crate::source::{Source, sample_interval};
use crate::target::Target;
use crate::wire::AgentSpec;

/// A machine reached over SSH.
#[derive(Debug, Clone)]
pub struct SshHost {
    spec: HostSpec,
    /// After losing contact during a watch, how long to keep reconnecting before
    /// `monitor_error` (the server keeps running there).
    reconnect_for: Duration,
}

impl SshHost {
    /// The host `spec`; a watch keeps reconnecting for `reconnect_for` after losing contact.
    pub fn new(spec: HostSpec, reconnect_for: Duration) -> SshHost {
        SshHost {
            spec,
            reconnect_for,
        }
    }

    /// Runs the remote firedup with `args`, its stdout and stderr going to this process's, and
    /// returns its exit code (`stop`, `ps` and `logs` answered there as they would be here).
    pub fn pass_through(&self, args: &[&str]) -> Result<i32, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        self.with_remote(|r| {
            Box::pin(async move {
                let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
                let mut cmd = r.firedup_command(&refs);
                cmd.stdin(openssh::Stdio::null())
                    .stdout(openssh::Stdio::inherit())
                    .stderr(openssh::Stdio::inherit());
                let status = cmd.status().await.map_err(|e| format!("{}: {e}", r.host))?;
                Ok(status.code().unwrap_or(1))
            })
        })
    }

    /// Runs `f` with an open connection to the host, on a small runtime of its own.
    fn with_remote<T>(
        &self,
        f: impl for<'a> FnOnce(
            &'a Remote,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<T, String>> + 'a>,
        >,
    ) -> Result<T, String> {
        let rt = session::runtime()?;
        rt.block_on(async {
            let remote = session::open(&self.spec).await?;
            let out = f(&remote).await;
            remote.close().await;
            out
        })
    }

    /// Runs the remote firedup with `args` and `stdin`; its stdout when it exits 0, else its
    /// one-sentence error (`firedup: ` taken off).
    pub(crate) fn remote_firedup(
        &self,
        args: Vec<String>,
        stdin: Option<Vec<u8>>,
    ) -> Result<Result<String, String>, String> {
        self.with_remote(|r| {
            Box::pin(async move {
                let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
                let out = r.firedup(&refs, stdin.as_deref()).await?;
                Ok(if out.code == Some(0) {
                    Ok(out.stdout)
                } else {
                    Err(out
                        .stderr
                        .trim()
                        .trim_start_matches("firedup: ")
                        .to_string())
                })
            })
        })
    }

    /// Runs the remote firedup with `args` and `stdin`: its stdout when it exits 0; its
    /// sentence as a usage error when it refused the request (exit 2: a mistake of the user's,
    /// said there); else the host cannot be used for it ([`HostError::Unreachable`]).
    pub(crate) fn remote_request(
        &self,
        args: Vec<String>,
        stdin: Option<Vec<u8>>,
    ) -> Result<String, HostError> {
        let host = self.host().to_string();
        let out = self
            .with_remote(|r| {
                Box::pin(async move {
                    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
                    r.firedup(&refs, stdin.as_deref()).await
                })
            })
            .map_err(HostError::Unreachable)?;
        let said = out
            .stderr
            .trim()
            .trim_start_matches("firedup: ")
            .to_string();
        match out.code {
            Some(0) => Ok(out.stdout),
            Some(crate::verdict::USAGE_EXIT_CODE) => Err(HostError::Failed(crate::Error::Usage(
                format!("{host}: {said}"),
            ))),
            _ => Err(HostError::Unreachable(format!("{host}: {said}"))),
        }
    }

    pub(crate) fn host(&self) -> &str {
        &self.spec.destination
    }

    pub(crate) fn spec(&self) -> &HostSpec {
        &self.spec
    }

    /// The stream of a watch of Slurm job `job`, submitted some other way, whose output file on
    /// the host is `log`: the agent there follows it and polls the job's state.
    pub(crate) fn job_source(&self, plan: &Plan, log: &Path, job: &str) -> Box<dyn Source + Send> {
        let mut spec = agent_spec(plan, None, Some(log.to_path_buf()), None);
        spec.slurm_job = Some(job.to_string());
        let hint = format!("firedup watch --host {} --slurm-job {job}", self.host());
        Box::new(RemoteSource::start(
            self.spec.clone(),
            spec,
            self.reconnect_for,
            &hint,
            true,
        ))
    }
}

/// What the agent on the host is asked to observe.
fn agent_spec(
    plan: &Plan,
    run_id: Option<String>,
    log: Option<PathBuf>,
    pid: Option<u32>,
) -> AgentSpec {
    AgentSpec {
        run_id,
        log,
        pid,
        line_cap: plan.line_cap,
        from_end: plan.from_end,
        resume: None,
        probes: plan.probes.clone(),
        sample_every_ms: sample_interval(plan).as_millis() as u64,
        t0_unix: None,
        slurm_job: None,
    }
}

impl Host for SshHost {
    fn name(&self) -> Option<&str> {
        Some(self.host())
    }

    fn check_launch(
        &self,
        _: &[String],
        _: Option<&Path>,
        _: Option<&Path>,
    ) -> crate::error::Result<()> {
        // The paths are the host's: its `__remote-launch` checks them.
        Ok(())
    }

    fn launch(&self, spec: &LaunchSpec) -> Result<Started, HostError> {
        let request = serde_json::to_vec(spec).map_err(|e| {
            HostError::Failed(crate::Error::Remote(format!(
                "cannot encode the launch spec: {e}"
            )))
        })?;
        let host = self.host().to_string();
        let answer = self
            .remote_firedup(vec!["__remote-launch".into()], Some(request))
            .map_err(HostError::Unreachable)?
            .map_err(|e| HostError::Unreachable(format!("{host}: launching failed: {e}")))?;
        let launched = serde_json::from_str::<RemoteLaunched>(answer.trim()).map_err(|e| {
            HostError::Unreachable(format!("{host}: bad answer from the remote launch: {e}"))
        })?;
        Ok(Started {
            target: Target {
                log: PathBuf::from(&launched.log),
                pid: launched.pid,
                run_id: launched.run_id,
                ..Default::default()
            },
            supervisor: None,
        })
    }

    fn record_verdict(&self, target: &Target, outcome: &crate::verdict::Outcome) {
        // In the run's directory on the host (`__record-verdict`), for a later watch there.
        if let Ok(json) = serde_json::to_vec(outcome) {
            let args = vec!["__record-verdict".into(), target.run_id.clone()];
            let _ = self.remote_firedup(args, Some(json));
        }
    }

    fn find_run(&self, id: &str) -> Result<FoundRun, HostError> {
        let host = self.host().to_string();
        let answer = self
            .remote_firedup(vec!["__meta".into(), id.to_string()], None)
            .map_err(HostError::Unreachable)?
            .map_err(|e| HostError::Unreachable(format!("{host}: {e}")))?;
        let bad =
            |e: serde_json::Error| HostError::Unreachable(format!("{host}: bad run record: {e}"));
        let v: serde_json::Value = serde_json::from_str(answer.trim()).map_err(bad)?;
        let ended = v["ended"].as_bool().unwrap_or(false);
        // An older firedup on the host sends no records.
        let records = serde_json::from_value(v["records"].clone()).unwrap_or_default();
        let meta = serde_json::from_value::<RunMeta>(v).map_err(bad)?;
        Ok(FoundRun {
            target: Target {
                log: PathBuf::from(&meta.log),
                run_id: meta.run_id.clone(),
                ..Default::default()
            },
            meta,
            ended,
            records,
        })
    }

    fn attach_log(
        &self,
        log: &Path,
        pid: Option<u32>,
        from: LogFrom,
        _note: &mut dyn FnMut(String),
    ) -> Result<Attached, HostError> {
        // The agent on the host opens the log; where judging starts is as asked.
        Ok(Attached {
            target: Target {
                log: log.to_path_buf(),
                pid,
                ..Default::default()
            },
            from_end: from.end,
            command: Vec::new(),
        })
    }

    fn source(&self, plan: &Plan, target: &Target, attached: bool) -> Box<dyn Source + Send> {
        let host = self.host();
        let (spec, hint) = if attached {
            (
                agent_spec(plan, None, Some(target.log.clone()), target.pid),
                format!("firedup watch --host {host} --log {}", target.log.display()),
            )
        } else {
            (
                agent_spec(plan, Some(target.run_id.clone()), None, None),
                format!("firedup watch --host {host} {}", target.run_id),
            )
        };
        // A run was found or launched there: the host was reached already.
        Box::new(RemoteSource::start(
            self.spec.clone(),
            spec,
            self.reconnect_for,
            &hint,
            !attached,
        ))
    }

    fn alive(&self, _: &Target) -> Option<bool> {
        None
    }

    fn stop(&self, run_id: &str, grace: Duration) -> Result<RunStop, HostError> {
        let host = self.host().to_string();
        let answer = self
            .remote_firedup(
                vec![
                    "__stop".into(),
                    run_id.to_string(),
                    grace.as_millis().to_string(),
                ],
                None,
            )
            .map_err(HostError::Unreachable)?
            .map_err(|e| HostError::Failed(crate::Error::Remote(e)))?;
        serde_json::from_str(answer.trim()).map_err(|e| {
            HostError::Unreachable(format!("{host}: bad answer from the remote stop: {e}"))
        })
    }

    fn gpu_after_stop(&self, _: &RunStop) -> Option<u64> {
        None
    }

    fn before_cell(&self, port: Option<u16>) -> Result<Before, HostError> {
        let host = self.host().to_string();
        let mut args = vec!["__cell-before".to_string()];
        args.extend(port.map(|p| p.to_string()));
        let answer = self
            .remote_firedup(args, None)
            .map_err(HostError::Unreachable)?
            .map_err(|e| HostError::Unreachable(format!("{host}: {e}")))?;
        serde_json::from_str(answer.trim()).map_err(|e| {
            HostError::Unreachable(format!("{host}: bad answer about the port and GPU: {e}"))
        })
    }

    fn finish_cell(&self, req: &FinishRequest, _cancel: &AtomicBool) -> FinishAnswer {
        let host = self.host().to_string();
        let answer = serde_json::to_vec(req)
            .map_err(|e| e.to_string())
            .and_then(|request| self.remote_firedup(vec!["__cell-finish".into()], Some(request)))
            .and_then(|r| r.map_err(|e| format!("{host}: {e}")))
            .and_then(|out| {
                serde_json::from_str::<FinishAnswer>(out.trim())
                    .map_err(|e| format!("{host}: bad answer from the teardown: {e}"))
            });
        match answer {
            Ok(a) => a,
            // Teardown could not be verified: the machine counts as dirty.
            Err(reason) => FinishAnswer {
                bench: None,
                teardown: TeardownCheck {
                    clean: false,
                    problems: vec![format!("teardown on {host} not verified: {reason}")],
                    ..Default::default()
                },
            },
        }
    }

    fn cancel(&self, target: &Target, grace: Duration) {
        let id = target.run_id.clone();
        let g = format!("{}ms", grace.as_millis());
        let _ = self.with_remote(|r| {
            Box::pin(async move {
                r.firedup(&["__cell-cancel", &id], None).await?;
                r.firedup(&["stop", &id, "--grace", &g], None).await
            })
        });
    }
}
