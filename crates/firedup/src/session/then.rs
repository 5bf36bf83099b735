//! `--then CMD`: after ready, a command runs next to the server (`sh -c CMD`) with where to find
//! it in its environment (`FIREDUP_LOG`, `FIREDUP_RUN_ID`, `FIREDUP_PID`, and for a server on
//! this machine `FIREDUP_HOST`, `FIREDUP_PORT`, `FIREDUP_URL`); its exit status is reported
//! beside the verdict (the `then` of the JSON verdict), while firedup's exit code stays the
//! verdict's.

use std::os::unix::process::ExitStatusExt;

use crate::error::{Context, Result};
use crate::profile::Address;
use crate::verdict::Outcome;

/// Runs `cmd` to its end and returns its status as a shell reports it (128 + N for signal N);
/// `started` hears its pid (a signal handler passes a SIGTERM on to it).
pub fn run_then(
    cmd: &str,
    o: &Outcome,
    address: Option<&Address>,
    started: &dyn Fn(u32),
) -> Result<i32> {
    let mut c = std::process::Command::new("sh");
    c.arg("-c")
        .arg(cmd)
        .env("FIREDUP_LOG", &o.log)
        .env("FIREDUP_RUN_ID", &o.run_id);
    if let Some(a) = address {
        c.env("FIREDUP_HOST", a.connect_host())
            .env("FIREDUP_PORT", a.port.to_string())
            .env("FIREDUP_URL", a.base_url());
    }
    if let Some(pid) = o.pid {
        c.env("FIREDUP_PID", pid.to_string());
    }
    if let Some(restore) = crate::oom_score::for_children() {
        // SAFETY: `apply` makes only async-signal-safe calls on memory prepared before the fork.
        unsafe {
            use std::os::unix::process::CommandExt;
            c.pre_exec(move || {
                restore.apply();
                Ok(())
            });
        }
    }
    let mut child = c.spawn().map_err(|e| {
        crate::Error::Usage(format!(
            "cannot run --then command '{}': {}",
            crate::secrets::redact_text(cmd),
            crate::launch::describe_spawn_error("sh", &e)
        ))
    })?;
    started(child.id());
    let status = child.wait().with_context(|| {
        format!(
            "cannot wait for --then command '{}'",
            crate::secrets::redact_text(cmd)
        )
    })?;
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}
