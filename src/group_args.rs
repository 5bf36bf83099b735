//! The flags of a multi-node `firedup run` (`--host` given more than once): where node 0 is
//! reached, its rendezvous port, and which nodes must be ready. Refused on a single-host run,
//! and the single-host flags a group cannot take yet are refused with them.

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

    /// Refuses what a multi-node run does not support yet: `(slurm, name, owner, then)`.
    pub(crate) fn refuse_with(
        &self,
        (slurm, name, owner, then): (bool, bool, bool, bool),
        detach: bool,
        notify: bool,
    ) -> Result<()> {
        let refused = [
            (slurm, "--slurm"),
            (name, "--name"),
            (owner, "--owner"),
            (then, "--then"),
            (detach, "--detach"),
            (notify, "--notify"),
        ];
        if let Some((_, flag)) = refused.iter().find(|(given, _)| *given) {
            bail!(
                "{flag} is not supported with a multi-node run (--host given more than once) yet"
            );
        }
        Ok(())
    }
}
