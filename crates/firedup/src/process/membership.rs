//! Who is a process of a run, decided by what another user cannot forge.
//!
//! The run id is public (`ps` shows `firedup __supervise .../runs/ID`), so a process that carries
//! `FIREDUP_RUN_ID=ID` proves nothing by itself. Contract of [`judge`]:
//! - a process that descends from the run's live supervisor (its pid checked by the start time
//!   it recorded in `process.json`, so a reused pid is not taken) is the run's: the supervisor is
//!   a subreaper, so whatever the run starts (a daemon, a double fork, a `setsid` grandchild)
//!   stays below it while it lives, and no other process can move there;
//! - outside it (the supervisor has ended, a batch job's processes run under the scheduler's, a
//!   `--then` command runs under the launcher), a process is the run's when it carries the run's
//!   `FIREDUP_RUN_ID` AND its real and effective uid are the run owner's (the uid that owns the
//!   run directory, the one that launched it) AND it started after the launch; what descends
//!   from such a process is the run's too (it may have overwritten its environment, as redis's
//!   setproctitle does);
//! - a process of another uid is never the run's by its environment, whatever it carries: it
//!   cannot make itself the run's, since it can neither descend from the supervisor nor take
//!   the owner's uid.
//!
//! firedup makes no cgroup for a run, so no cgroup is checked. [`RunIdentity::of`] reads what the
//! rule needs from the run directory; a run id with no directory here (a cell of another host)
//! keeps the uid and environment rule with this process's uid as the owner.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::state_dir::runs_root;

/// What this rule reads of a run's `process.json` (`crate::rundir::ProcessRecord`, written by
/// the supervisor; `rundir` itself is not used here, as it uses this module).
#[derive(serde::Deserialize)]
struct SupervisorRecord {
    supervisor_pid: u32,
    #[serde(default)]
    supervisor_start_ticks: Option<u64>,
}

/// What this rule reads of a run's `meta.json` (`crate::rundir::RunMeta`, the launcher's).
#[derive(serde::Deserialize)]
struct LaunchRecord {
    started_at: f64,
}

fn read_record<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    serde_json::from_slice(&fs::read(path).ok()?).ok()
}

/// What makes a process the run's: its owner, its supervisor, when it was launched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunIdentity {
    /// The uid that launched the run (the owner of its run directory).
    pub owner_uid: u32,
    /// The supervisor the run recorded, when it did.
    pub supervisor: Option<RecordedSupervisor>,
    /// The launch, in clock ticks after boot (as `/proc/PID/stat`'s start time): a process that
    /// started before it is not the run's. `None` when unknown.
    pub launched_ticks: Option<u64>,
}

/// The supervisor as `process.json` records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedSupervisor {
    /// Its pid.
    pub pid: u32,
    /// Its start time in clock ticks after boot; `None` in records of an older firedup, where the
    /// pid is checked by its command line (`firedup __supervise RUN_DIR`) instead.
    pub start_ticks: Option<u64>,
    /// The run directory its command line names.
    pub run_path: PathBuf,
}

/// What is known of one process when its membership is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// It is the run's live supervisor or descends from it.
    pub under_supervisor: bool,
    /// Its environment carries `FIREDUP_RUN_ID=ID` of this run.
    pub carries_id: bool,
    /// Its real and effective uid (`None`: unreadable, gone).
    pub uids: Option<(u32, u32)>,
    /// Its start time, in clock ticks after boot.
    pub start_ticks: u64,
}

/// How a process belongs to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membership {
    /// The supervisor or one of its descendants.
    UnderSupervisor,
    /// Escaped from a supervisor that is gone (or a batch job's): the owner's uid, the run's id,
    /// started after the launch.
    Escaped,
    /// Not the run's.
    Not,
}

/// The membership rule (see the module doc), on facts already read. `supervisor_alive`: the
/// recorded supervisor is still the same live process.
pub fn judge(c: &Candidate, run: &RunIdentity, supervisor_alive: bool) -> Membership {
    if supervisor_alive && c.under_supervisor {
        return Membership::UnderSupervisor;
    }
    let owners = c.uids == Some((run.owner_uid, run.owner_uid));
    let after_launch = run.launched_ticks.is_none_or(|l| c.start_ticks >= l);
    if c.carries_id && owners && after_launch {
        Membership::Escaped
    } else {
        Membership::Not
    }
}

impl RunIdentity {
    /// What run `run_id`'s directory says about its processes (see the module doc).
    pub fn of(run_id: &str) -> RunIdentity {
        let mut identity = RunIdentity {
            owner_uid: rustix::process::geteuid().as_raw(),
            supervisor: None,
            launched_ticks: None,
        };
        if run_id.is_empty() || run_id.contains('/') || run_id.starts_with('.') {
            return identity;
        }
        let path = runs_root().join(run_id);
        let Ok(dir) = fs::symlink_metadata(&path) else {
            return identity;
        };
        identity.owner_uid = dir.uid();
        let process: Option<SupervisorRecord> = read_record(&path.join("process.json"));
        let launch: Option<LaunchRecord> = read_record(&path.join("meta.json"));
        if let Some(p) = process.filter(|p| p.supervisor_pid != 0) {
            identity.supervisor = Some(RecordedSupervisor {
                pid: p.supervisor_pid,
                start_ticks: p.supervisor_start_ticks.filter(|t| *t != 0),
                run_path: path,
            });
            identity.launched_ticks = p.supervisor_start_ticks.filter(|t| *t != 0);
        }
        if identity.launched_ticks.is_none() {
            // The recorded wall-clock time, less a margin for the boot time's rounding to whole
            // seconds (and its drift since).
            identity.launched_ticks =
                launch.and_then(|m| ticks_after_boot(m.started_at - LAUNCH_MARGIN_S));
        }
        identity
    }

    /// Whether the recorded supervisor is still the same live process.
    pub fn supervisor_alive(&self) -> bool {
        let Some(s) = &self.supervisor else {
            return false;
        };
        match s.start_ticks {
            Some(t) => super::is_alive(s.pid, Some(t)),
            None => {
                super::is_alive(s.pid, None)
                    && super::argv(s.pid).get(2).map(PathBuf::from).as_ref() == Some(&s.run_path)
                    && super::is_supervisor(s.pid)
            }
        }
    }
}

/// Seconds of margin when a launch time is only known as wall-clock time.
const LAUNCH_MARGIN_S: f64 = 2.0;

/// Unix time `unix` as clock ticks after boot (`None` when the boot time cannot be read or the
/// time is before it).
fn ticks_after_boot(unix: f64) -> Option<u64> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let btime: f64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let since_boot = unix - btime;
    (hz > 0 && since_boot > 0.0).then_some((since_boot * hz as f64) as u64)
}

/// The real and effective uid of `pid` (`/proc/PID/status`).
pub fn uids(pid: u32) -> Option<(u32, u32)> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    let mut ids = line.split_whitespace().map(|v| v.parse::<u32>().ok());
    Some((ids.next()??, ids.next()??))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_comes_from_descent_or_from_uid_id_and_start_together() {
        let run = RunIdentity {
            owner_uid: 1000,
            supervisor: None,
            launched_ticks: Some(500),
        };
        let c = |under_supervisor, carries_id, uids, start_ticks| Candidate {
            under_supervisor,
            carries_id,
            uids,
            start_ticks,
        };
        use Membership::*;
        let owner = Some((1000, 1000));
        let table = [
            // (candidate, supervisor alive, membership, why)
            (
                c(true, false, owner, 600),
                true,
                UnderSupervisor,
                "below the supervisor",
            ),
            (
                c(true, false, Some((0, 0)), 600),
                true,
                UnderSupervisor,
                "below it, setuid",
            ),
            (
                c(false, true, owner, 600),
                true,
                Escaped,
                "its user's, with the id, outside a live supervisor (--then)",
            ),
            (
                c(false, false, owner, 600),
                true,
                Not,
                "its user's, no id, outside a live supervisor",
            ),
            (
                c(false, true, Some((1001, 1001)), 600),
                true,
                Not,
                "another user's, id",
            ),
            (
                c(false, true, owner, 600),
                false,
                Escaped,
                "escaped: uid, id, after",
            ),
            (
                c(false, true, Some((1001, 1001)), 600),
                false,
                Not,
                "another user",
            ),
            (
                c(false, true, Some((1000, 0)), 600),
                false,
                Not,
                "setuid: euid differs",
            ),
            (
                c(false, true, Some((1001, 1000)), 600),
                false,
                Not,
                "ruid differs",
            ),
            (c(false, true, None, 600), false, Not, "uid unreadable"),
            (
                c(false, true, owner, 499),
                false,
                Not,
                "started before the launch",
            ),
            (c(false, false, owner, 600), false, Not, "no id"),
            (
                c(true, false, owner, 600),
                false,
                Not,
                "below a supervisor no longer alive",
            ),
        ];
        for (candidate, alive, want, why) in table {
            assert_eq!(judge(&candidate, &run, alive), want, "{why}");
        }
        let unknown_launch = RunIdentity {
            launched_ticks: None,
            ..run
        };
        assert_eq!(
            judge(&c(false, true, owner, 1), &unknown_launch, false),
            Escaped,
            "an unknown launch time does not exclude"
        );
    }

    #[test]
    fn reads_its_own_uids_and_a_run_with_no_directory_is_owned_by_this_user() {
        let me = rustix::process::getuid().as_raw();
        assert_eq!(
            uids(std::process::id()),
            Some((me, rustix::process::geteuid().as_raw()))
        );
        let run = RunIdentity::of("no-such-run-anywhere");
        assert_eq!(run.owner_uid, rustix::process::geteuid().as_raw());
        assert!(run.supervisor.is_none() && !run.supervisor_alive());
    }
}
