//! Which processes of a run are its ranks, from their environments (pure; the observer reads
//! `/proc`). A rank is a process whose environment names it: `RANK` (torchrun, the global rank),
//! else `LOCAL_RANK`, else `SLURM_PROCID` (an `srun` task). Of these, the most specific name seen
//! in the run wins: under `srun torchrun`, torchrun carries only `SLURM_PROCID` and its workers
//! `RANK`, so torchrun is a launcher, not rank 0. A rank's own children inherit its environment:
//! the rank is the topmost process carrying that value. And a process whose descendants carry
//! other rank values is a launcher that inherited a rank from its own environment (a node's
//! `RANK` in a job's pod), not a rank.
//!
//! A server that renames its processes (vLLM's `VLLM::EngineCore` and `VLLM::Worker_TP1`,
//! sglang's `sglang::scheduler_TP0`, by setproctitle) also blanks the environment `/proc`
//! shows: those processes are named by their title instead ([`rank_of_title`]), each one on its
//! own (a one-GPU server has one engine core and one worker, and either dying is the root cause).

use std::collections::HashMap;

/// How specific a rank's name is: lower is more specific.
pub(crate) type Level = u8;

/// The rank an environment (`/proc/PID/environ`: `KEY=VALUE` entries separated by NUL bytes)
/// names, with how specific the name is; `None` when it names none.
pub(crate) fn rank_of_environ(environ: &[u8]) -> Option<(Level, u32)> {
    const KEYS: [&[u8]; 3] = [b"RANK=", b"LOCAL_RANK=", b"SLURM_PROCID="];
    let mut best: Option<(Level, u32)> = None;
    for entry in environ.split(|b| *b == 0) {
        for (level, key) in KEYS.iter().enumerate() {
            let Some(value) = entry.strip_prefix(*key) else {
                continue;
            };
            let Some(rank) = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()) else {
                continue;
            };
            if best.is_none_or(|(l, _)| (level as Level) < l) {
                best = Some((level as Level, rank));
            }
        }
    }
    best
}

/// The rank a server process's title names: vLLM's engine core and workers, sglang's schedulers
/// (their `setproctitle` titles, as `/proc/PID/cmdline` shows them: `VLLM::EngineCore`,
/// `VLLM::EngineCore_DP1`, `VLLM::Worker`, `VLLM::Worker_PP1_TP3`, `sglang::scheduler_TP2`). The
/// rank is the tensor-parallel rank where the title gives one, else the data-parallel rank, else
/// 0; `None` for any other process (vLLM's API server and coordinator, sglang's detokenizer,
/// everything else).
pub(crate) fn rank_of_title(cmdline: &[u8]) -> Option<u32> {
    let title = cmdline.split(|b| *b == 0).next()?;
    let title = std::str::from_utf8(title).ok()?.trim();
    let (server, role) = title.split_once("::")?;
    let (role, suffix) = role.split_once('_').unwrap_or((role, ""));
    let known = match server {
        "VLLM" => matches!(role, "EngineCore" | "Worker"),
        "sglang" => role == "scheduler",
        _ => false,
    };
    if !known || suffix.contains(' ') {
        return None;
    }
    let numbered = |key: &str| {
        suffix
            .split('_')
            .find_map(|part| part.strip_prefix(key).and_then(|n| n.parse().ok()))
    };
    Some(numbered("TP").or_else(|| numbered("DP")).unwrap_or(0))
}

/// A process of the run, as the rank finder needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Member {
    pub pid: u32,
    pub ppid: u32,
    /// What its environment names, if anything.
    pub rank: Option<(Level, u32)>,
}

/// The rank processes among `members` (pid, rank), in the order given.
pub(crate) fn rank_processes(members: &[Member]) -> Vec<(u32, u32)> {
    let Some(best) = members.iter().filter_map(|m| m.rank).map(|(l, _)| l).min() else {
        return Vec::new();
    };
    let named: HashMap<u32, (u32, u32)> = members
        .iter()
        .filter_map(|m| match m.rank {
            Some((l, r)) if l == best => Some((m.pid, (m.ppid, r))),
            _ => None,
        })
        .collect();
    let parent: HashMap<u32, u32> = members.iter().map(|m| (m.pid, m.ppid)).collect();
    // The named ancestors of `pid`, nearest first (bounded against a cycle in a racy snapshot).
    let ancestors = |pid: u32| {
        let mut out = Vec::new();
        let mut at = pid;
        for _ in 0..64 {
            let Some(&up) = parent.get(&at) else { break };
            if let Some(&(_, r)) = named.get(&up) {
                out.push((up, r));
            }
            at = up;
        }
        out
    };
    let mut launchers = std::collections::HashSet::new();
    for (&pid, &(_, rank)) in &named {
        for (up, up_rank) in ancestors(pid) {
            if up_rank != rank {
                launchers.insert(up);
            }
        }
    }
    members
        .iter()
        .filter_map(|m| {
            let &(_, rank) = named.get(&m.pid)?;
            if launchers.contains(&m.pid) {
                return None;
            }
            let child_of_rank = ancestors(m.pid)
                .into_iter()
                .any(|(up, r)| r == rank && !launchers.contains(&up));
            (!child_of_rank).then_some((m.pid, rank))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environments_name_ranks_most_specific_first() {
        let cases: [(&[u8], Option<(Level, u32)>); 7] = [
            (b"PATH=/bin\0RANK=1\0LOCAL_RANK=1\0", Some((0, 1))),
            (b"LOCAL_RANK=3\0SLURM_PROCID=7\0", Some((1, 3))),
            (b"SLURM_PROCID=7\0HOME=/root\0", Some((2, 7))),
            (b"SLURM_PROCID=7\0RANK=12", Some((0, 12))),
            (b"PATH=/bin\0HOME=/root\0", None),
            (b"NODE_RANK=1\0GROUP_RANK=0\0RANK=x\0", None),
            (b"", None),
        ];
        for (environ, want) in cases {
            assert_eq!(
                rank_of_environ(environ),
                want,
                "{}",
                String::from_utf8_lossy(environ)
            );
        }
    }

    #[test]
    fn server_titles_name_ranks_and_nothing_else_does() {
        let cases: [(&[u8], Option<u32>); 12] = [
            (b"VLLM::EngineCore\0\0\0", Some(0)),
            (b"VLLM::EngineCore_DP1", Some(1)),
            (b"VLLM::Worker", Some(0)),
            (b"VLLM::Worker_TP3", Some(3)),
            (b"VLLM::Worker_DP1_PP1_TP2_EP5", Some(2)),
            (b"sglang::scheduler_TP1", Some(1)),
            (b"sglang::scheduler_DP1_TP0", Some(0)),
            (b"VLLM::APIServer_0", None),
            (b"sglang::detokenizer", None),
            // Not a title: a command line whose first argument merely looks like one.
            (b"python3\0-m\0VLLM::Worker", None),
            (b"VLLM::Worker_TP1 --port 8000", None),
            (b"", None),
        ];
        for (cmdline, want) in cases {
            assert_eq!(
                rank_of_title(cmdline),
                want,
                "{}",
                String::from_utf8_lossy(cmdline)
            );
        }
    }

    fn m(pid: u32, ppid: u32, rank: Option<(Level, u32)>) -> Member {
        Member { pid, ppid, rank }
    }

    #[test]
    fn finds_the_topmost_process_of_each_rank() {
        let cases: Vec<(&str, Vec<Member>, Vec<(u32, u32)>)> = vec![
            (
                "torchrun (no rank) and its two workers",
                vec![
                    m(10, 1, None),
                    m(11, 10, Some((0, 0))),
                    m(12, 10, Some((0, 1))),
                ],
                vec![(11, 0), (12, 1)],
            ),
            (
                "a worker's own children (a data loader, a compile worker) inherit its rank",
                vec![
                    m(10, 1, None),
                    m(11, 10, Some((0, 0))),
                    m(12, 10, Some((0, 1))),
                    m(13, 12, Some((0, 1))),
                    m(14, 13, Some((0, 1))),
                ],
                vec![(11, 0), (12, 1)],
            ),
            (
                "srun torchrun: the task's SLURM_PROCID is the launcher's, RANK the workers'",
                vec![
                    m(10, 1, Some((2, 0))),
                    m(11, 10, Some((0, 0))),
                    m(12, 10, Some((0, 1))),
                ],
                vec![(11, 0), (12, 1)],
            ),
            (
                "srun tasks alone are the ranks",
                vec![m(10, 1, Some((2, 0))), m(11, 1, Some((2, 1)))],
                vec![(10, 0), (11, 1)],
            ),
            (
                "a launcher that inherited RANK=0 (a node's rank) is not rank 0",
                vec![
                    m(10, 1, Some((0, 0))),
                    m(11, 10, Some((0, 0))),
                    m(12, 10, Some((0, 1))),
                ],
                vec![(11, 0), (12, 1)],
            ),
            (
                "a shell wrapper of a rank is the rank's topmost process",
                vec![
                    m(10, 1, None),
                    m(11, 10, Some((0, 0))),
                    m(21, 11, Some((0, 0))),
                    m(12, 10, Some((0, 1))),
                    m(22, 12, Some((0, 1))),
                ],
                vec![(11, 0), (12, 1)],
            ),
            (
                "no process names a rank",
                vec![m(10, 1, None), m(11, 10, None)],
                vec![],
            ),
        ];
        for (what, members, want) in cases {
            assert_eq!(rank_processes(&members), want, "{what}");
        }
    }
}
