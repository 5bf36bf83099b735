//! `--host` and its connection settings, shared by the commands that can act on an SSH host.

use std::sync::Arc;

use anyhow::Result;
use clap::Args;

use crate::duration::parse_duration;
use crate::remote::HostSpec;
use firedup::host::{Host, LocalHost, SshHost};

/// Where the server runs, when not here.
#[derive(Debug, Args, Clone)]
pub struct RemoteArgs {
    /// Run or watch on this SSH host (as you write it for ssh: an alias of ~/.ssh/config,
    /// user@host). firedup copies itself to ~/.cache/firedup/bin there on first use. With
    /// --slurm or --slurm-job: the login node where Slurm's commands run and the job's log is
    /// read (its run directory is there too). `run` takes it more than once: a multi-node run,
    /// COMMAND started on every host (node rank = position; see --master-addr).
    #[arg(long, value_name = "HOST")]
    pub host: Vec<String>,
    /// How long to wait for the first SSH connection.
    #[arg(
        long = "connect-timeout",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub connect_timeout: String,
    /// After losing contact with the host, how long to keep reconnecting before `monitor_error`
    /// (the server keeps running there).
    #[arg(long = "reconnect-for", value_name = "DURATION", default_value = "5m")]
    pub reconnect_for: String,
}

impl RemoteArgs {
    /// The host the command acts on: this machine, or `--host` over SSH.
    pub(crate) fn host(&self) -> Result<Arc<dyn Host>> {
        Ok(match self.ssh_host()? {
            Some(h) => Arc::new(h),
            None => Arc::new(LocalHost),
        })
    }

    /// The `--host`, when one is given (more than one is a multi-node `run`, refused here).
    pub(crate) fn ssh_host(&self) -> Result<Option<SshHost>> {
        match self.host.as_slice() {
            [] => Ok(None),
            [host] => Ok(Some(self.ssh_host_named(host)?)),
            [..] => anyhow::bail!(
                "--host given more than once is a multi-node run, which only `firedup run` starts; give one --host"
            ),
        }
    }

    /// `host` over SSH with these connection settings.
    pub(crate) fn ssh_host_named(&self, host: &str) -> Result<SshHost> {
        let connect = parse_duration(&self.connect_timeout)
            .map_err(|e| anyhow::anyhow!("--connect-timeout: {e}"))?;
        let reconnect = parse_duration(&self.reconnect_for)
            .map_err(|e| anyhow::anyhow!("--reconnect-for: {e}"))?;
        Ok(SshHost::new(HostSpec::new(host, connect), reconnect))
    }

    /// The host a command about run `run_id` acts on: `--host`, else Slurm for a run submitted
    /// with `run --slurm` (its record names the job), else this machine.
    pub(crate) fn run_host(&self, run_id: Option<&str>, command: &str) -> Result<Arc<dyn Host>> {
        if !self.host.is_empty() {
            // The host's firedup finds a Slurm run there by its record.
            return self.host();
        }
        Ok(match run_id {
            Some(id) => {
                crate::run_elsewhere::check_here(id, command)?;
                Arc::from(firedup::host::of_run_here(id))
            }
            None => Arc::new(LocalHost),
        })
    }
}
