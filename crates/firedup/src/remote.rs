//! firedup over SSH: launch and watch on another machine through the user's own OpenSSH.
//!
//! Choice (see README): firedup copies **itself** (or `$FIREDUP_REMOTE_BIN`: the portable build,
//! which runs from glibc 2.17) to the remote host on first use, gzip-compressed, into
//! `~/.cache/firedup/bin/firedup-VERSION-HASH` (mode 0700), after checking that the remote
//! architecture and glibc suit it, and that the copy runs there (`--version`). There is no shell agent: the
//! remote side is the same code as a local watch (supervisor, observer, probes), so a verdict means
//! the same thing wherever the server runs. A host where the copy cannot run (another
//! architecture, an older C library) gets one sentence saying so.
//!
//! Transport: the `openssh` crate drives the user's `ssh` with a ControlMaster, so
//! `~/.ssh/config`, ProxyJump, the agent and known_hosts behave as in their shell; every remote
//! action is a channel of that one connection. Arguments reach the remote command escaped by
//! openssh (no shell injection), and what could be secret (the command's environment, the launch
//! spec) travels as JSON on stdin, never on a remote command line.
//!
//! - `agent_copy`: which firedup is copied (`FIREDUP_REMOTE_BIN`, else the running one), sent
//!   gzip-compressed, and the one sentence for a host it cannot run on (`glibc_need`: the glibc
//!   the binary needs, read from its ELF, against the host's).
//! - [`session`]: connecting (errors classified into one sentence each), installing the agent,
//!   running a remote firedup with a JSON request on stdin.
//! - `shell`: one command on the host, its stdin given and its output read whole.
//! - [`source`]: the remote agent's stream as a judge-loop source, with heartbeats, "lost contact"
//!   and reconnection that resumes the log at the byte where it stopped.

mod agent_copy;
mod glibc_need;
pub mod session;
mod shell;
pub mod source;

use std::path::PathBuf;
use std::time::Duration;

/// How to reach a host.
#[derive(Debug, Clone)]
pub struct HostSpec {
    /// As the user writes it for ssh: `gpu-box`, `user@host`, an alias of `~/.ssh/config`.
    pub destination: String,
    /// An ssh config file instead of `~/.ssh/config` (`FIREDUP_SSH_CONFIG`; the tests use it).
    pub config_file: Option<PathBuf>,
    /// ssh's `ConnectTimeout`; the whole handshake is given 5 seconds more.
    pub connect_timeout: Duration,
    /// The remote `FIREDUP_STATE_DIR` (`FIREDUP_REMOTE_STATE_DIR`), else the remote default.
    pub remote_state_dir: Option<String>,
}

impl HostSpec {
    /// A host as given on the command line, with settings from the environment.
    pub fn new(destination: &str, connect_timeout: Duration) -> HostSpec {
        HostSpec {
            destination: destination.to_string(),
            config_file: std::env::var_os("FIREDUP_SSH_CONFIG")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            connect_timeout,
            remote_state_dir: std::env::var("FIREDUP_REMOTE_STATE_DIR")
                .ok()
                .filter(|v| !v.is_empty()),
        }
    }
}
