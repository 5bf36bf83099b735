//! The flags of a multi-node `firedup run` (`--host` given more than once): where node 0 is
//! reached, its rendezvous port, and which nodes must be ready. Refused on a single-host run;
//! the single-host flags a group does not take are refused up front, each with what to do
//! instead (`--name`, `--keep`, `--grace`, `--log`, `--env`, `--cwd` apply to the group).

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};

/// Which nodes' readiness makes a multi-node server ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReadyOn {
    /// Node 0's readiness conditions, with every other node's processes alive.
    First,
    /// Every node's own readiness conditions.
    All,
}

/// `--master-addr`, `--master-port`, `--ready-on`.
#[derive(Debug, Args, Clone)]
pub struct GroupArgs {
    /// With --host given more than once: the address the other nodes reach node 0 at
    /// (`{master_addr}`, FIREDUP_MASTER_ADDR); default: the first host's HostName (ssh -G).
    #[arg(long = "master-addr", value_name = "HOST")]
    pub master_addr: Option<String>,
    /// With --host given more than once: the rendezvous port on node 0 (`{master_port}`,
    /// FIREDUP_MASTER_PORT); default: a port free there.
    #[arg(long = "master-port", value_name = "N")]
    pub master_port: Option<u16>,
    /// With --host given more than once: `first` (node 0 ready, every node's processes
    /// alive) or `all` (every node's own readiness conditions).
    #[arg(long = "ready-on", value_name = "NODES", value_enum)]
    pub ready_on: Option<ReadyOn>,
}

impl GroupArgs {
    /// Refused without several hosts: they mean nothing to a single run.
    pub(crate) fn refuse_single(&self) -> Result<()> {
        if self.master_addr.is_some() || self.master_port.is_some() || self.ready_on.is_some() {
            bail!(
                "--master-addr, --master-port and --ready-on are for a multi-node run: give --host once per node"
            );
        }
        Ok(())
    }

    /// Refuses, before anything is launched, the `run` flags a multi-node run does not take,
    /// each with what to do instead: `(slurm, owner, then)`.
    pub(crate) fn refuse_with(
        &self,
        (slurm, owner, then): (bool, bool, bool),
        detach: bool,
        notify: bool,
    ) -> Result<()> {
        let refused = [
            (
                slurm,
                "--slurm with several --host: a Slurm job over several nodes is asked of Slurm; give --host once (the login node) and --sbatch-arg=--nodes=N",
            ),
            (
                owner,
                "--owner with several --host: the owner is a process of this machine; run without --owner and end the group with `firedup stop GROUP_ID`",
            ),
            (
                then,
                "--then with several --host: run the command after `firedup run` exits 0 (ready), then `firedup stop GROUP_ID`",
            ),
            (
                detach,
                "--detach with several --host: a multi-node run is watched by the firedup that launched it; run it in the background (`firedup run ... &`) and see it with `firedup ps`",
            ),
            (
                notify,
                "--notify with several --host: the sd_notify socket would be on this machine; give --ready-line REGEX",
            ),
        ];
        if let Some((_, said)) = refused.iter().find(|(given, _)| *given) {
            bail!("a multi-node run does not take {said}");
        }
        Ok(())
    }
}
