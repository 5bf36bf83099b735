//! Sweeping `/proc` for the processes of one run ([`of_run`]), by [`membership`]'s rule.

use std::collections::HashSet;
use std::fs;

use super::{all_processes, membership};

/// The processes of one run, by [`membership`]'s rule: the run's live supervisor and everything
/// below it (a daemon, a double fork, a `setsid` grandchild stays below its subreaper, also when
/// it overwrote its environment: redis's setproctitle does), and the processes of the run
/// owner's uid, started after the launch, that carry the run's `FIREDUP_RUN_ID` (a `--then`
/// command, what outlived the supervisor, a batch job's), with their descendants. Another user's
/// process is never one of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSweep {
    /// Live processes of the run, oldest first; never this process nor its ancestors (a
    /// `firedup stop` run from the run's own `--then` carries the id too).
    pub pids: Vec<u32>,
    /// Processes of the run owner's uid whose environment could not be read: not checked.
    pub unreadable: usize,
    /// The run's own supervisor, when it was alive at the sweep (one of `pids`).
    pub supervisor: Option<u32>,
    /// The start time (clock ticks after boot) of each of `pids`, in the same order.
    started: Vec<u64>,
}

impl RunSweep {
    /// What the run's command left running: `pids` but the supervisors (the run's own, known by
    /// its recorded pid, and any other `firedup __supervise` below it), each checked still alive
    /// (the same process, not a zombie) when asked.
    ///
    /// Why not by command line alone: a supervisor that ended just after the sweep reads as an
    /// empty command line (a zombie) or none at all, and was taken for a process the run left
    /// (`Running::wait` said `server_running` for a run whose every process had ended).
    pub fn beside_supervisor(&self) -> Vec<u32> {
        self.pids
            .iter()
            .zip(&self.started)
            .filter(|(p, _)| Some(**p) != self.supervisor)
            .filter(|(p, t)| !super::is_supervisor(**p) && super::is_alive(**p, Some(**t)))
            .map(|(p, _)| *p)
            .collect()
    }
}

/// Sweeps `/proc` for the live processes of run `run_id` (an empty id finds nothing).
pub fn of_run(run_id: &str) -> RunSweep {
    let mut sweep = RunSweep::default();
    if run_id.is_empty() {
        return sweep;
    }
    let run = membership::RunIdentity::of(run_id);
    let supervisor_alive = run.supervisor_alive();
    let want = format!("FIREDUP_RUN_ID={run_id}");
    let procs = all_processes();
    let mut mine: HashSet<u32> = HashSet::new();
    let mut at = std::process::id();
    while at > 1 && mine.insert(at) {
        match procs.iter().find(|(p, _)| *p == at) {
            Some((_, s)) => at = s.ppid,
            None => break,
        }
    }
    let mut members: HashSet<u32> = HashSet::new();
    if let Some(s) = run.supervisor.as_ref().filter(|_| supervisor_alive) {
        members.insert(s.pid);
    }
    for (pid, st) in &procs {
        // Init and kernel threads are never a run's (and init's environment is often closed).
        if mine.contains(pid) || *pid <= 2 || st.ppid == 2 || st.state == 'Z' {
            continue;
        }
        let uids = membership::uids(*pid);
        if uids.is_none_or(|(real, _)| real != run.owner_uid) {
            continue; // another user's: never the run's by its environment
        }
        let carries_id = match fs::read(format!("/proc/{pid}/environ")) {
            Ok(b) => b.split(|c| *c == 0).any(|e| e == want.as_bytes()),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                sweep.unreadable += 1;
                false
            }
            Err(_) => false,
        };
        let candidate = membership::Candidate {
            under_supervisor: false,
            carries_id,
            uids,
            start_ticks: st.start_ticks,
        };
        if membership::judge(&candidate, &run, supervisor_alive) == membership::Membership::Escaped
        {
            members.insert(*pid);
        }
    }
    loop {
        let before = members.len();
        for (pid, st) in &procs {
            // Through this process's own ancestors too (a `firedup stop` run by the server
            // itself): they are left out of the answer below, not out of the descent.
            if members.contains(&st.ppid) {
                members.insert(*pid);
            }
        }
        if members.len() == before {
            break;
        }
    }
    let mut found: Vec<(u64, u32)> = procs
        .iter()
        .filter(|(p, st)| {
            members.contains(p) && !mine.contains(p) && st.state != 'Z' && st.state != 'X'
        })
        .map(|(p, st)| (st.start_ticks, *p))
        .collect();
    found.sort();
    sweep.supervisor = run
        .supervisor
        .as_ref()
        .map(|s| s.pid)
        .filter(|p| supervisor_alive && found.iter().any(|(_, f)| f == p));
    (sweep.started, sweep.pids) = found.into_iter().unzip();
    sweep
}

/// Whether `pid` is a live process of run `run_id` ([`of_run`]'s rule).
pub fn is_of_run(pid: u32, run_id: &str) -> bool {
    of_run(run_id).pids.contains(&pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beside_the_supervisor_are_the_live_processes_other_than_it() {
        let me = std::process::id();
        let my_start = super::super::stat(me).unwrap().start_ticks;
        let mut ended = std::process::Command::new("true").spawn().unwrap();
        let ended_pid = ended.id();
        let ended_start = super::super::stat(ended_pid).map_or(0, |s| s.start_ticks);
        ended.wait().unwrap();
        // A zombie reads as an empty command line: it must not pass for what the run left.
        let zombie = std::process::Command::new("true").spawn().unwrap();
        let zombie_start = super::super::stat(zombie.id()).map_or(0, |s| s.start_ticks);
        while super::super::stat(zombie.id()).is_some_and(|s| s.state != 'Z') {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let cases: [(&str, Option<u32>, Vec<(u32, u64)>, Vec<u32>); 4] = [
            ("no supervisor", None, vec![(me, my_start)], vec![me]),
            (
                "the supervisor by its pid",
                Some(me),
                vec![(me, my_start)],
                vec![],
            ),
            (
                "an ended process and a zombie",
                None,
                vec![
                    (ended_pid, ended_start),
                    (zombie.id(), zombie_start),
                    (me, my_start),
                ],
                vec![me],
            ),
            (
                "another process by the same pid",
                None,
                vec![(me, my_start + 1)],
                vec![],
            ),
        ];
        for (name, supervisor, found, want) in cases {
            let sweep = RunSweep {
                pids: found.iter().map(|(p, _)| *p).collect(),
                started: found.iter().map(|(_, t)| *t).collect(),
                supervisor,
                unreadable: 0,
            };
            assert_eq!(sweep.beside_supervisor(), want, "{name}");
        }
        drop(zombie);
    }
}
