//! One SSH connection to a host and the remote firedup behind it.
//!
//! Every failure is returned as one sentence naming the host and what to do: an unreachable host,
//! an authentication failure, a host key mismatch and a missing remote shell are told apart from
//! ssh's own message.

use std::time::Duration;

use openssh::{ControlPersist, KnownHosts, Session, SessionBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::HostSpec;

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

/// What a remote command printed.
#[derive(Debug, Clone)]
pub struct Output {
    /// The remote command's exit code, as ssh reports it; `None` when there was none (a
    /// signal ended it).
    pub code: Option<i32>,
    /// What the command wrote on stdout.
    pub stdout: String,
    /// What the command wrote on stderr.
    pub stderr: String,
}

/// Connects (bounded by the connect timeout) and makes sure the agent is installed.
pub async fn open(host: &HostSpec) -> Result<Remote, String> {
    let session = connect(host).await?;
    let firedup = install_agent(&session, &host.destination).await?;
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

fn local_arch() -> &'static str {
    std::env::consts::ARCH
}

/// The name of the firedup binary in the remote cache: version and a hash of its bytes, so a
/// rebuilt firedup is copied again. It is this program when this program is firedup (the
/// command line), else the binary a library launch would supervise with (a Rust test's own
/// program is not firedup: see the crate doc).
fn agent_name() -> Result<(String, Vec<u8>), String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find firedup's own executable: {e}"))?;
    let exe = if exe.file_name() == Some("firedup".as_ref()) {
        exe
    } else {
        crate::firedup_bin::find_firedup(None).map_err(|e| e.to_string())?
    };
    let bytes = std::fs::read(&exe).map_err(|e| {
        format!(
            "cannot read firedup's own executable {}: {e}",
            exe.display()
        )
    })?;
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    Ok((
        format!("firedup-{}-{:016x}", env!("CARGO_PKG_VERSION"), h.finish()),
        bytes,
    ))
}

/// Copies this firedup to the host's cache on first use; returns its remote path.
pub async fn install_agent(session: &Session, host: &str) -> Result<String, String> {
    let (name, bytes) = agent_name()?;
    // One round trip: the architecture, $HOME, and whether the agent is there already.
    let probe = format!(
        "uname -m; printf '%s\\n' \"$HOME\"; test -x \"$HOME/.cache/firedup/bin/{name}\" && echo present || echo absent"
    );
    let out = run_sh(session, &probe, None)
        .await
        .map_err(|e| format!("{host}: {e}"))?;
    if out.code != Some(0) && out.stdout.is_empty() {
        return Err(format!(
            "{host}: cannot run a shell command there ({}): firedup needs a POSIX sh on the host",
            first_line(&out.stderr)
        ));
    }
    let mut lines = out.stdout.lines();
    let arch = lines.next().unwrap_or("").trim().to_string();
    let home = lines.next().unwrap_or("").trim().to_string();
    let present = lines.next().unwrap_or("").trim() == "present";
    if arch != local_arch() {
        return Err(format!(
            "{host} is {arch} and this firedup is built for {}: install firedup on {host} (or run a firedup built for {arch})",
            local_arch()
        ));
    }
    let path = format!("{home}/.cache/firedup/bin/{name}");
    if !present {
        let script = format!(
            "set -e; umask 077; mkdir -p \"$HOME/.cache/firedup/bin\"; t=\"$HOME/.cache/firedup/bin/.{name}.$$\"; cat > \"$t\"; chmod 700 \"$t\"; mv -f \"$t\" \"$HOME/.cache/firedup/bin/{name}\""
        );
        let out = run_sh(session, &script, Some(&bytes))
            .await
            .map_err(|e| format!("{host}: cannot copy firedup there: {e}"))?;
        if out.code != Some(0) {
            return Err(format!(
                "{host}: cannot copy firedup into ~/.cache/firedup/bin: {}",
                first_line(&out.stderr)
            ));
        }
    }
    let check = session
        .command(&path)
        .arg("--version")
        .output()
        .await
        .map_err(|e| format!("{host}: cannot run firedup there: {e}"))?;
    if !check.status.success() {
        return Err(format!(
            "{host}: the copied firedup does not run there ({}): install firedup on {host}",
            first_line(&String::from_utf8_lossy(&check.stderr))
        ));
    }
    Ok(path)
}

async fn run_sh(session: &Session, script: &str, stdin: Option<&[u8]>) -> Result<Output, String> {
    let mut cmd = session.command("sh");
    cmd.arg("-c").arg(script);
    run_with_stdin(cmd, stdin).await
}

async fn run_with_stdin(
    mut cmd: openssh::Command<'_>,
    stdin: Option<&[u8]>,
) -> Result<Output, String> {
    cmd.stdin(if stdin.is_some() {
        openssh::Stdio::piped()
    } else {
        openssh::Stdio::null()
    })
    .stdout(openssh::Stdio::piped())
    .stderr(openssh::Stdio::piped());
    let mut child = cmd.spawn().await.map_err(|e| e.to_string())?;
    if let (Some(data), Some(mut w)) = (stdin, child.stdin().take()) {
        w.write_all(data).await.map_err(|e| e.to_string())?;
        w.shutdown().await.map_err(|e| e.to_string())?;
        drop(w);
    }
    let mut out = String::new();
    let mut err = String::new();
    let mut so = child.stdout().take();
    let mut se = child.stderr().take();
    let (a, b) = tokio::join!(
        async {
            if let Some(s) = so.as_mut() {
                let _ = s.read_to_string(&mut out).await;
            }
        },
        async {
            if let Some(s) = se.as_mut() {
                let _ = s.read_to_string(&mut err).await;
            }
        }
    );
    let _ = (a, b);
    let status = child.wait().await.map_err(|e| e.to_string())?;
    Ok(Output {
        code: status.code(),
        stdout: out,
        stderr: err,
    })
}

fn first_line(s: &str) -> String {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message")
        .trim()
        .to_string()
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
