//! The ranks of a watched run, live. At each usage sample, and every 2 s during the run's first
//! two minutes and while ranks live, the observer hands over the process tree it has just read;
//! the environment of each process not seen before is read once (a run without ranks costs no
//! environment reads after its first scan), and the rank processes are picked
//! ([`crate::rank_processes`]); they are watched once two ranks are seen. Each rank process gets a pidfd and a thread blocked on it: the
//! moment it dies, how it ended ([`crate::process::ending`]) is sent as
//! [`Observation::RankEnded`], in the order of death, once per rank. While two or more ranks
//! live and neither a line has come nor the tree used CPU for a while (half the stall window:
//! five sampling intervals), their stacks are compared on a thread ([`crate::rank_stacks`]):
//! `py-spy dump` where it is on the PATH, else the kernel's view of each main thread; a rank
//! outside the collective its peers wait in is sent as [`Observation::RankOutsideCollective`],
//! once until another rank is.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use super::Wake;
use crate::judge::Observation;
use crate::process::{self, ending::Ending};
use crate::rank_processes::{Level, Member, rank_of_environ, rank_processes};
use crate::rank_stacks::{self, RankStack, View};

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
/// How long `py-spy dump` may take before the kernel's view is used instead.
const PY_SPY_BOUND: Duration = Duration::from_secs(10);

struct Watched {
    rank: u32,
    pid: u32,
    /// Set when the process is found to be a launcher after all, or has ended.
    done: Arc<AtomicBool>,
}

/// The ranks seen in the run, and what has been reported about them.
pub(super) struct RankWatch {
    /// Each process of the tree seen so far: (start time, parent, the rank its environment names).
    seen: HashMap<u32, (u64, u32, Option<(Level, u32)>)>,
    watched: Vec<Watched>,
    ended_reported: HashSet<u32>,
    outside_reported: Option<u32>,
    last_line: Instant,
    sample_every: Duration,
    last_cpu: Option<u64>,
    silent_after: Duration,
    next_check: Instant,
    checking: Arc<AtomicBool>,
    began: Instant,
    /// When the tree should be scanned again between usage samples; `None`: at them only.
    next_scan: Option<Instant>,
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
            began: Instant::now(),
            next_scan: Some(Instant::now()),
        }
    }

    /// The tree's CPU ticks at a usage sample: the ranks are not silent while they compute.
    pub(super) fn usage_sample(&mut self, cpu_ticks: u64) {
        let busy = BUSY_TICKS_PER_SEC * self.sample_every.as_secs_f64();
        let active = self
            .last_cpu
            .is_some_and(|before| cpu_ticks.saturating_sub(before) as f64 >= busy);
        self.last_cpu = Some(cpu_ticks);
        if active {
            self.heard_line();
        }
    }

    /// A line arrived (or the tree computes): the ranks are not silent.
    pub(super) fn heard_line(&mut self) {
        self.last_line = Instant::now();
        self.next_check = self.last_line + self.silent_after;
    }

    fn live(&self) -> impl Iterator<Item = &Watched> {
        self.watched
            .iter()
            .filter(|w| !w.done.load(Ordering::Relaxed))
    }

    /// When the observer should be collected for the next scan or stack comparison, if any.
    pub(super) fn next_wake(&self) -> Option<Instant> {
        let check = (self.live().count() >= 2).then_some(self.next_check);
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

    /// Learns the ranks among the process tree `tree` (just read), and starts watching new ones.
    pub(super) fn discover(&mut self, tree: &[u32], tx: &Sender<Wake>, stop: &Arc<AtomicBool>) {
        self.learn(tree, tx, stop);
        let fast = self.began.elapsed() < FAST_SCAN_FOR || self.live().next().is_some();
        self.next_scan = fast.then(|| Instant::now() + FAST_SCAN);
    }

    fn learn(&mut self, tree: &[u32], tx: &Sender<Wake>, stop: &Arc<AtomicBool>) {
        let mut changed = false;
        let mut current = HashMap::with_capacity(tree.len());
        for &pid in tree {
            let Some(st) = process::stat(pid) else {
                continue;
            };
            let known = self
                .seen
                .get(&pid)
                .filter(|(start, _, _)| *start == st.start_ticks);
            let entry = match known {
                // A process read between its fork and its exec shows its parent's environment:
                // one without a rank is read again until it shows one (a few µs a process).
                Some(&(start, ppid, None)) => {
                    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                    let rank = rank_of_environ(&environ);
                    changed |= rank.is_some();
                    (start, ppid, rank)
                }
                Some(e) => *e,
                None => {
                    changed = true;
                    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                    (st.start_ticks, st.ppid, rank_of_environ(&environ))
                }
            };
            current.insert(pid, entry);
        }
        changed |= current.len() != self.seen.len();
        self.seen = current;
        if !changed || self.seen.values().all(|(_, _, r)| r.is_none()) {
            return;
        }
        let mut members: Vec<(u64, Member)> = self
            .seen
            .iter()
            .map(|(&pid, &(start, ppid, rank))| (start, Member { pid, ppid, rank }))
            .collect();
        members.sort_by_key(|(start, m)| (*start, m.pid));
        let members: Vec<Member> = members.into_iter().map(|(_, m)| m).collect();
        let ranks = rank_processes(&members);
        // One rank alone is no multi-rank run (a job inside an `srun` task inherits its
        // SLURM_PROCID): ranks are watched once two are seen.
        let values: HashSet<u32> = ranks.iter().map(|(_, r)| *r).collect();
        if values.len() < 2 && self.watched.is_empty() {
            return;
        }
        // A process watched as a rank that turned out to be a launcher is no longer watched.
        for w in &self.watched {
            if self.seen.contains_key(&w.pid) && !ranks.iter().any(|(p, _)| *p == w.pid) {
                w.done.store(true, Ordering::Relaxed);
            }
        }
        self.watched.retain(|w| !w.done.load(Ordering::Relaxed));
        for (pid, rank) in ranks {
            if self.watched.iter().any(|w| w.pid == pid) || self.watched.len() >= MAX_RANKS {
                continue;
            }
            let Some(ending) = Ending::open(pid, self.seen[&pid].0) else {
                continue;
            };
            let done = Arc::new(AtomicBool::new(false));
            spawn_end_watch(rank, ending, done.clone(), tx.clone(), stop.clone());
            self.watched.push(Watched { rank, pid, done });
        }
    }

    /// Compares the live ranks' stacks on a thread when they have been silent long enough.
    pub(super) fn check_silence(&mut self, tx: &Sender<Wake>) {
        let now = Instant::now();
        let ranks: Vec<(u32, u32)> = self.live().map(|w| (w.rank, w.pid)).collect();
        if ranks.len() < 2 || now < self.next_check || self.checking.load(Ordering::Relaxed) {
            return;
        }
        self.next_check = now + self.sample_every;
        self.checking.store(true, Ordering::Relaxed);
        let checking = self.checking.clone();
        let tx = tx.clone();
        std::thread::spawn(move || {
            let py_spy = on_path("py-spy");
            let stacks: Vec<RankStack> = ranks
                .iter()
                .map(|&(rank, pid)| RankStack {
                    rank,
                    view: py_spy
                        .as_ref()
                        .and_then(|p| python_view(p, pid))
                        .unwrap_or_else(|| kernel_view(pid)),
                })
                .collect();
            if let Some((rank, evidence)) = rank_stacks::outside_collective(&stacks) {
                let _ = tx.send(Wake::Obs(Observation::RankOutsideCollective {
                    rank,
                    evidence,
                }));
            }
            checking.store(false, Ordering::Relaxed);
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

fn spawn_end_watch(
    rank: u32,
    ending: Ending,
    done: Arc<AtomicBool>,
    tx: Sender<Wake>,
    stop: Arc<AtomicBool>,
) {
    std::thread::spawn(move || {
        let cancelled = || stop.load(Ordering::Relaxed) || done.load(Ordering::Relaxed);
        if ending.wait(Duration::from_millis(500), &cancelled) {
            // At once: the status is in /proc only until the launcher reaps the zombie.
            let exit = ending.exit();
            done.store(true, Ordering::Relaxed);
            let _ = tx.send(Wake::Obs(Observation::RankEnded {
                rank,
                pid: ending.pid(),
                exit,
            }));
        }
    });
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The main thread's Python stack by `py-spy dump`, bounded; `None` when it fails.
fn python_view(py_spy: &PathBuf, pid: u32) -> Option<View> {
    let mut child = std::process::Command::new(py_spy)
        .args(["dump", "--pid", &pid.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    // Read on a thread of its own: a dump larger than the pipe must not block py-spy.
    let mut out = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut text);
        text
    });
    let deadline = Instant::now() + PY_SPY_BOUND;
    let exited = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.success(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break false;
            }
        }
    };
    let text = reader.join().ok()?;
    if !exited {
        return None;
    }
    let frames = rank_stacks::parse_py_spy_dump(&text).filter(|f| !f.is_empty())?;
    Some(View::Python(frames))
}

/// The kernel's view of the main thread: its state, wait channel and kernel stack (the stack is
/// readable as root only; the wait channel is enough).
fn kernel_view(pid: u32) -> View {
    let task = format!("/proc/{pid}/task/{pid}");
    let read = |f: &str| std::fs::read_to_string(format!("{task}/{f}")).unwrap_or_default();
    View::Kernel {
        state: process::parse_stat(&read("stat")).map_or('?', |s| s.state),
        wchan: read("wchan").trim().to_string(),
        stack: rank_stacks::parse_kernel_stack(&read("stack")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn sleeper(rank: Option<&str>) -> std::process::Child {
        let mut c = std::process::Command::new("sleep");
        c.arg("30").env_remove("RANK").env_remove("LOCAL_RANK");
        c.env_remove("SLURM_PROCID");
        if let Some(r) = rank {
            c.env("RANK", r);
        }
        let child = c.spawn().unwrap();
        // Until it has exec'd, /proc shows this test's environment (bounded wait).
        let comm = format!("/proc/{}/comm", child.id());
        let began = std::time::Instant::now();
        while std::fs::read_to_string(&comm).is_ok_and(|c| c.trim() != "sleep")
            && began.elapsed() < crate::bounded_wait::HANG
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        child
    }

    #[test]
    fn ranks_are_watched_once_two_are_seen_and_the_one_killed_is_reported() {
        let (tx, rx) = std::sync::mpsc::channel::<Wake>();
        let stop = Arc::new(AtomicBool::new(false));
        let mut watch = RankWatch::new(Duration::from_secs(1));
        let mut plain = sleeper(None);
        let mut zero = sleeper(Some("0"));
        let mut one = sleeper(Some("1"));
        watch.discover(&[plain.id(), zero.id()], &tx, &stop);
        let alone = watch.live().count();
        watch.discover(&[plain.id(), zero.id(), one.id()], &tx, &stop);
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
        let stop = Arc::new(AtomicBool::new(false));
        let mut watch = RankWatch::new(Duration::from_secs(1));
        let mut zero = sleeper(Some("0"));
        // Without a rank until it execs the one that carries RANK=1 (as a launcher's child
        // between its fork and its exec).
        let mut late = std::process::Command::new("sh")
            .args(["-c", "read _; exec env RANK=1 sleep 30"])
            .env_remove("RANK")
            .env_remove("LOCAL_RANK")
            .env_remove("SLURM_PROCID")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        watch.discover(&[zero.id(), late.id()], &tx, &stop);
        let before = watch.live().count();
        drop(late.stdin.take());
        let comm = format!("/proc/{}/comm", late.id());
        let began = std::time::Instant::now();
        while std::fs::read_to_string(&comm).is_ok_and(|c| c.trim() != "sleep")
            && began.elapsed() < crate::bounded_wait::HANG
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        watch.discover(&[zero.id(), late.id()], &tx, &stop);
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
        let mut view = kernel_view(pid);
        for _ in 0..100 {
            if matches!(&view, View::Kernel { state: 'S', .. }) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            view = kernel_view(pid);
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
}
