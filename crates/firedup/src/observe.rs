//! The local observer: everything that happens to a watched server on this machine, turned into
//! timestamped observations. It judges nothing (the judge does); the engine feeds what it returns
//! to the judge, and the remote agent (`firedup __agent`) streams it to a firedup elsewhere.
//!
//! Sources, all waking one channel: inotify events (the process's shared instance,
//! [`crate::dirwatch`], or, for the first observer alive in the process, an instance of its own
//! read by the thread that waits: [`own_inotify`]) about the log in its directory, or about the
//! next path component in its nearest existing ancestor until the directory appears, and in the
//! run directory (where `exit.json` lands); the watched pid's pidfd becoming readable (a thread
//! blocked in `poll`); the supervisor's exit report on its pipe, when this process launched the
//! run (a thread blocked in `poll`); the prober's results (port, HTTP, real request, GPU memory)
//! and sd_notify messages; and a slow safety-net poll (NFS and other file systems give no inotify
//! events).
//!
//! Order matters and is kept: on each [`LocalObserver::collect`] the log is read first, then the
//! probe results that arrived meanwhile, so a fatal line written before the health endpoint
//! answered is observed first. When the process is gone, the log is read to its end and a partial
//! last line flushed, then the supervisor's exit record (from its pipe or `exit.json`, the same
//! record) is awaited (bounded) and only then the exit is observed: a fatal line written just
//! before death is never missed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::judge::Observation;
use crate::plan::ProbePlan;
use crate::process::{self, ending::Ending};
use crate::rundir::ExitRecord;
use crate::target::Target;
use crate::verdict::ExitInfo;

mod daemon;
mod exit_wait;
mod file_watch;
mod firedup_stop;
mod followed_line;
mod kernel_log;
mod log_reader;
mod log_state_words;
mod oom_evidence;
mod own_inotify;
mod owner_news;
mod rank_watch;
mod wake_sources;
mod wake_tx;
use file_watch::FileWatch;
use log_reader::LogReader;
pub(crate) use log_state_words::describe_state;
use oom_evidence::OomWitness;
use own_inotify::OwnInotify;
use rank_watch::RankWatch;
use wake_sources::{spawn_exit_report, spawn_exit_watch, spawn_notify};
pub(crate) use wake_tx::{Wake, WakeTx};

/// The safety-net poll, for file systems without inotify.
pub(crate) const SAFETY_POLL: Duration = Duration::from_secs(1);

/// What the observer needs besides the target.
#[derive(Debug, Clone)]
pub(crate) struct ObserveSettings {
    pub line_cap: usize,
    pub from_end: bool,
    /// Resume following at (byte offset, next line number) instead of the start.
    pub resume: Option<(u64, u64)>,
    pub probes: ProbePlan,
    /// How often CPU time and reads of the tree are sampled.
    pub sample_every: Duration,
    /// Server mode: when the launched process exits 0 while processes of the run (by its
    /// `FIREDUP_RUN_ID`) live on, follow them instead of observing an exit (a daemon).
    pub follow_run: bool,
}

/// Observes one local target.
pub(crate) struct LocalObserver {
    start: Instant,
    target: Target,
    rx: Receiver<Wake>,
    log: LogReader,
    /// The log's and the run directory's watches: where this observer holds the process's own
    /// inotify instance, its waits are in `poll` on it and its bell.
    files: FileWatch,
    pub(crate) stop: Arc<AtomicBool>,
    /// For the wake-up threads started later (a followed daemon's exit watch).
    tx: WakeTx,
    follow_run: bool,
    /// The daemon followed since the launcher exited 0, if any.
    following: Option<u32>,
    /// A watched process firedup did not launch: how it ended, read from the kernel.
    ending: Option<Ending>,
    /// The pid whose tree the prober checks (the launched one, then the followed daemon).
    watched: Arc<AtomicU32>,
    /// Asks the prober for a GPU sample now (a line named a failure), when it samples at all.
    gpu_nudge: Option<crate::prober::GpuNudge>,
    oom: OomWitness,
    pending: Vec<Observation>,
    process_gone_at: Option<Instant>,
    /// The exit record, once the supervisor's pipe has brought it.
    exit_record: Option<ExitRecord>,
    exit_reported: bool,
    next_sample: Instant,
    sample_every: Duration,
    /// The run's rank processes: their endings, their stacks when silent.
    ranks: RankWatch,
    owner: owner_news::OwnerNews,
}

impl std::fmt::Debug for LocalObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalObserver")
            .field("log", &self.target.log)
            .field("pid", &self.target.pid)
            .finish_non_exhaustive()
    }
}

impl LocalObserver {
    /// Sets up the sources; `start` is time zero of the observations.
    pub(crate) fn new(
        target: &Target,
        settings: &ObserveSettings,
        start: Instant,
    ) -> LocalObserver {
        let (tx, rx) = mpsc::channel::<Wake>();
        let own = OwnInotify::claim();
        let tx = WakeTx::new(tx, own.as_ref().map(OwnInotify::bell));
        let files = FileWatch::start(own, target, &tx);
        let stop = Arc::new(AtomicBool::new(false));
        let mut pending = Vec::new();
        match (&target.spawn_error, target.pid) {
            (Some(reason), _) => pending.push(Observation::SpawnFailed {
                reason: reason.clone(),
            }),
            (None, Some(pid)) => {
                if process::is_alive(pid, target.start_ticks) {
                    pending.push(Observation::Started { pid });
                    spawn_exit_watch(pid, tx.clone(), stop.clone());
                } else {
                    let _ = tx.send(Wake::ProcessGone(pid));
                }
            }
            (None, None) => {}
        }
        if let Some(pipe) = target.exit_pipe.clone() {
            spawn_exit_report(pipe, tx.clone(), stop.clone());
        }
        let watched = Arc::new(AtomicU32::new(target.pid.unwrap_or(0)));
        let probing = !settings.probes.is_empty() || (settings.probes.gpu && target.pid.is_some());
        let gpu_nudge = probing.then(|| {
            let tx = tx.clone();
            let mut probes = settings.probes.clone();
            // A listener held by a process of this run (a daemon that left the tree) is its own.
            probes.run_id = Some(target.run_id.clone()).filter(|id| !id.is_empty());
            let send = move |o| tx.send(Wake::Obs(o)).is_ok();
            crate::prober::spawn(probes, watched.clone(), stop.clone(), send).1
        });
        if let Some(sock) = target.notify.clone() {
            spawn_notify(sock, tx.clone(), stop.clone());
        }
        LocalObserver {
            start,
            oom: OomWitness::new(target.pid, target.oom_kills_before.clone()),
            target: target.clone(),
            rx,
            log: LogReader::new(log_reader::follower_for(target, settings), start),
            files,
            stop,
            tx,
            follow_run: settings.follow_run,
            following: None,
            ending: target
                .pid
                .zip(target.start_ticks)
                .filter(|_| target.run.is_none())
                .and_then(|(pid, ticks)| Ending::open(pid, ticks)),
            watched,
            gpu_nudge,
            pending,
            process_gone_at: None,
            exit_record: None,
            exit_reported: false,
            next_sample: Instant::now(),
            sample_every: settings.sample_every,
            ranks: RankWatch::new(settings.sample_every),
            owner: owner_news::OwnerNews::new(target.run.as_ref()),
        }
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// A note about the watch itself (the log was rotated before it was followed), once.
    pub(crate) fn take_note(&mut self) -> Option<String> {
        self.log.take_note()
    }

    /// Whether the log was read to its end (no backlog slice waits), no comparison of the ranks'
    /// stacks runs and no exit seen waits for its status: only then may the judge be ticked.
    pub(crate) fn caught_up(&self) -> bool {
        !self.log.backlog() && !self.ranks.comparing() && !self.exit_pending()
    }

    /// While not caught up: the time by which everything the log held has been read.
    pub(crate) fn read_through(&self) -> Option<Duration> {
        let busy = self.ranks.comparing() || self.exit_pending();
        self.log.read_through().filter(|_| !busy)
    }

    /// Asks the prober for `what` now: GPU memory at a failure line, the probes at a ready line.
    pub(crate) fn nudge_prober(&self, what: crate::prober::Nudged) {
        self.gpu_nudge.iter().for_each(|n| n.ask(what));
    }

    /// Whether the process's end has been observed (nothing more will come but log lines).
    pub(crate) fn ended(&self) -> bool {
        self.exit_reported
    }

    /// Where a follower would resume to emit exactly the lines not yet observed.
    pub(crate) fn resume_point(&self) -> (u64, u64) {
        self.log.resume_point()
    }

    /// Appends everything observed since the last call, stamped with the time since `start`.
    /// Never blocks (beyond reading what is there).
    pub(crate) fn collect(&mut self, out: &mut Vec<(Duration, Observation)>) {
        // A backlog is read before anything else is observed (see `log_reader`): an observation
        // stamped now, ahead of lines written earlier, could end a window those lines keep open.
        if self.log.backlog() {
            if self.log.read(out) {
                self.ranks.heard_line();
            }
            if self.log.backlog() {
                return;
            }
            self.files.rearm(&self.target.log);
        } else {
            self.look(out);
        }
        self.after_the_log(out);
    }

    /// What comes before the log on a look: the OOM killer's evidence, the owner's news, the
    /// start; then the log.
    fn look(&mut self, out: &mut Vec<(Duration, Observation)>) {
        // The OOM killer's evidence at every look (a counter file and a non-blocking read of the
        // kernel log), ahead of what it explains: a worker's or rank's SIGKILL decides within the
        // settle window after its launcher's report, sooner than the next usage sample.
        if let Some(evidence) = self.oom.evidence() {
            out.push((self.now(), Observation::OomEvidence(evidence)));
        }
        // Before the lines and the exit that firedup's stop of the run brings (the record came first).
        if let Some((noticed, o)) = self.owner.take(self.target.run.as_ref()) {
            let now = self.now();
            let ago = crate::rundir::now_unix() - noticed;
            // A record from a clock ahead of ours says nothing about when: now.
            let at = now.saturating_sub(Duration::from_secs_f64(ago.clamp(0.0, 1e9)));
            out.push((at, o));
        }
        // Start-up facts first (started, spawn failure), then the log, then probe results.
        let (early, later): (Vec<Observation>, Vec<Observation>) =
            std::mem::take(&mut self.pending)
                .into_iter()
                .partition(|o| {
                    matches!(
                        o,
                        Observation::Started { .. } | Observation::SpawnFailed { .. }
                    )
                });
        self.pending = later;
        for o in early {
            out.push((self.now(), o));
        }
        // One bounded read per call: a backlog (a big log at attach) is handed over in slices,
        // so memory stays bounded by one slice and the caller judges between slices.
        if self.log.read(out) {
            self.ranks.heard_line();
        }
        self.files.rearm(&self.target.log);
    }

    /// What comes after the log on a look, once it has been read to its end: the probes' and
    /// threads' news, the exit, the usage sample.
    fn after_the_log(&mut self, out: &mut Vec<(Duration, Observation)>) {
        if self.log.backlog() {
            return;
        }
        for o in std::mem::take(&mut self.pending) {
            out.push((self.now(), o));
        }
        // The process is gone: drain the log, then learn the exit status.
        if let (Some(gone), false) = (self.process_gone_at, self.exit_reported) {
            // A rank's end its watcher reported just now is taken before the run's exit.
            let unreported = self.ranks.ends_unreported();
            while let Ok(w) = self.rx.try_recv() {
                self.take(w);
            }
            for o in std::mem::take(&mut self.pending) {
                out.push((self.now(), o));
            }
            if let Some(followed) = self.following {
                // A followed daemon is gone: the run lives on in another of its processes, or
                // this is the run's exit (its status is not ours to learn: not our child).
                match self.run_survivor() {
                    Some(next) if next != followed => {
                        out.push((self.now(), self.launcher_left(next)));
                        self.follow(next);
                    }
                    Some(_) => self.process_gone_at = None,
                    None => self.observe_exit(None, out),
                }
            } else {
                let record = self.exit_record_now();
                let wait = exit_wait::ExitWait {
                    waited: gone.elapsed(),
                    known: record.is_some() || self.target.run.is_none(),
                    unreported,
                };
                if wait.observe_now(|| self.supervisor_alive()) {
                    // Read again: the supervisor writes its record, then ends, perhaps between
                    // the read above and the finding that it is gone.
                    let exit: Option<ExitInfo> = record
                        .or_else(|| self.exit_record_now())
                        .and_then(|r| r.exit)
                        .or_else(|| self.ending.as_ref()?.exit());
                    // A launcher that exits 0 while processes of the run live on daemonized:
                    // in server mode that is not the run's exit.
                    let daemon = (self.follow_run && exit.is_some_and(|e| e.code == Some(0)))
                        .then(|| self.run_survivor())
                        .flatten();
                    match daemon {
                        Some(next) => {
                            out.push((self.now(), self.launcher_left(next)));
                            self.follow(next);
                        }
                        None => self.observe_exit(exit, out),
                    }
                }
            }
        }
        // Resource usage: CPU time and reads of the tree are progress evidence.
        if let Some(pid) = self.following.or(self.target.pid) {
            // One read of the tree serves the usage sample and the rank scan.
            let sample = self.process_gone_at.is_none() && Instant::now() >= self.next_sample;
            let scan = self.process_gone_at.is_none() && (sample || self.ranks.scan_due());
            let tree = if scan { process::tree(pid) } else { Vec::new() };
            if scan {
                self.ranks.discover(pid, &tree, &self.tx, &self.stop);
            }
            if sample {
                // The run's processes, for the kernel's OOM-kill lines about them.
                self.oom.sample(&tree);
                let (cpu, read) = process::usage_of(&tree);
                self.ranks.usage_sample(self.ranks.ranks_ticks());
                out.push((
                    self.now(),
                    Observation::Usage {
                        cpu_ticks: cpu,
                        read_bytes: read,
                    },
                ));
                self.next_sample = Instant::now() + self.sample_every;
            }
            if self.process_gone_at.is_none() {
                self.ranks.check_silence(&self.tx);
            }
        }
    }

    /// Reads the log to its end and flushes a partial last line, for a source that learns of the
    /// end another way (a batch job's terminal state): nothing more will be written to it.
    pub(crate) fn drain(&mut self, out: &mut Vec<(Duration, Observation)>) {
        self.log.finish(false, out);
    }

    /// Drains the log, then observes the exit (the status when known).
    fn observe_exit(&mut self, exit: Option<ExitInfo>, out: &mut Vec<(Duration, Observation)>) {
        self.log.finish(true, out);
        let now = self.now();
        // The kernel's last word before the exit decides: the watched process's SIGKILL, or a
        // worker's or rank's the judge knows of, may have been the OOM killer's.
        if let Some(evidence) = self.oom.evidence() {
            out.push((now, Observation::OomEvidence(evidence)));
        }
        out.extend(
            firedup_stop::firedup_stop(&self.target, self.following.is_some()).map(|o| (now, o)),
        );
        out.push((now, Observation::Exited(exit)));
        self.exit_reported = true;
    }

    /// The latest instant at which the observer wants to be collected again.
    pub(crate) fn next_wake(&self) -> Instant {
        let now = Instant::now();
        let mut at = now + SAFETY_POLL;
        if self.target.pid.is_some() && self.process_gone_at.is_none() {
            at = at.min(self.next_sample);
        }
        let watching =
            self.process_gone_at.is_none() && self.following.or(self.target.pid).is_some();
        if let Some(rank_wake) = self.ranks.next_wake().filter(|_| watching) {
            at = at.min(rank_wake);
        }
        if self.process_gone_at.is_some() && !self.exit_reported {
            at = at.min(now + Duration::from_millis(20));
        }
        if self.log.backlog() {
            at = now;
        }
        at
    }

    /// Blocks until a source signals something or `until`, whichever is first.
    pub(crate) fn wait(&mut self, until: Instant) {
        if let Some(own) = self.files.own() {
            // A wake sent before the bell was last read is on the channel already.
            match self.rx.try_recv() {
                Ok(w) => self.take(w),
                Err(_) => own.wait(until),
            }
            while let Ok(w) = self.rx.try_recv() {
                self.take(w);
            }
            return;
        }
        let timeout = until.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(timeout) {
            Ok(w) => self.take(w),
            Err(RecvTimeoutError::Timeout) => {}
            // Nothing can wake us (no inotify, no process, no probes): sleep instead of spinning.
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(timeout),
        }
        // Coalesce a burst of wake-ups into one read.
        while let Ok(w) = self.rx.try_recv() {
            self.take(w);
        }
    }

    fn take(&mut self, w: Wake) {
        match w {
            Wake::ProcessGone(pid) => {
                // Once a daemon is followed, only its end counts (not the launcher's, late).
                if self.following.is_none_or(|f| f == pid) {
                    self.seen_gone();
                }
            }
            Wake::ExitRecord(r) => {
                if self.following.is_none() {
                    self.seen_gone();
                }
                self.exit_record = Some(r);
            }
            Wake::Obs(o) => {
                if let Observation::RankEnded {
                    pid,
                    exit: Some(exit),
                    ..
                } = &o
                    && exit.effective_signal() == Some(libc::SIGKILL)
                {
                    // Maybe the OOM killer's: a kernel line naming it counts, sampled or not.
                    self.oom.killed(*pid);
                }
                if self.ranks.admit(&o) {
                    self.pending.push(o);
                }
            }
            Wake::RankStatusLost { rank, pid } => {
                if self.oom.kernel_killed(pid) {
                    self.take(Wake::Obs(Observation::RankEnded {
                        rank,
                        pid,
                        exit: Some(ExitInfo::signal(libc::SIGKILL, false)),
                    }));
                }
            }
            Wake::Fs => {}
        }
    }
}

impl Drop for LocalObserver {
    fn drop(&mut self) {
        // The subscriptions end with the fields (the last one of a directory unwatches it).
        self.stop.store(true, Ordering::Relaxed);
    }
}
