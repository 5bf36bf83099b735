//! One SSH connection to a host and the remote firedup behind it.
//!
//! Every failure is returned as one sentence naming the host and what to do: an unreachable host,
//! an authentication failure, a host key mismatch and a missing remote shell are told apart from
//! ssh's own message.

use std::time::Duration;

use openssh::{ControlPersist, KnownHosts, Session, SessionBuilder};

use super::HostSpec;
pub use super::shell::Output;
use super::shell::run_with_stdin;

/// An open connection and the path of the firedup agent on the host.
#[derive(Debug)]
pub struct Remote {
    /// The ControlMaster connection; every remote action is a channel of it.
    pub session: Session,
    /// The destination as the user wrote it (`user@host`, an ssh config alias).
    pub host: String,
    /// Path on the host of the installed firedup (`~/.cache/firedup/bin/firedup-VERSION-HASH`).
    pub firedup: String,
    state_dir: Option<String>,
}

/// Connects (bounded by the connect timeout) and makes sure the agent is installed.
pub async fn open(host: &HostSpec) -> Result<Remote, String> {
    let session = connect(host).await?;
    let firedup = super::agent_copy::install_agent(&session, &host.destination).await?;
    Ok(Remote {
        session,
        host: host.destination.clone(),
        firedup,
        state_dir: host.remote_state_dir.clone(),
    })
}

/// Opens the ControlMaster connection.
pub async fn connect(host: &HostSpec) -> Result<Session, String> {
    let mut b = SessionBuilder::default();
    b.known_hosts_check(KnownHosts::Add)
        .connect_timeout(host.connect_timeout)
        .server_alive_interval(Duration::from_secs(1))
        // If firedup dies holding the connection, its master exits once idle instead of
        // lingering. (openssh's cleaning of old control dirs is not used: it races with other
        // firedups running at the same time and removes their live sockets.)
        .control_persist(ControlPersist::IdleFor(
            std::num::NonZeroUsize::new(10).expect("non-zero"),
        ));
    if let Some(c) = &host.config_file {
        b.config_file(c);
    }
    // ssh's own ConnectTimeout bounds the TCP connect; the whole handshake is bounded here too.
    let limit = host.connect_timeout + Duration::from_secs(5);
    match tokio::time::timeout(limit, b.connect(&host.destination)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(describe_connect_error(&host.destination, &e)),
        Err(_) => Err(format!(
            "cannot connect to {} over SSH: no answer within {}s (check the host name and that it is up)",
            host.destination,
            limit.as_secs()
        )),
    }
}

/// One sentence for a failed connection, from ssh's own message.
pub fn describe_connect_error(host: &str, e: &openssh::Error) -> String {
    let raw = match e {
        openssh::Error::Connect(io) | openssh::Error::Master(io) => io.to_string(),
        other => other.to_string(),
    };
    let msg = raw.trim().replace('\n', " ");
    let lower = msg.to_lowercase();
    let what = if lower.contains("host key verification failed")
        || lower.contains("remote host identification has changed")
    {
        "the host key does not match known_hosts (if the host was reinstalled, check and update known_hosts)"
    } else if lower.contains("permission denied") {
        "authentication failed (check your key, ssh-agent and the user name)"
    } else if lower.contains("could not resolve hostname")
        || lower.contains("name or service not known")
    {
        "the host name does not resolve"
    } else if lower.contains("connection refused") {
        "the connection was refused (is sshd running on that port?)"
    } else if lower.contains("timed out") || lower.contains("timeout") {
        "it did not answer within the connect timeout (is it up and reachable?)"
    } else if lower.contains("no route to host") || lower.contains("network is unreachable") {
        "there is no route to it"
    } else {
        "ssh failed"
    };
    format!("cannot connect to {host} over SSH: {what}; ssh said: {msg}")
}

impl Remote {
    /// A command running the remote firedup with `args` (and the remote state dir, if set).
    pub fn firedup_command(&self, args: &[&str]) -> openssh::Command<'_> {
        let mut cmd = match &self.state_dir {
            Some(d) => {
                let mut c = self.session.command("env");
                c.arg(format!("FIREDUP_STATE_DIR={d}")).arg(&self.firedup);
                c
            }
            None => self.session.command(&self.firedup),
        };
        cmd.args(args);
        cmd
    }

    /// Runs the remote firedup with `args`, `stdin` (e.g. a JSON request) written to it.
    pub async fn firedup(&self, args: &[&str], stdin: Option<&[u8]>) -> Result<Output, String> {
        run_with_stdin(self.firedup_command(args), stdin)
            .await
            .map_err(|e| format!("{}: remote firedup failed: {e}", self.host))
    }

    /// Closes the connection (bounded: a frozen link must not hold firedup).
    pub async fn close(self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.session.close()).await;
    }
}

/// A current-thread runtime for the blocking parts of firedup that talk to a host.
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the SSH runtime: {e}"))
}
