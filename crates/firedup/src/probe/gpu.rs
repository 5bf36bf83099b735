//! GPU memory of the watched tree, from `nvidia-smi`.
//!
//! [`tree_memory_mib`] runs `nvidia-smi --query-compute-apps=pid,used_memory
//! --format=csv,noheader,nounits` and sums the memory of the lines whose pid is in the tree:
//! - no `nvidia-smi` on `PATH` → `Ok(None)` (no NVIDIA GPU to speak of);
//! - no compute process at all (blank output) → `Ok(Some(0))`;
//! - `[N/A]` or `[Not Supported]` memory (some drivers, MIG, containers) counts as 0;
//! - a non-zero exit → `Err` with the first line of what it printed (the driver's own words);
//! - no answer within [`NVIDIA_SMI_TIMEOUT`] → `Err`: `nvidia-smi` hangs on a broken driver or a
//!   GPU that fell off the bus, so it runs in a process group of its own that is killed on timeout.
//!
//! Inside a container with its own pid namespace, `nvidia-smi` reports host pids (or none), which
//! match no pid of the tree: the sum is then 0, not an error.
//!
//! [`gpu_pids`] lists every compute process, for teardown checks ("is the GPU free again").

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::duration::format_duration;

/// How long `nvidia-smi` may take to answer.
pub const NVIDIA_SMI_TIMEOUT: Duration = Duration::from_secs(5);

const QUERY: [&str; 2] = [
    "--query-compute-apps=pid,used_memory",
    "--format=csv,noheader,nounits",
];

/// GPU memory (MiB) held by the processes `pids`, from `nvidia-smi`. `Ok(None)` when there is no
/// `nvidia-smi`; `Err` when it exists but fails.
pub fn tree_memory_mib(pids: &[u32]) -> Result<Option<u64>, String> {
    match find_on_path("nvidia-smi") {
        Some(program) => tree_memory_mib_with(&program, pids, NVIDIA_SMI_TIMEOUT),
        None => Ok(None),
    }
}

/// [`tree_memory_mib`] with the program and the timeout given (tests use a stand-in script). A
/// program that does not exist is `Ok(None)`, as a missing `nvidia-smi` is.
pub fn tree_memory_mib_with(
    program: &Path,
    pids: &[u32],
    timeout: Duration,
) -> Result<Option<u64>, String> {
    Ok(compute_apps(program, timeout)?.map(|apps| {
        apps.iter()
            .filter(|(pid, _)| pids.contains(pid))
            .map(|(_, mib)| mib.unwrap_or(0))
            .sum()
    }))
}

/// Every GPU compute process as (pid, MiB), one entry per pid (summed over GPUs); MiB is `None`
/// when the driver does not report it. `Ok(None)` when there is no `nvidia-smi`.
pub fn gpu_pids() -> Result<Option<Vec<(u32, Option<u64>)>>, String> {
    match find_on_path("nvidia-smi") {
        Some(program) => gpu_pids_with(&program, NVIDIA_SMI_TIMEOUT),
        None => Ok(None),
    }
}

/// [`gpu_pids`] with the program and the timeout given.
pub fn gpu_pids_with(
    program: &Path,
    timeout: Duration,
) -> Result<Option<Vec<(u32, Option<u64>)>>, String> {
    Ok(compute_apps(program, timeout)?.map(|apps| {
        let mut merged: Vec<(u32, Option<u64>)> = Vec::new();
        for (pid, mib) in apps {
            match merged.iter_mut().find(|(p, _)| *p == pid) {
                Some((_, total)) => {
                    *total = match (*total, mib) {
                        (Some(a), Some(b)) => Some(a + b),
                        (a, b) => a.or(b),
                    }
                }
                None => merged.push((pid, mib)),
            }
        }
        merged
    }))
}

/// The lines of `--query-compute-apps=pid,used_memory --format=csv,noheader,nounits` output as
/// (pid, MiB), one per process and GPU. Lines without a numeric pid (a message such as "No running
/// processes found", `[N/A]` pids) are skipped; a memory that is not a number is `None`.
pub fn parse_compute_apps(text: &str) -> Vec<(u32, Option<u64>)> {
    text.lines()
        .filter_map(|line| {
            let (pid, mib) = line.split_once(',')?;
            let pid = pid.trim().parse().ok()?;
            Some((pid, mib.trim().parse().ok()))
        })
        .collect()
}

fn compute_apps(
    program: &Path,
    timeout: Duration,
) -> Result<Option<Vec<(u32, Option<u64>)>>, String> {
    Ok(run_bounded(program, &QUERY, timeout)?.map(|out| parse_compute_apps(&out)))
}

/// `program` on `PATH`, when it is an executable file.
fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Runs `program args` and returns its stdout when it exits 0 within `timeout`. `Ok(None)` when
/// the program does not exist.
fn run_bounded(program: &Path, args: &[&str], timeout: Duration) -> Result<Option<String>, String> {
    let name = program.file_name().map_or_else(
        || program.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let deadline = Instant::now() + timeout;
    let mut child = match Command::new(program)
        .args(args)
        // The driver's messages in English whatever the locale, for the first-line error.
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A group of its own, so that a timeout kills whatever it started too (and nothing holds
        // the pipes open after).
        .process_group(0)
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot run {}: {e}", program.display())),
    };
    // Both pipes are drained on threads while the process runs: a full pipe would block it.
    let (tx, rx) = mpsc::channel();
    for (which, pipe) in [
        (
            0,
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
        (
            1,
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            let _ = tx.send((which, buf));
        });
    }
    drop(tx);
    let status = match wait_until(&mut child, deadline) {
        Some(status) => status,
        None => {
            if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{name} did not answer within {}",
                format_duration(timeout)
            ));
        }
    };
    let mut out = [Vec::new(), Vec::new()];
    for _ in 0..2 {
        // The process has exited; its pipes end at once unless something it left behind holds
        // them, so this wait is short.
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok((which, buf)) => out[which] = buf,
            Err(_) => break,
        }
    }
    let [stdout, stderr] = out.map(|b| String::from_utf8_lossy(&b).into_owned());
    if status.success() {
        return Ok(Some(stdout));
    }
    // nvidia-smi prints driver failures on stdout, usage errors on stderr.
    let said = [&stderr, &stdout]
        .into_iter()
        .find_map(|t| t.lines().map(str::trim).find(|l| !l.is_empty()))
        .map(|l| format!(": {l}"))
        .unwrap_or_default();
    Err(format!("{name} failed ({status}){said}"))
}

/// Waits for `child` to exit until `deadline`; `None` when it is still running then.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    let pidfd = rustix::process::pidfd_open(
        rustix::process::Pid::from_child(child),
        rustix::process::PidfdFlags::empty(),
    );
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        match &pidfd {
            // The pidfd becomes readable when the process exits: no polling interval.
            Ok(fd) => {
                let ts = rustix::event::Timespec {
                    tv_sec: left.as_secs() as i64,
                    tv_nsec: left.subsec_nanos() as i64,
                };
                let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
                let _ = rustix::event::poll(&mut fds, Some(&ts));
            }
            // No pidfd (kernel before 5.3): poll the exit status.
            Err(_) => std::thread::sleep(left.min(Duration::from_millis(20))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounded_wait::{HANG, bounded};
    use std::fs;

    /// A stand-in `nvidia-smi`: a shell script with `body`.
    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// Runs `f`, retrying while exec says "Text file busy": another test thread forking while a
    /// script was being written can briefly hold it open for writing.
    fn retry_busy<T>(f: impl Fn() -> Result<T, String>) -> Result<T, String> {
        for _ in 0..20 {
            match f() {
                Err(e) if e.contains("Text file busy") => continue,
                other => return other,
            }
        }
        f()
    }

    const T: Duration = Duration::from_secs(10);

    #[test]
    fn parses_compute_apps_with_unknown_memory() {
        let text = "1234, 40320\n5678, [N/A]\n1234, 1000\n[N/A], 200\n9, [Not Supported]\n\n";
        assert_eq!(
            parse_compute_apps(text),
            vec![
                (1234, Some(40320)),
                (5678, None),
                (1234, Some(1000)),
                (9, None)
            ]
        );
        assert_eq!(parse_compute_apps(""), vec![]);
        assert_eq!(parse_compute_apps("No running processes found\n"), vec![]);
    }

    #[test]
    fn sums_the_memory_of_the_tree_only() {
        let dir = tempfile::tempdir().unwrap();
        let smi = script(
            dir.path(),
            "nvidia-smi",
            r#"[ "$1 $2" = "--query-compute-apps=pid,used_memory --format=csv,noheader,nounits" ] || exit 2
printf '1234, 40320\n5678, [N/A]\n1234, 1000\n4321, 7\n'"#,
        );
        assert_eq!(
            retry_busy(|| tree_memory_mib_with(&smi, &[1234, 5678], T)),
            Ok(Some(41320))
        );
        assert_eq!(
            retry_busy(|| tree_memory_mib_with(&smi, &[1], T)),
            Ok(Some(0))
        );
        assert_eq!(
            retry_busy(|| gpu_pids_with(&smi, T)),
            Ok(Some(vec![
                (1234, Some(41320)),
                (5678, None),
                (4321, Some(7))
            ]))
        );
        let empty = script(dir.path(), "empty", "exit 0");
        assert_eq!(
            retry_busy(|| tree_memory_mib_with(&empty, &[1], T)),
            Ok(Some(0))
        );
        assert_eq!(
            tree_memory_mib_with(&dir.path().join("absent"), &[1], T),
            Ok(None)
        );
    }

    #[test]
    fn a_failing_nvidia_smi_is_an_error_with_its_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let smi = script(
            dir.path(),
            "nvidia-smi",
            "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"\n\
             echo 'Make sure that the latest NVIDIA driver is installed and running.'\nexit 9",
        );
        assert_eq!(
            retry_busy(|| tree_memory_mib_with(&smi, &[1], T)),
            Err(
                "nvidia-smi failed (exit status: 9): NVIDIA-SMI has failed because it couldn't \
                 communicate with the NVIDIA driver."
                    .into()
            )
        );
        let smi = script(dir.path(), "other", "echo 'bad flag' >&2\nexit 1");
        assert_eq!(
            retry_busy(|| tree_memory_mib_with(&smi, &[1], T)),
            Err("other failed (exit status: 1): bad flag".into())
        );
    }

    #[test]
    fn a_hanging_nvidia_smi_is_killed_at_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        // Not `exec`: the sleep is a grandchild holding the pipes, killed with the group.
        let smi = script(
            dir.path(),
            "nvidia-smi",
            "echo '1, 2'\nsleep 30\necho '3, 4'",
        );
        let got = bounded("a hanging nvidia-smi", HANG, move || {
            retry_busy(|| tree_memory_mib_with(&smi, &[1], Duration::from_millis(300)))
        });
        assert_eq!(got, Err("nvidia-smi did not answer within 300ms".into()));
    }

    /// Against the real `nvidia-smi`, on a machine with one (`cargo test -- --ignored`): the
    /// output format and a process of ours holding GPU memory, when `FIREDUP_GPU_PID` names one.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn real_nvidia_smi() {
        let apps = gpu_pids()
            .expect("nvidia-smi runs")
            .expect("nvidia-smi on PATH");
        eprintln!("compute apps: {apps:?}");
        if let Ok(pid) = std::env::var("FIREDUP_GPU_PID") {
            let pid: u32 = pid.parse().unwrap();
            let mib = tree_memory_mib(&[pid]).unwrap().unwrap();
            eprintln!("pid {pid}: {mib} MiB");
            assert!(mib > 0, "{apps:?}");
        }
    }
}
