//! Running a command on the host over an open session: stdin given whole, stdout and stderr
//! read whole, the exit code as ssh reports it.

use openssh::Session;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

pub(super) async fn run_sh(
    session: &Session,
    script: &str,
    stdin: Option<&[u8]>,
) -> Result<Output, String> {
    let mut cmd = session.command("sh");
    cmd.arg("-c").arg(script);
    run_with_stdin(cmd, stdin).await
}

pub(super) async fn run_with_stdin(
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

pub(super) fn first_line(s: &str) -> String {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message")
        .trim()
        .to_string()
}
