//! The hidden commands (`__supervise`, `__agent`, `__remote-launch`, `__meta`,
//! `__record-verdict`, `__slurm-submit`, `__slurm-job`) wired to this process's standard
//! streams: the library functions behind them take their streams as arguments (the library
//! prints nothing), and get stdin, stdout and stderr here.

use std::os::fd::AsFd;
use std::path::Path;

use anyhow::{Context, Result};

/// `firedup __supervise RUN_DIR`: the launcher reads the supervisor's reports on stdout. The
/// supervisor keeps that pipe as a file of its own and puts /dev/null on stdout, so that nothing
/// else (nor a command it starts, before its exec) can write on the pipe.
///
/// The log comes opened on descriptor `log_fd` (the launcher opened and checked it: the path is
/// not opened again); it is made close-on-exec here, so only the command's stdout and stderr
/// carry it on.
pub(crate) fn supervise(run_dir: &Path, log_fd: Option<i32>) -> Result<i32> {
    let log = match log_fd {
        Some(fd) => {
            // SAFETY: fcntl on a descriptor number; failure (not open) is checked.
            if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
                anyhow::bail!("the launcher gave no log on descriptor {fd}");
            }
            // SAFETY: the descriptor is open (checked above) and handed to this process alone.
            Some(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) })
        }
        None => None,
    };
    let launcher = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .context("cannot keep the pipe to the launcher")?;
    // SAFETY: dup2 of a freshly opened /dev/null onto stdout; nothing holds a lock on stdout yet.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        if null >= 0 {
            libc::dup2(null, 1);
            libc::close(null);
        }
    }
    let code = firedup::launch::supervise(
        run_dir,
        &mut std::io::stdin().lock(),
        launcher,
        log,
        &mut std::io::stderr(),
    )?;
    // A run stopped because its owner ended (`run --owner`): the history says so, also when no
    // `firedup run` is left to record anything.
    let run = firedup::rundir::RunDir {
        id: run_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        path: run_dir.to_path_buf(),
    };
    if let Some(gone) = run.owner_gone() {
        crate::history::owner_gone::record_owner_gone(&run, &gone);
    }
    Ok(code)
}

/// `firedup __agent`: the spec on stdin, the stream on stdout.
pub(crate) fn agent() -> Result<i32> {
    Ok(firedup::agent::run(
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
    )?)
}

/// `firedup __remote-launch`: the launch spec on stdin, the answer on stdout.
pub(crate) fn remote_launch() -> Result<i32> {
    Ok(firedup::agent::remote_launch(
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
    )?)
}

/// `firedup __meta RUN_ID`: the run's record on stdout.
pub(crate) fn meta(run_id: &str) -> Result<i32> {
    Ok(firedup::agent::meta(run_id, &mut std::io::stdout().lock())?)
}

/// `firedup __record-verdict RUN_ID`: the verdict (JSON) on stdin, into the run's directory.
pub(crate) fn record_verdict(run_id: &str) -> Result<i32> {
    Ok(firedup::agent::record_verdict(
        run_id,
        &mut std::io::stdin().lock(),
    )?)
}

/// `firedup __slurm-submit`: the submit request on stdin, the answer on stdout.
pub(crate) fn slurm_submit() -> Result<i32> {
    Ok(firedup::host::slurm::login_side::submit(
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr(),
    )?)
}

/// `firedup __slurm-job JOBID`: where the job writes, on stdout.
pub(crate) fn slurm_job(job_id: &str) -> Result<i32> {
    Ok(firedup::host::slurm::login_side::job(
        job_id,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr(),
    )?)
}
