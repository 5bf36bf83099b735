//! The event loop: the imperative shell around the judge.
//!
//! Theory of operation: everything that can happen is turned into a wake-up on one channel: inotify
//! events for the log's directory and the run directory (through `notify`), the pidfd of the watched
//! process becoming readable (a thread blocked in `poll`), and the channel's own timeout, set to the
//! earliest of the judge's next deadline, the next resource sample and a slow safety-net poll (for
//! file systems without inotify). On every wake the loop reads what is new in the log, classifies
//! each line, and feeds the judge timestamped observations; it stops at the first verdict. When the
//! process exits, the log is read to its end (and a partial last line flushed) before the exit is
//! observed, so a fatal line written just before death is never missed.
//!
//! Probes (port, HTTP, real request, GPU memory) run on the prober's thread and sd_notify messages
//! are received on a thread of their own; both send observations on the same channel. They are fed
//! to the judge only after the log has been read up to that moment, so a fatal line written before
//! the health endpoint answered is judged first.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::Result;
use notify::{RecursiveMode, Watcher};

use crate::follow::{FollowEvent, LogFollower};
use crate::judge::{Event, Judge, Judgement, Observation, Status};
use crate::lines::clean_text;
use crate::plan::Plan;
use crate::probe::ProbeKind;
use crate::probe::notify::NotifySocket;
use crate::process;
use crate::rundir::RunDir;
use crate::verdict::{ExitInfo, Outcome};

/// What to watch.
#[derive(Debug, Clone, Default)]
pub struct Target {
    pub log: PathBuf,
    pub pid: Option<u32>,
    pub start_ticks: Option<u64>,
    /// The run directory, when firedup launched it (exit status comes from there).
    pub run: Option<RunDir>,
    /// The launch failed with this reason.
    pub spawn_error: Option<String>,
    pub run_id: String,
    /// The sd_notify socket given to the command (`--notify`).
    pub notify: Option<Arc<NotifySocket>>,
}

/// Receives progress while the watch runs (terminal status line, heartbeat, nothing).
pub trait Progress {
    fn phase(&mut self, phase: &str, at: Duration);
    fn ready(&mut self, at: Duration, holding: Option<Duration>);
    /// Called after every batch of observations and at least once a second.
    fn status(&mut self, status: &Status, at: Duration);
    /// A note about the watch itself ("lost the log", "log appeared").
    fn note(&mut self, text: &str, at: Duration);
    fn finish(&mut self);
}

/// Progress that shows nothing (library use, tests).
#[derive(Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn phase(&mut self, _: &str, _: Duration) {}
    fn ready(&mut self, _: Duration, _: Option<Duration>) {}
    fn status(&mut self, _: &Status, _: Duration) {}
    fn note(&mut self, _: &str, _: Duration) {}
    fn finish(&mut self) {}
}

enum Wake {
    Fs,
    ProcessGone,
    /// An observation from the prober or the sd_notify thread.
    Obs(Observation),
}

const SAFETY_POLL: Duration = Duration::from_secs(1);
const EXIT_RECORD_WAIT: Duration = Duration::from_secs(2);

/// Watches `target` under `plan` until the verdict. `events` receives an NDJSON stream of
/// observations and judge events when given.
pub fn watch(
    plan: &Plan,
    target: &Target,
    progress: &mut dyn Progress,
    mut events: Option<&mut dyn Write>,
) -> Result<Outcome> {
    let start = Instant::now();
    let (tx, rx) = mpsc::channel::<Wake>();
    let mut judge = Judge::new(plan.judge.clone());
    let mut follower = LogFollower::new(&target.log, plan.line_cap);
    if plan.from_end {
        follower.skip_existing();
    }

    // File system events: the log's directory (or its nearest existing ancestor) and the run dir.
    let fs_tx = tx.clone();
    let mut watcher = notify::recommended_watcher(move |_res: notify::Result<notify::Event>| {
        let _ = fs_tx.send(Wake::Fs);
    })
    .ok();
    let mut watched_dir: Option<PathBuf> = None;
    rearm(&mut watcher, &mut watched_dir, &target.log);
    if let (Some(w), Some(run)) = (watcher.as_mut(), target.run.as_ref()) {
        let _ = w.watch(&run.path, RecursiveMode::NonRecursive);
    }

    let stop_flag = Arc::new(AtomicBool::new(false));
    let oom_baseline = target.pid.and_then(process::cgroup_oom_kills);
    let mut out = PendingEvents {
        judge_events: Vec::new(),
        probe_shapes: Vec::new(),
    };
    let mut pending_obs: Vec<Observation> = Vec::new();
    let mut shown_probe: Vec<(ProbeKind, String)> = Vec::new();
    if !plan.probes.is_empty() || (plan.probes.gpu && target.pid.is_some()) {
        let tx = tx.clone();
        crate::prober::spawn(
            plan.probes.clone(),
            target.pid,
            stop_flag.clone(),
            move |o| tx.send(Wake::Obs(o)).is_ok(),
        );
    }
    if let Some(sock) = target.notify.clone() {
        let tx = tx.clone();
        let stop = stop_flag.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(m) = sock.recv(Duration::from_millis(500)) {
                    if tx.send(Wake::Obs(Observation::Notify(m))).is_err() {
                        return;
                    }
                }
            }
        });
    }
    let at = |i: Instant| i.duration_since(start);

    let feed = |judge: &mut Judge,
                obs: Observation,
                now: Duration,
                sink: &mut Option<&mut dyn Write>,
                out: &mut PendingEvents| {
        if let Some(w) = sink.as_deref_mut() {
            // A probe repeating what it said last time is not news for the event stream.
            let news = match &obs {
                Observation::Probe { kind, outcome } => out.probe_news(*kind, outcome.detail()),
                _ => true,
            };
            if news {
                write_observation(w, now, &obs);
            }
        }
        let evs = judge.observe(now, obs);
        if let Some(w) = sink.as_deref_mut() {
            for e in &evs {
                write_event(w, e);
            }
        }
        out.judge_events.extend(evs);
    };

    match (&target.spawn_error, target.pid) {
        (Some(reason), _) => feed(
            &mut judge,
            Observation::SpawnFailed {
                reason: reason.clone(),
            },
            at(Instant::now()),
            &mut events,
            &mut out,
        ),
        (None, Some(pid)) => {
            if process::is_alive(pid, target.start_ticks) {
                feed(
                    &mut judge,
                    Observation::Started { pid },
                    at(Instant::now()),
                    &mut events,
                    &mut out,
                );
                let tx = tx.clone();
                let stop = stop_flag.clone();
                std::thread::spawn(move || {
                    process::wait_for_exit(pid, Duration::from_millis(500), &|| {
                        stop.load(Ordering::Relaxed)
                    });
                    let _ = tx.send(Wake::ProcessGone);
                });
            } else {
                let _ = tx.send(Wake::ProcessGone);
            }
        }
        (None, None) => {}
    }

    let sample_every = plan
        .judge
        .stall
        .map(|s| (s / 10).clamp(Duration::from_secs(1), Duration::from_secs(10)))
        .unwrap_or(Duration::from_secs(10));
    let mut next_sample = Instant::now();
    let mut process_gone_at: Option<Instant> = None;
    let mut exit_reported = false;
    let mut buf = Vec::new();
    let mut more = true;

    loop {
        // Read everything new in the log.
        while more || !buf.is_empty() {
            more = follower.poll(&mut buf);
            let now = at(Instant::now());
            for ev in buf.drain(..) {
                match ev {
                    FollowEvent::Line(raw) => {
                        let text = clean_text(&raw.bytes);
                        let class = plan.classifier.classify(&text);
                        feed(
                            &mut judge,
                            Observation::Line {
                                number: raw.number,
                                text,
                                class,
                            },
                            now,
                            &mut events,
                            &mut out,
                        );
                    }
                    FollowEvent::State(s) => {
                        progress.note(&describe_state(&s, follower.path()), now);
                        feed(&mut judge, Observation::Log(s), now, &mut events, &mut out);
                    }
                }
            }
            if judge.verdict().is_some() {
                break;
            }
            if !more {
                break;
            }
        }
        rearm(&mut watcher, &mut watched_dir, &target.log);

        // Probe results and sd_notify messages, judged after the log up to now.
        for obs in pending_obs.drain(..) {
            if judge.verdict().is_some() {
                break;
            }
            if let Observation::Probe { kind, outcome } = &obs {
                let shape = shape_of(outcome.detail());
                let seen = shown_probe.iter_mut().find(|(k, _)| k == kind);
                let changed = seen.as_ref().is_none_or(|(_, s)| *s != shape);
                if changed {
                    progress.note(
                        &format!("{}: {}", kind.as_str(), outcome.detail()),
                        at(Instant::now()),
                    );
                    match seen {
                        Some((_, s)) => *s = shape,
                        None => shown_probe.push((*kind, shape)),
                    }
                }
            }
            feed(&mut judge, obs, at(Instant::now()), &mut events, &mut out);
        }

        // The process is gone: drain the log, then learn the exit status.
        if let (Some(gone), false) = (process_gone_at, exit_reported) {
            if judge.verdict().is_none() {
                let record = target.run.as_ref().and_then(|r| r.exit());
                let waited = gone.elapsed();
                if record.is_some() || target.run.is_none() || waited >= EXIT_RECORD_WAIT {
                    let mut rest = Vec::new();
                    follower.finish(&mut rest);
                    let now = at(Instant::now());
                    for ev in rest {
                        if let FollowEvent::Line(raw) = ev {
                            let text = clean_text(&raw.bytes);
                            let class = plan.classifier.classify(&text);
                            feed(
                                &mut judge,
                                Observation::Line {
                                    number: raw.number,
                                    text,
                                    class,
                                },
                                now,
                                &mut events,
                                &mut out,
                            );
                        }
                    }
                    let exit: Option<ExitInfo> = record.and_then(|r| r.exit);
                    if exit.and_then(|e| e.effective_signal()) == Some(9) {
                        if let Some(evidence) = oom_evidence(&oom_baseline, target.pid) {
                            feed(
                                &mut judge,
                                Observation::OomEvidence(evidence),
                                now,
                                &mut events,
                                &mut out,
                            );
                        }
                    }
                    feed(
                        &mut judge,
                        Observation::Exited(exit),
                        now,
                        &mut events,
                        &mut out,
                    );
                    exit_reported = true;
                }
            }
        }

        // Resource usage: CPU time and reads of the tree are progress evidence.
        if let Some(pid) = target.pid {
            if process_gone_at.is_none() && Instant::now() >= next_sample {
                let (cpu, read) = process::tree_usage(pid);
                feed(
                    &mut judge,
                    Observation::Usage {
                        cpu_ticks: cpu,
                        read_bytes: read,
                    },
                    at(Instant::now()),
                    &mut events,
                    &mut out,
                );
                next_sample = Instant::now() + sample_every;
            }
        }

        feed(
            &mut judge,
            Observation::Tick,
            at(Instant::now()),
            &mut events,
            &mut out,
        );
        for e in out.judge_events.drain(..) {
            match e {
                Event::Phase { phase, at } => progress.phase(&phase, at),
                Event::Ready { at } => progress.ready(at, plan.judge.hold),
                Event::Verdict(_) => {}
            }
        }
        if let Some(j) = judge.verdict().cloned() {
            stop_flag.store(true, Ordering::Relaxed);
            progress.finish();
            return Ok(outcome(j, target));
        }
        let now = Instant::now();
        progress.status(&judge.status(at(now)), at(now));

        // Sleep until something happens or the next deadline.
        let mut wake_at = now + SAFETY_POLL;
        if let Some(d) = judge.next_deadline() {
            wake_at = wake_at.min(start + d);
        }
        if target.pid.is_some() && process_gone_at.is_none() {
            wake_at = wake_at.min(next_sample);
        }
        if process_gone_at.is_some() && !exit_reported {
            wake_at = wake_at.min(now + Duration::from_millis(20));
        }
        let timeout = wake_at.saturating_duration_since(Instant::now());
        match rx.recv_timeout(timeout) {
            Ok(Wake::ProcessGone) => {
                process_gone_at.get_or_insert_with(Instant::now);
            }
            Ok(Wake::Obs(o)) => pending_obs.push(o),
            Ok(Wake::Fs) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {}
        }
        // Coalesce a burst of wake-ups into one read.
        while let Ok(w) = rx.try_recv() {
            match w {
                Wake::ProcessGone => {
                    process_gone_at.get_or_insert_with(Instant::now);
                }
                Wake::Obs(o) => pending_obs.push(o),
                Wake::Fs => {}
            }
        }
        more = true;
    }
}

struct PendingEvents {
    judge_events: Vec<Event>,
    /// The shape of each probe's last reported detail, for the event stream.
    probe_shapes: Vec<(ProbeKind, String)>,
}

impl PendingEvents {
    /// Whether a probe's detail differs (digits aside) from what it last reported.
    fn probe_news(&mut self, kind: ProbeKind, detail: &str) -> bool {
        let shape = shape_of(detail);
        match self.probe_shapes.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, s)) if *s == shape => false,
            Some((_, s)) => {
                *s = shape;
                true
            }
            None => {
                self.probe_shapes.push((kind, shape));
                true
            }
        }
    }
}

/// Text with digits removed: "HTTP 503 (12 ms)" and "HTTP 503 (15 ms)" are the same news.
fn shape_of(text: &str) -> String {
    text.chars().filter(|c| !c.is_ascii_digit()).collect()
}

fn outcome(j: Judgement, target: &Target) -> Outcome {
    Outcome {
        verdict: j.verdict,
        signature: j.signature,
        reason: j.reason,
        line: j.line,
        context: j.context,
        phase: j.phase,
        elapsed_s: (j.at.as_secs_f64() * 1000.0).round() / 1000.0,
        exit: j.exit,
        pid: target.pid,
        log: target.log.display().to_string(),
        run_id: target.run_id.clone(),
        timeline: j.timeline,
        secondary: j.secondary,
        server_running: j.process_alive,
        request_gap_s: request_gap(&j.probes),
        probes: j.probes,
        gpu: j.gpu,
    }
}

/// Seconds from the health probe (or the port, without one) succeeding to the real request
/// returning tokens.
fn request_gap(probes: &[crate::verdict::ProbeReport]) -> Option<f64> {
    let at = |k: &str| probes.iter().find(|p| p.kind == k).and_then(|p| p.ready_s);
    let req = at("request")?;
    let health = at("http").or_else(|| at("port"))?;
    Some(((req - health) * 1000.0).round() / 1000.0)
}

/// Watches the log's directory, or its nearest existing ancestor until the directory appears.
fn rearm(
    watcher: &mut Option<notify::RecommendedWatcher>,
    current: &mut Option<PathBuf>,
    log: &Path,
) {
    let Some(w) = watcher.as_mut() else { return };
    let mut dir = log.parent().map(Path::to_path_buf);
    while let Some(d) = &dir {
        if d.is_dir() {
            break;
        }
        dir = d.parent().map(Path::to_path_buf);
    }
    if dir != *current {
        if let Some(old) = current.take() {
            let _ = w.unwatch(&old);
        }
        if let Some(d) = &dir {
            if w.watch(d, RecursiveMode::NonRecursive).is_ok() {
                *current = Some(d.clone());
            }
        }
    }
}

fn oom_evidence(baseline: &Option<(String, u64)>, pid: Option<u32>) -> Option<String> {
    if let Some((path, before)) = baseline {
        if let Some(after) = process::cgroup_oom_kills_at(path) {
            if after > *before {
                return Some(format!("{path} counted {} OOM kill(s)", after - before));
            }
        }
    }
    // The kernel log names the victim.
    let pid = pid?;
    let text = std::process::Command::new("dmesg")
        .arg("--notime")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&text.stdout);
    let needle = format!("Killed process {pid} ");
    text.lines()
        .rev()
        .find(|l| l.contains(&needle))
        .map(|l| l.trim().to_string())
}

fn describe_state(s: &crate::judge::LogState, path: &Path) -> String {
    use crate::judge::LogState::*;
    match s {
        Missing { dir_exists: true } => format!("log {} does not exist (yet)", path.display()),
        Missing { dir_exists: false } => {
            format!("log {} does not exist, nor its directory", path.display())
        }
        Readable => format!("following {}", path.display()),
        Truncated => format!(
            "log {} was truncated; reading from its start",
            path.display()
        ),
        Rotated => format!("log {} was rotated; following the new file", path.display()),
        Unreadable(r) => format!("cannot read log {}: {r}", path.display()),
    }
}

fn write_observation(w: &mut dyn Write, at: Duration, obs: &Observation) {
    let t = at.as_secs_f64();
    let v = match obs {
        Observation::Line {
            number,
            text,
            class,
        } => serde_json::json!({
            "t": t, "kind": "line", "number": number, "text": text,
            "signatures": class.hits.iter().map(|h| h.signature.map(|s| s.as_str()).unwrap_or("fail_line")).collect::<Vec<_>>(),
            "ready": class.ready, "progress": class.progress, "noise": class.noise,
        }),
        Observation::Log(s) => {
            serde_json::json!({"t": t, "kind": "log", "state": format!("{s:?}")})
        }
        Observation::Started { pid } => serde_json::json!({"t": t, "kind": "started", "pid": pid}),
        Observation::SpawnFailed { reason } => {
            serde_json::json!({"t": t, "kind": "spawn_failed", "reason": reason})
        }
        Observation::Exited(e) => serde_json::json!({"t": t, "kind": "exited", "exit": e}),
        Observation::Usage {
            cpu_ticks,
            read_bytes,
        } => {
            serde_json::json!({"t": t, "kind": "usage", "cpu_ticks": cpu_ticks, "read_bytes": read_bytes})
        }
        Observation::OomEvidence(e) => {
            serde_json::json!({"t": t, "kind": "oom_evidence", "text": e})
        }
        Observation::MonitorFault(r) => {
            serde_json::json!({"t": t, "kind": "monitor_fault", "reason": r})
        }
        Observation::Probe { kind, outcome } => {
            let (state, latency) = match outcome {
                crate::probe::ProbeOutcome::Up { latency, .. } => {
                    ("up", Some(latency.as_secs_f64() * 1000.0))
                }
                crate::probe::ProbeOutcome::NotYet { .. } => ("not_yet", None),
                crate::probe::ProbeOutcome::Foreign { .. } => ("foreign", None),
                crate::probe::ProbeOutcome::Fault { .. } => ("fault", None),
            };
            serde_json::json!({"t": t, "kind": "probe", "probe": kind.as_str(), "state": state, "detail": outcome.detail(), "latency_ms": latency})
        }
        Observation::Notify(m) => {
            serde_json::json!({"t": t, "kind": "notify", "ready": m.ready, "status": m.status, "extend_timeout_s": m.extend_timeout.map(|d| d.as_secs_f64())})
        }
        Observation::GpuMemory(mib) => serde_json::json!({"t": t, "kind": "gpu", "mib": mib}),
        Observation::GpuError(e) => serde_json::json!({"t": t, "kind": "gpu_error", "error": e}),
        Observation::Tick => return,
    };
    let _ = writeln!(w, "{v}");
}

fn write_event(w: &mut dyn Write, e: &Event) {
    let v = match e {
        Event::Phase { phase, at } => {
            serde_json::json!({"t": at.as_secs_f64(), "kind": "phase", "phase": phase})
        }
        Event::Ready { at } => serde_json::json!({"t": at.as_secs_f64(), "kind": "ready"}),
        Event::Verdict(j) => {
            serde_json::json!({"t": j.at.as_secs_f64(), "kind": "verdict", "verdict": j.verdict, "signature": j.signature, "reason": j.reason})
        }
    };
    let _ = writeln!(w, "{v}");
}

impl Target {
    /// The target for a run firedup just launched.
    pub fn from_launch(l: &crate::launch::Launched) -> Target {
        match &l.started {
            Ok(p) => Target {
                log: l.log.clone(),
                pid: Some(p.pid),
                start_ticks: Some(p.start_ticks).filter(|t| *t != 0),
                run: Some(l.run.clone()),
                spawn_error: None,
                run_id: l.run.id.clone(),
                notify: None,
            },
            Err(reason) => Target {
                log: l.log.clone(),
                pid: None,
                start_ticks: None,
                run: Some(l.run.clone()),
                spawn_error: Some(reason.clone()),
                run_id: l.run.id.clone(),
                notify: None,
            },
        }
    }
}
