//! The ranks of a watched run, live. At each usage sample, and every 2 s during the run's first
//! two minutes and while ranks live, the observer hands over the process tree it has just read;
//! the environment of each process not seen before is read once (a run without ranks costs no
//! environment reads after its first scan), and the rank processes are picked
//! ([`crate::rank_processes`]); they are watched once two ranks are seen. A process a server
//! renamed to a rank's title (vLLM's engine core and workers, sglang's schedulers: their
//! environment reads blank) is watched on its own, even alone, and its end counts only while
//! every process above it in the tree still lives and only when it failed (a signal other than
//! the SIGTERM, SIGINT or SIGHUP of a shutdown, or a non-zero exit): a server whose own process
//! died takes its engine and workers down with it, and those ends are not the root cause (one
//! whose status its parent reaped first is handed to the observer, which asks the kernel log
//! whether the OOM killer killed it). Each rank process gets a pidfd and a thread blocked on it: the
//! moment it dies, how it ended ([`crate::process::ending`]) is sent as
//! [`Observation::RankEnded`], in the order of death, once per rank. While two or more ranks
//! live and neither a line has come nor the tree used CPU for a while (half the stall window:
//! five sampling intervals), their stacks are compared on a thread ([`crate::rank_stacks`]):
//! `py-spy dump` where it is on the PATH, else the kernel's view of each main thread; a rank
//! outside the collective its peers wait in is sent as [`Observation::RankOutsideCollective`],
//! once until another rank is. Each look also sends where every rank was
//! ([`Observation::RankPlaces`]), and a rank seen alone (not watched: it may be a process that
//! inherited a rank, an `srun` task's job) has its place read the same way while it is silent: a
//! node of a multi-node run with one rank per node has nothing of its own to compare it with, and
//! the group compares it with the other nodes' (`firedup_judge::group`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{Wake, WakeTx};
use crate::judge::Observation;
use crate::process::{self, ending::Ending};
use crate::rank_processes::{Level, Member, rank_of_environ, rank_of_title, rank_processes};
use crate::rank_stacks;

mod stack_views;

/// At most this many rank processes are watched at once (each holds a thread and a pidfd).
const MAX_RANKS: usize = 64;
/// The stacks are compared after this many usage samples without a line (the sample interval
/// is a tenth of the stall window: this is half of it), then again at every sample while the
/// silence lasts: one look can catch a rank between two waits (or a machine too loaded to have
/// settled), and the stall verdict, at the whole window, must find the answer already there.
const SILENT_SAMPLES: u32 = 5;
/// How often the tree is scanned for new ranks besides the usage samples: during the run's first
/// [`FAST_SCAN_FOR`] and while ranks live (a rank that dies before it was seen is known only from
/// the launcher's log line), else at the usage samples alone.
const FAST_SCAN: Duration = Duration::from_secs(2);
const FAST_SCAN_FOR: Duration = Duration::from_secs(120);
/// CPU use of the tree that counts as activity, as the judge counts progress: 2% of one core
/// (in the kernel's 100 ticks a second).
const BUSY_TICKS_PER_SEC: f64 = 2.0;

struct Watched {
    rank: u32,
    pid: u32,
    /// Its start time: a pid reused by another process is not this rank alive.
    start: u64,
    /// Named by its title (not its environment): never found to be a launcher.
    by_title: bool,
    /// Set when the process is found to be a launcher after all, or has ended.
    done: Arc<AtomicBool>,
}

/// The ranks seen in the run, and what has been reported about them.
pub(super) struct RankWatch {
    /// Each process of the tree seen so far.
    seen: HashMap<u32, Seen>,
    watched: Vec<Watched>,
    ended_reported: HashSet<u32>,
    outside_reported: Option<u32>,
    last_line: Instant,
    sample_every: Duration,
    /// The tree's CPU ticks at the last usage sample, and when it was taken.
    last_cpu: Option<(u64, Instant)>,
    silent_after: Duration,
    next_check: Instant,
    checking: Arc<AtomicBool>,
    /// A comparison was started and its end not yet seen by [`RankWatch::check_silence`].
    started_check: bool,
    began: Instant,
    /// When the tree should be scanned again between usage samples; `None`: at them only.
    next_scan: Option<Instant>,
    /// The one rank seen when no second is: (rank, pid, start time). Not watched for its end;
    /// only its place is read while it is silent.
    lone: Option<(u32, u32, u64)>,
}

/// A process of the tree as first read (its rank re-read until it shows one).
#[derive(Debug, Clone, Copy)]
struct Seen {
    start: u64,
    ppid: u32,
    /// The rank its environment names.
    rank: Option<(Level, u32)>,
    /// The rank its title names ([`rank_of_title`]).
    titled: Option<u32>,
}

impl Seen {
    fn read(pid: u32, start: u64, ppid: u32) -> Seen {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let rank = rank_of_environ(&environ);
        let titled = if rank.is_none() {
            rank_of_title(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default())
        } else {
            None
        };
        Seen {
            start,
            ppid,
            rank,
            titled,
        }
    }

    fn named(&self) -> bool {
        self.rank.is_some() || self.titled.is_some()
    }
}

impl RankWatch {
    pub(super) fn new(sample_every: Duration) -> RankWatch {
        let silent_after = sample_every * SILENT_SAMPLES;
        RankWatch {
            seen: HashMap::new(),
            watched: Vec::new(),
            ended_reported: HashSet::new(),
            outside_reported: None,
            last_line: Instant::now(),
            sample_every,
            last_cpu: None,
            silent_after,
            next_check: Instant::now() + silent_after,
            checking: Arc::new(AtomicBool::new(false)),
            started_check: false,
            began: Instant::now(),
            next_scan: Some(Instant::now()),
            lone: None,
        }
    }

    /// The ranks' CPU ticks at a usage sample ([`RankWatch::ranks_ticks`]): the ranks are not
    /// silent while they compute.
    pub(super) fn usage_sample(&mut self, cpu_ticks: u64) {
        // Busy as the judge counts progress: over the time since the last sample as it passed,
        // not the nominal interval. A loaded machine samples late, and the ticks of a longer
        // interval counted against a shorter one were work the judge did not see: the
        // silence restarted here while the judge's ran on, and its stall came before any
        // comparison (seen on a loaded CI run: `stalled`, rank null).
        let now = Instant::now();
        let active = self.last_cpu.is_some_and(|(before, at)| {
            let busy = BUSY_TICKS_PER_SEC * now.duration_since(at).as_secs_f64();
            cpu_ticks.saturating_sub(before) as f64 >= busy
        });
        self.last_cpu = Some((cpu_ticks, now));
        if active {
            self.heard_line();
        }
    }

    /// The CPU ticks of the ranks a look reads, not of the whole tree: a launcher that computes
    /// beside ranks that wait (torchrun's agent, polling its workers) says nothing of where the
    /// ranks are, and restarting their silence for it put their stacks' next look 10 s later.
    /// Under load that look came after a multi-node group had decided without it (the CI of
    /// `8b91b12`: `stalled`, node 0, rank null, the other node's rank outside the collective
    /// unnamed). The judge still counts the whole tree's work as progress.
    pub(super) fn ranks_ticks(&self) -> u64 {
        self.to_read()
            .iter()
            .filter_map(|&(_, pid)| process::stat(pid))
            .map(|s| s.cpu_ticks)
            .sum()
    }

    /// A line arrived (or the ranks compute): the ranks are not silent.
    pub(super) fn heard_line(&mut self) {
        self.last_line = Instant::now();
        self.next_check = self.last_line + self.silent_after;
    }

    fn live(&self) -> impl Iterator<Item = &Watched> {
        self.watched
            .iter()
            .filter(|w| !w.done.load(Ordering::Acquire))
    }

    /// Whether a watched rank has ended but its watcher has not reported it yet (its thread has
    /// not run since, on a loaded machine): the run's exit waits for it, so the judge knows every
    /// rank's end that came before the run's (a launcher reaps its dead rank, stops the others
    /// and exits at once).
    pub(super) fn ends_unreported(&self) -> bool {
        self.live()
            .any(|w| !process::is_alive(w.pid, Some(w.start)))
    }

    /// The rank seen alone, while it lives: (rank, pid).
    fn lone_alive(&self) -> Option<(u32, u32)> {
        let (rank, pid, start) = self.lone?;
        process::is_alive(pid, Some(start)).then_some((rank, pid))
    }

    /// The ranks whose stacks a look reads: the live watched ones when two or more are, else the
    /// one seen alone.
    fn to_read(&self) -> Vec<(u32, u32)> {
        let ranks: Vec<(u32, u32)> = self.live().map(|w| (w.rank, w.pid)).collect();
        match ranks.len() {
            0 | 1 => self.lone_alive().into_iter().collect(),
            _ => ranks,
        }
    }

    /// When the observer should be collected for the next scan or stack comparison, if any.
    pub(super) fn next_wake(&self) -> Option<Instant> {
        let check =
            (self.live().count() >= 2 || self.lone_alive().is_some()).then_some(self.next_check);
        check.into_iter().chain(self.next_scan).min()
    }

    /// Whether the tree should be scanned now, between usage samples.
    pub(super) fn scan_due(&self) -> bool {
        self.next_scan.is_some_and(|at| Instant::now() >= at)
    }

    /// Whether an observation from a rank thread is new (once per rank ended; a rank outside a
    /// collective once until another is).
    pub(super) fn admit(&mut self, o: &Observation) -> bool {
        match o {
            Observation::RankEnded { rank, .. } => self.ended_reported.insert(*rank),
            Observation::RankOutsideCollective { rank, .. } => {
                self.outside_reported.replace(*rank) != Some(*rank)
            }
            _ => true,
        }
    }

    /// Learns the ranks among the process tree `tree` of `root` (just read), and starts watching
    /// new ones.
    pub(super) fn discover(
        &mut self,
        root: u32,
        tree: &[u32],
        tx: &WakeTx,
        stop: &Arc<AtomicBool>,
    ) {
        self.learn(root, tree, tx, stop);
        let fast = self.began.elapsed() < FAST_SCAN_FOR || self.live().next().is_some();
        self.next_scan = fast.then(|| Instant::now() + FAST_SCAN);
    }

    fn learn(&mut self, root: u32, tree: &[u32], tx: &WakeTx, stop: &Arc<AtomicBool>) {
        let mut changed = false;
        let mut current = HashMap::with_capacity(tree.len());
        for &pid in tree {
            let Some(st) = process::stat(pid) else {
                continue;
            };
            let known = self.seen.get(&pid).filter(|s| s.start == st.start_ticks);
            let entry = match known {
                // A process read between its fork and its exec shows its parent's environment,
                // and a server names its process only once it runs: one without a rank is read
                // again until it shows one (a few µs a process).
                Some(s) if !s.named() => {
                    let again = Seen::read(pid, s.start, s.ppid);
                    changed |= again.named();
                    again
                }
                Some(s) => *s,
                None => {
                    changed = true;
                    Seen::read(pid, st.start_ticks, st.ppid)
                }
            };
            current.insert(pid, entry);
        }
        changed |= current.len() != self.seen.len();
        self.seen = current;
        if !changed {
            return;
        }
        self.watch_titled(root, tx, stop);
        if self.seen.values().all(|s| s.rank.is_none()) {
            return;
        }
        let mut members: Vec<(u64, Member)> = self
            .seen
            .iter()
            .map(|(&pid, s)| {
                let m = Member {
                    pid,
                    ppid: s.ppid,
                    rank: s.rank,
                };
                (s.start, m)
            })
            .collect();
        members.sort_by_key(|(start, m)| (*start, m.pid));
        let members: Vec<Member> = members.into_iter().map(|(_, m)| m).collect();
        let ranks = rank_processes(&members);
        // One rank alone is no multi-rank run (a job inside an `srun` task inherits its
        // SLURM_PROCID): ranks are watched once two are seen.
        let values: HashSet<u32> = ranks.iter().map(|(_, r)| *r).collect();
        if values.len() < 2 && self.watched.iter().all(|w| w.by_title) {
            self.lone = match ranks.as_slice() {
                [(pid, rank)] => Some((*rank, *pid, self.seen[pid].start)),
                _ => None,
            };
            return;
        }
        self.lone = None;
        // A process watched as a rank that turned out to be a launcher is no longer watched.
        for w in self.watched.iter().filter(|w| !w.by_title) {
            if self.seen.contains_key(&w.pid) && !ranks.iter().any(|(p, _)| *p == w.pid) {
                w.done.store(true, Ordering::Relaxed);
            }
        }
        self.watched.retain(|w| !w.done.load(Ordering::Relaxed));
        for (pid, rank) in ranks {
            self.watch(pid, rank, None, tx, stop);
        }
    }

    /// Starts watching `pid` as rank `rank` unless it is watched already (or too many are);
    /// `above`: for a process named by its title, the processes above it.
    fn watch(
        &mut self,
        pid: u32,
        rank: u32,
        above: Option<Vec<(u32, u64)>>,
        tx: &WakeTx,
        stop: &Arc<AtomicBool>,
    ) {
        if self.watched.iter().any(|w| w.pid == pid) || self.watched.len() >= MAX_RANKS {
            return;
        }
        let start = self.seen[&pid].start;
        let Some(ending) = Ending::open(pid, start) else {
            return;
        };
        let done = Arc::new(AtomicBool::new(false));
        let by_title = above.is_some();
        let watch = EndWatch {
            rank,
            ending,
            above,
        };
        spawn_end_watch(watch, done.clone(), tx.clone(), stop.clone());
        self.watched.push(Watched {
            rank,
            pid,
            start,
            by_title,
            done,
        });
    }

    /// Starts watching each process named by its title not watched yet, with the processes above
    /// it up to `root` (whose deaths make its end a consequence).
    fn watch_titled(&mut self, root: u32, tx: &WakeTx, stop: &Arc<AtomicBool>) {
        let titled: Vec<(u32, u32)> = self
            .seen
            .iter()
            .filter_map(|(&pid, s)| s.titled.map(|r| (pid, r)))
            .collect();
        for (pid, rank) in titled {
            let mut above = Vec::new();
            let mut at = pid;
            while at != root && above.len() < 64 {
                let Some(s) = self.seen.get(&at) else { break };
                let Some(up) = self.seen.get(&s.ppid) else {
                    break;
                };
                above.push((s.ppid, up.start));
                at = s.ppid;
            }
            self.watch(pid, rank, Some(above), tx, stop);
        }
    }

    /// Whether the ranks' stacks are being compared now. The observer is not caught up
    /// meanwhile, so no deadline is decided before the answer: a stall decided while the
    /// comparison runs would go out without the rank its evidence names (seen on a loaded CI
    /// machine: `stalled`, rank null, the `py-spy dump`s still running at the 20 s window). The
    /// wait is bounded by [`stack_views::PY_SPY_BOUND`]: the ranks are read in parallel.
    pub(super) fn comparing(&self) -> bool {
        self.checking.load(Ordering::Relaxed)
    }

    /// Compares the live ranks' stacks (or reads the lone rank's) on a thread when they have
    /// been silent long enough.
    pub(super) fn check_silence(&mut self, tx: &WakeTx) {
        let now = Instant::now();
        if self.started_check && !self.comparing() {
            // The next comparison waits a whole interval after this one's end, not its start:
            // one that takes longer than the interval must not follow at once, or deadlines
            // (which wait while one runs) would never be decided.
            self.started_check = false;
            self.next_check = now + self.sample_every;
        }
        let ranks = self.to_read();
        if ranks.is_empty() || now < self.next_check || self.comparing() {
            return;
        }
        self.next_check = now + self.sample_every;
        self.started_check = true;
        self.checking.store(true, Ordering::Relaxed);
        let checking = self.checking.clone();
        let tx = tx.clone();
        std::thread::spawn(move || {
            // Deadlines wait while `checking` is set: it is cleared however this thread ends
            // (a panic included), and the judge loop woken.
            let _done = stack_views::ComparisonDone::new(checking, tx.clone());
            let stacks = stack_views::read_stacks(&ranks);
            let ranks = rank_stacks::places(&stacks);
            let _ = tx.send(Wake::Obs(Observation::RankPlaces { ranks }));
            if let Some((rank, evidence)) = rank_stacks::outside_collective(&stacks) {
                let _ = tx.send(Wake::Obs(Observation::RankOutsideCollective {
                    rank,
                    evidence,
                }));
            }
        });
    }
}

impl Drop for RankWatch {
    fn drop(&mut self) {
        for w in &self.watched {
            w.done.store(true, Ordering::Relaxed);
        }
    }
}

/// One rank process to wait for.
struct EndWatch {
    rank: u32,
    ending: Ending,
    /// For a process named by its title: the processes above it (pid, start time); its end is
    /// reported only while they all live, and only when it failed.
    above: Option<Vec<(u32, u64)>>,
}

impl EndWatch {
    /// Whether an end with `exit` is the rank's own failure (always, for a rank named by its
    /// environment).
    fn counts(&self, exit: Option<crate::verdict::ExitInfo>) -> bool {
        let failed = exit.is_some_and(|e| match e.effective_signal() {
            Some(sig) => !matches!(sig, 1 | 2 | 15),
            None => e.code != Some(0),
        });
        self.above.is_none() || (failed && self.above_alive())
    }

    /// A process named by its title whose status was reaped before it was read (by its parent,
    /// on a loaded machine), while every process above it lives: the kernel's word may still say
    /// how it ended.
    fn status_lost(&self, exit: Option<crate::verdict::ExitInfo>) -> bool {
        exit.is_none() && self.above.is_some() && self.above_alive()
    }

    fn above_alive(&self) -> bool {
        self.above
            .iter()
            .flatten()
            .all(|&(pid, start)| process::is_alive(pid, Some(start)))
    }
}

fn spawn_end_watch(watch: EndWatch, done: Arc<AtomicBool>, tx: WakeTx, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let cancelled = || stop.load(Ordering::Relaxed) || done.load(Ordering::Relaxed);
        if watch.ending.wait(Duration::from_millis(500), &cancelled) {
            // At once: the status is in /proc only until the launcher reaps the zombie.
            let exit = watch.ending.exit();
            if watch.counts(exit) {
                let _ = tx.send(Wake::Obs(Observation::RankEnded {
                    rank: watch.rank,
                    pid: watch.ending.pid(),
                    exit,
                }));
            } else if watch.status_lost(exit) {
                let _ = tx.send(Wake::RankStatusLost {
                    rank: watch.rank,
                    pid: watch.ending.pid(),
                });
            }
            // After the report: whoever sees `done` also sees what was sent.
            done.store(true, Ordering::Release);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rank_stacks::View;

    #[test]
    fn a_comparison_that_panics_still_ends_so_deadlines_are_decided() {
        let checking = Arc::new(AtomicBool::new(true));
        let (tx, rx) = std::sync::mpsc::channel();
        let flag = checking.clone();
        let ended = std::thread::spawn(move || {
            let _done = stack_views::ComparisonDone::new(flag, tx.into());
            panic!("a comparison that fails");
        })
        .join();
        assert!(ended.is_err());
        assert!(
            !checking.load(Ordering::Relaxed),
            "still comparing after a panic"
        );
        assert!(
            matches!(rx.try_recv(), Ok(Wake::Fs)),
            "the judge loop was not woken"
        );
    }

    #[test]
    fn cpu_use_is_measured_over_the_time_that_passed_not_the_nominal_interval() {
        // 1 s samples: 2 ticks a second is busy. A sample taken late, 3 ticks over 2 s and
        // more, is below that rate: the ranks stay silent (the judge sees no progress either).
        let mut watch = RankWatch::new(Duration::from_secs(1));
        watch.usage_sample(100);
        let silent_until = watch.next_check;
        std::thread::sleep(Duration::from_secs(2));
        watch.usage_sample(103);
        assert_eq!(
            watch.next_check, silent_until,
            "3 ticks in 2 s counted as work"
        );
        // 5 ticks over the next moment is work: the silence starts again.
        watch.usage_sample(108);
        assert!(
            watch.next_check > silent_until,
            "5 ticks at once not counted as work"
        );
    }

    #[test]
    fn only_the_ranks_own_cpu_ends_their_silence() {
        let (tx, _rx) = std::sync::mpsc::channel::<Wake>();
        let tx = WakeTx::from(tx);
        let stop = Arc::new(AtomicBool::new(false));
        let mut watch = RankWatch::new(Duration::from_secs(1));
        let mut zero = sleeper(Some("0"));
        let mut one = sleeper(Some("1"));
        // The launcher beside them, computing.
        let mut launcher = unranked("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        watch.discover(0, &[launcher.id(), zero.id(), one.id()], &tx, &stop);
        watch.usage_sample(watch.ranks_ticks());
        let silent_until = watch.next_check;
        let ticks = |pid: u32| process::stat(pid).map_or(0, |s| s.cpu_ticks);
        let began = std::time::Instant::now();
        while ticks(launcher.id()) < 10 && began.elapsed() < crate::bounded_wait::HANG {
            std::thread::sleep(Duration::from_millis(10));
        }
        let launcher_ticks = ticks(launcher.id());
        watch.usage_sample(watch.ranks_ticks());
        let after = watch.next_check;
        stop.store(true, Ordering::Relaxed);
        for c in [&mut launcher, &mut zero, &mut one] {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert!(launcher_ticks >= 10, "the launcher never computed");
        assert_eq!(
            after, silent_until,
            "the launcher's work restarted the ranks' silence"
        );
    }

    #[test]
    fn each_rank_ends_once_and_a_rank_outside_is_said_until_another_is() {
        let mut watch = RankWatch::new(Duration::from_secs(1));
        let ended = |rank, pid| Observation::RankEnded {
            rank,
            pid,
            exit: None,
        };
        let outside = |rank| Observation::RankOutsideCollective {
            rank,
            evidence: format!("rank {rank} sleeps"),
        };
        let steps = [
            (ended(1, 10), true),
            (ended(0, 11), true),
            // Restarted by the launcher under a new pid: still rank 1, already reported.
            (ended(1, 12), false),
            (outside(1), true),
            (outside(1), false),
            (outside(0), true),
            (outside(1), true),
            (Observation::Tick, true),
        ];
        for (i, (o, want)) in steps.into_iter().enumerate() {
            assert_eq!(watch.admit(&o), want, "step {i}: {o:?}");
        }
    }

    /// Waits (bounded) until `pid` runs `sleep` with its own environment in place: the kernel
    /// names the new program (`comm`) before it lays out the environment, and `/proc` shows an
    /// empty environment in between.
    fn wait_for_exec_of_sleep(pid: u32) {
        let began = std::time::Instant::now();
        let ready = || {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            comm.trim() == "sleep" && !environ.is_empty()
        };
        while !ready() && began.elapsed() < crate::bounded_wait::HANG {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// `program` with none of the variables that name a rank (the test's own may have them).
    fn unranked(program: &str) -> std::process::Command {
        let mut c = std::process::Command::new(program);
        c.env_remove("RANK")
            .env_remove("LOCAL_RANK")
            .env_remove("SLURM_PROCID");
        c
    }

    fn sleeper(rank: Option<&str>) -> std::process::Child {
        let mut c = unranked("sleep");
        c.arg("30");
        if let Some(r) = rank {
            c.env("RANK", r);
        }
        let child = c.spawn().unwrap();
        wait_for_exec_of_sleep(child.id());
        child
    }

    #[test]
    fn ranks_are_watched_once_two_are_seen_and_the_one_killed_is_reported() {
        let (tx, rx) = std::sync::mpsc::channel::<Wake>();
        let tx = WakeTx::from(tx);
        let stop = Arc::new(AtomicBool::new(false));
        let mut watch = RankWatch::new(Duration::from_secs(1));
        let mut plain = sleeper(None);
        let mut zero = sleeper(Some("0"));
        let mut one = sleeper(Some("1"));
        watch.discover(0, &[plain.id(), zero.id()], &tx, &stop);
        let alone = watch.live().count();
        watch.discover(0, &[plain.id(), zero.id(), one.id()], &tx, &stop);
        let both: Vec<(u32, u32)> = watch.live().map(|w| (w.rank, w.pid)).collect();
        one.kill().unwrap();
        let got = rx.recv_timeout(crate::bounded_wait::HANG);
        stop.store(true, Ordering::Relaxed);
        for c in [&mut plain, &mut zero, &mut one] {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert_eq!(alone, 0, "one rank alone is not watched");
        assert_eq!(both, vec![(0, zero.id()), (1, one.id())]);
        match got {
            Ok(Wake::Obs(Observation::RankEnded { rank, pid, exit })) => {
                assert_eq!((rank, pid), (1, one.id()));
                assert_eq!(exit, Some(crate::verdict::ExitInfo::signal(9, false)));
            }
            Ok(_) => panic!("another wake"),
            Err(e) => panic!("no rank ended: {e}"),
        }
    }

    #[test]
    fn a_rank_seen_before_its_exec_is_learned_after_it() {
        let (tx, _rx) = std::sync::mpsc::channel::<Wake>();
        let tx = WakeTx::from(tx);
        let stop = Arc::new(AtomicBool::new(false));
        let mut watch = RankWatch::new(Duration::from_secs(1));
        let mut zero = sleeper(Some("0"));
        // Without a rank until it execs the one that carries RANK=1 (as a launcher's child
        // between its fork and its exec).
        let mut late = unranked("sh")
            .args(["-c", "read _; exec env RANK=1 sleep 30"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        watch.discover(0, &[zero.id(), late.id()], &tx, &stop);
        let before = watch.live().count();
        drop(late.stdin.take());
        wait_for_exec_of_sleep(late.id());
        watch.discover(0, &[zero.id(), late.id()], &tx, &stop);
        let after: Vec<(u32, u32)> = watch.live().map(|w| (w.rank, w.pid)).collect();
        stop.store(true, Ordering::Relaxed);
        for c in [&mut zero, &mut late] {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert_eq!(before, 0, "one rank alone is not watched");
        assert_eq!(after, vec![(0, zero.id()), (1, late.id())]);
    }

    #[test]
    fn the_kernel_view_of_a_sleeping_process_is_read() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut view = stack_views::kernel_view(pid);
        for _ in 0..100 {
            if matches!(&view, View::Kernel { state: 'S', .. }) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            view = stack_views::kernel_view(pid);
        }
        let _ = child.kill();
        let _ = child.wait();
        let View::Kernel { state, wchan, .. } = view else {
            panic!("{view:?}")
        };
        assert_eq!(state, 'S');
        // Where the kernel shows wait channels at all, it shows the sleep.
        assert!(
            wchan.is_empty() || wchan == "0" || wchan.contains("nanosleep"),
            "{wchan}"
        );
    }

    /// `bash` running a `sleep` titled `title` as its child: (bash, the titled sleep). The caller
    /// kills and waits for bash (clippy cannot see a child returned inside a tuple).
    #[allow(clippy::zombie_processes)]
    fn titled_under_bash(title: &str) -> (std::process::Child, u32) {
        let mut bash = std::process::Command::new("bash")
            // bash outlives its child (a server's front end outlives a dying engine core).
            .args([
                "-c",
                &format!("(exec -a '{title}' sleep 30) & wait; exec sleep 30"),
            ])
            .spawn()
            .unwrap();
        let began = std::time::Instant::now();
        loop {
            let kids = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", bash.id()))
                .unwrap_or_default();
            if let Some(kid) = kids.split_whitespace().next().and_then(|k| k.parse().ok()) {
                let cmdline = std::fs::read(format!("/proc/{kid}/cmdline")).unwrap_or_default();
                if cmdline.starts_with(title.as_bytes()) {
                    return (bash, kid);
                }
            }
            if began.elapsed() > crate::bounded_wait::HANG {
                let _ = bash.kill();
                let _ = bash.wait();
                panic!("no titled child");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_server_process_named_by_its_title_is_watched_alone_and_only_its_own_failure_counts() {
        // (title, signal to the titled process, kill its parent first, reported rank)
        let cases: [(&str, i32, bool, Option<u32>); 5] = [
            ("VLLM::EngineCore", libc::SIGKILL, false, Some(0)),
            ("VLLM::Worker_TP1", libc::SIGSEGV, false, Some(1)),
            // A shutdown's SIGTERM is no failure.
            ("VLLM::Worker", libc::SIGTERM, false, None),
            // Its parent died first: its end is a consequence.
            ("VLLM::Worker", libc::SIGKILL, true, None),
            // Not a rank's title: not watched.
            ("VLLM::APIServer", libc::SIGKILL, false, None),
        ];
        for (title, sig, parent_first, want) in cases {
            let (tx, rx) = std::sync::mpsc::channel::<Wake>();
            let tx = WakeTx::from(tx);
            let stop = Arc::new(AtomicBool::new(false));
            let mut watch = RankWatch::new(Duration::from_secs(1));
            let (mut bash, kid) = titled_under_bash(title);
            watch.discover(bash.id(), &[bash.id(), kid], &tx, &stop);
            let watched: Vec<(u32, u32)> = watch.live().map(|w| (w.rank, w.pid)).collect();
            if parent_first {
                // Gone (reaped) before its child dies, not merely signalled.
                bash.kill().unwrap();
                bash.wait().unwrap();
            }
            unsafe { libc::kill(kid as i32, sig) };
            let began = std::time::Instant::now();
            while watch.live().next().is_some() && began.elapsed() < crate::bounded_wait::HANG {
                std::thread::sleep(Duration::from_millis(5));
            }
            let got = match rx.try_recv() {
                Ok(Wake::Obs(Observation::RankEnded { rank, pid, .. })) => {
                    assert_eq!(pid, kid, "{title}");
                    Some(rank)
                }
                _ => None,
            };
            stop.store(true, Ordering::Relaxed);
            let _ = bash.kill();
            let _ = bash.wait();
            if title != "VLLM::APIServer" {
                assert_eq!(watched.len(), 1, "{title}: watched alone");
            } else {
                assert!(watched.is_empty(), "{title}");
            }
            assert_eq!(
                got, want,
                "{title} ended by signal {sig} (parent first: {parent_first})"
            );
        }
    }
}
