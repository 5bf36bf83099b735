//! The judge loop: the imperative shell around the judge.
//!
//! Theory of operation: a [`Source`] (source.rs) turns what happens to the server into timestamped
//! observations: `LocalObserver` on this machine (inotify, pidfd, the prober,
//! sd_notify), or the remote client, which receives them from a `firedup __agent` over SSH. The
//! loop feeds the judge (which classifies each log line itself), reports phases, notes and status, and sleeps
//! until the source signals or the judge's next deadline, whichever is first. It stops at the
//! first verdict.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::error::Result;

use crate::classify::{LineClass, Strength};
use crate::judge::{Event, Judge, Judgement, Observation, Status};
use crate::line_shape::line_shape;
use crate::observe::describe_state;
use crate::plan::Plan;
use crate::probe::ProbeKind;
use crate::source::{Seen, Source};
use crate::target::Target;
use crate::verdict::Outcome;

/// Receives progress while the watch runs (terminal status line, heartbeat, nothing).
pub trait Progress {
    /// The server entered startup phase `phase` for the first time (a profile's phase line was
    /// seen, or `ready`);
    /// `at` is the time since the launch on the judge's clock.
    fn phase(&mut self, phase: &str, at: Duration);
    /// Every readiness condition holds since `at`; `holding` is the hold window (`--hold` or the
    /// profile's) watched from then on before the verdict (`None`: no hold).
    fn ready(&mut self, at: Duration, holding: Option<Duration>);
    /// Called after every batch of observations and at least once a second.
    fn status(&mut self, status: &Status, at: Duration);
    /// A note about the watch itself ("lost the log", "log appeared").
    fn note(&mut self, text: &str, at: Duration);
    /// The watch has its verdict: called once, last (a status line can be cleared).
    fn finish(&mut self);
    /// No verdict yet, and `judge` has taken in everything the source saw by `through` (its log
    /// read to its end, its processes checked; see [`Source::checked_through`]). A multi-node
    /// group decides on what it holds then ([`Judge::pending_cause`], [`Judge::places_now`]);
    /// others need not listen.
    fn checked(&mut self, _through: Duration, _judge: &Judge) {}
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

/// Watches a local `target` under `plan` until the verdict. `events` receives an NDJSON stream of
/// observations and judge events when given.
pub fn watch(
    plan: &Plan,
    target: &Target,
    progress: &mut dyn Progress,
    events: Option<&mut dyn Write>,
) -> Result<Outcome> {
    let mut source = crate::host::local::LocalSource::new(plan, target);
    let meta = launch_record(target);
    let j = judge_loop(plan, &target.log, &mut source, progress, events);
    Ok(outcome(j, plan, target, meta))
}

/// How many of the classifier's patterns are compiled each time the loop is about to wait,
/// until all are (about 5 ms of CPU each time; the catalog has about 300).
const COMPILE_PER_WAIT: usize = 32;

/// Feeds the judge from `source` until the verdict, reporting to `progress` on the way.
pub fn judge_loop(
    plan: &Plan,
    log: &std::path::Path,
    source: &mut dyn Source,
    progress: &mut dyn Progress,
    events: Option<&mut dyn Write>,
) -> Judgement {
    match judge_loop_bounded(plan, log, source, progress, events, None) {
        Ok(j) => j,
        Err(_) => unreachable!("an unbounded watch ends only with a verdict"),
    }
}

/// [`judge_loop`] that gives up once `bound` has passed with no verdict: `Err` then carries where
/// the run stands and the time on the judge's clock (`watch --for`). What was written to the log
/// up to the bound is read and judged first, so a verdict that was already due is never missed.
pub fn judge_loop_bounded(
    plan: &Plan,
    log: &std::path::Path,
    source: &mut dyn Source,
    progress: &mut dyn Progress,
    mut events: Option<&mut dyn Write>,
    bound: Option<Instant>,
) -> std::result::Result<Judgement, Box<(Status, Duration)>> {
    let mut judge = Judge::new(plan.judge.clone());
    let mut out = PendingEvents {
        judge_events: Vec::new(),
        probe_shapes: Vec::new(),
    };
    let mut shown_probe: Vec<(ProbeKind, String)> = Vec::new();
    let mut seen = Vec::new();
    // The watch's own waits count from its first observation (see `Judge::watch_began`).
    let mut began = false;
    let mut lapse = Lapse::default();
    let mut compiled = false;
    let mut prepared = false;
    loop {
        let collected_at = Instant::now();
        // Everything the source held by `look` is collected below (all of it once caught up):
        // the judge is ticked at that time, never later, so no deadline passes over lines
        // written before it that are not read yet.
        let look = source.now();
        if let Some(unseen) = lapse.unseen(collected_at) {
            // Time firedup did not run: what the server did meanwhile is read now, and the
            // windows waiting for a sign of life count afresh (`Judge::watch_resumed`).
            progress.note(
                &format!(
                    "firedup itself did not run for {} (stopped or paused): reading what happened meanwhile; the stall window counts from now",
                    crate::duration::format_duration(unseen)
                ),
                look,
            );
            if began {
                judge.watch_resumed(look);
            }
        }
        source.collect(&mut seen);
        for s in seen.drain(..) {
            if judge.verdict().is_some() {
                break;
            }
            let (at, obs) = match s {
                Seen::Note(at, text) => {
                    progress.note(&text, at);
                    continue;
                }
                Seen::Obs(at, obs) => (at, obs),
            };
            match &obs {
                Observation::Log(state) => progress.note(&describe_state(state, log), at),
                Observation::Probe { kind, outcome } => {
                    let shape = line_shape(outcome.detail());
                    let known = shown_probe.iter_mut().find(|(k, _)| k == kind);
                    if known.as_ref().is_none_or(|(_, s)| *s != shape) {
                        progress.note(&format!("{}: {}", kind.as_str(), outcome.detail()), at);
                        match known {
                            Some((_, s)) => *s = shape,
                            None => shown_probe.push((*kind, shape)),
                        }
                    }
                }
                _ => {}
            }
            if !began {
                judge.watch_began(at);
                began = true;
            }
            let line = matches!(obs, Observation::Line { .. });
            feed(&mut judge, obs, at, &mut events, &mut out);
            if line && judge.last_line_class().is_some_and(names_a_failure) {
                source.decisive_moment();
            }
            if line
                && judge.verdict().is_none()
                && judge.last_line_class().is_some_and(|c| !c.ready.is_empty())
            {
                source.ready_line_seen();
            }
        }
        // Behind a backlog, the judge is ticked only up to when all the log held was read.
        let tick_at = match source.caught_up() {
            true => Some(look),
            false => source.read_through().map(|t| t.min(look)),
        };
        if let (true, Some(at)) = (source.can_tick(), tick_at) {
            if !began {
                judge.watch_began(at);
                began = true;
            }
            feed(&mut judge, Observation::Tick, at, &mut events, &mut out);
        }
        for e in out.judge_events.drain(..) {
            match e {
                Event::Phase { phase, at } => progress.phase(&phase, at),
                Event::Ready { at } => progress.ready(at, plan.judge.hold),
                Event::Job { note, at } => progress.note(&note, at),
                Event::Verdict(_) => {}
            }
        }
        if let Some(j) = judge.verdict().cloned() {
            progress.finish();
            return Ok(j);
        }
        if let Some(through) = source.checked_through() {
            progress.checked(through, &judge);
        }
        let now = source.now();
        progress.status(&judge.status(now), now);
        // The bound is checked after a collection that began past it: everything up to the
        // bound has been judged.
        if bound.is_some_and(|b| collected_at >= b) {
            progress.finish();
            return Err(Box::new((judge.status(now), now)));
        }
        // Sleep until something happens, the next deadline or the bound.
        let mut wake_at = source.next_wake();
        // No wake for a deadline that could not be decided (the source not caught up and no
        // time to tick up to: the ranks' stacks being compared): the source wakes the loop.
        let decidable = source.caught_up() || source.read_through().is_some();
        if let (Some(d), true) = (judge.next_deadline(), source.can_tick() && decidable) {
            let until = d.saturating_sub(now);
            wake_at = wake_at.min(Instant::now() + until);
        }
        if let Some(b) = bound {
            wake_at = wake_at.min(b);
        }
        // Work done while there is nothing else to do. First, once (about 2 ms), what the
        // verdict's redaction compiles (`outcome`: its reason, line, context), not at the
        // verdict. Then the patterns a failure line would compile (its first, perhaps at an
        // OOM), a few at a time: on a thread they cost more memory (its own malloc arena:
        // +4.5 MiB peak against +1.6 MiB here, issue 28), and all at once they would hold up
        // the first lines by 50 ms. Shared with the judge's copy.
        if !prepared {
            crate::secrets::prepare();
            prepared = true;
        } else if !compiled {
            compiled = plan.judge.classifier.compile_next(COMPILE_PER_WAIT);
        }
        lapse.before_wait(collected_at, wake_at);
        source.wait(wake_at);
    }
}

mod event_stream;
use event_stream::{write_event, write_line, write_observation};

#[cfg(test)]
mod decisive_moment_tests;
#[cfg(test)]
mod evidence_before_deadline_tests;

/// Whether a line's class names a failure of its own (fatal, or evidence with a signature): the
/// moment to read what the process holds before it ends. Echoes of another rank's failure are not.
fn names_a_failure(class: &LineClass) -> bool {
    class
        .hits
        .iter()
        .any(|h| h.strength != Strength::Echo && h.signature.is_some())
}

/// A look this much later than planned means firedup itself did not run (its process stopped,
/// Ctrl-Z, or its machine paused): a loaded machine delays a thread by far less.
const UNSEEN_LAPSE: Duration = Duration::from_secs(3);

/// Time the judge loop did not run, measured on the monotonic clock between looks.
#[derive(Debug, Default)]
struct Lapse {
    /// When the next look was due, and how long the last look took to handle.
    planned: Option<(Instant, Duration)>,
}

impl Lapse {
    /// Before the wait for `wake_at`, after a look that began at `looked`.
    fn before_wait(&mut self, looked: Instant, wake_at: Instant) {
        let now = Instant::now();
        self.planned = Some((wake_at.max(now), now.duration_since(looked)));
    }

    /// At a look at `now`: how long firedup did not run since the last, if that long.
    fn unseen(&mut self, now: Instant) -> Option<Duration> {
        let (due, handling) = self.planned.take()?;
        let late = now.saturating_duration_since(due);
        let unseen = late.max(handling);
        (unseen >= UNSEEN_LAPSE).then_some(unseen)
    }
}

fn feed(
    judge: &mut Judge,
    obs: Observation,
    now: Duration,
    sink: &mut Option<&mut dyn Write>,
    out: &mut PendingEvents,
) {
    // A line is written with the class the judge gave it, so after the judge saw it; the other
    // observations before (the order in the stream is the same: the observation, then its events).
    let mut line_news = None;
    if let Some(w) = sink.as_deref_mut() {
        match &obs {
            Observation::Line { number, text } => line_news = Some((*number, text.clone())),
            // A probe repeating what it said last time is not news for the event stream.
            Observation::Probe { kind, outcome } => {
                if out.probe_news(*kind, outcome.detail()) {
                    write_observation(w, now, &obs);
                }
            }
            _ => write_observation(w, now, &obs),
        }
    }
    let evs = judge.observe(now, obs);
    if let Some(w) = sink.as_deref_mut() {
        if let Some((number, text)) = line_news {
            let unclassified = LineClass::default();
            let class = judge.last_line_class().unwrap_or(&unclassified);
            write_line(w, now, number, &text, class);
        }
        for e in &evs {
            write_event(w, e);
        }
    }
    out.judge_events.extend(evs);
}

struct PendingEvents {
    judge_events: Vec<Event>,
    /// The shape of each probe's last reported detail, for the event stream.
    probe_shapes: Vec<(ProbeKind, String)>,
}

impl PendingEvents {
    /// Whether a probe's detail differs (digits aside) from what it last reported: "HTTP 503
    /// (12 ms)" and "HTTP 503 (15 ms)" are the same news (see [`line_shape`]).
    fn probe_news(&mut self, kind: ProbeKind, detail: &str) -> bool {
        let shape = line_shape(detail);
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

/// The run's launch record (`meta.json`), read before the watch begins: what the verdict names
/// from it (the run's name, its owner) is set at the launch, and reading it at the verdict would
/// put a file's open and parse on the way to the caller (issue 28).
pub fn launch_record(target: &Target) -> Option<crate::rundir::RunMeta> {
    target.run.as_ref().and_then(|r| r.meta().ok())
}

/// The verdict object for a judgement of `target` under `plan` (which says the server's address,
/// when known); `meta`: the run's launch record ([`launch_record`]).
pub fn outcome(
    mut j: Judgement,
    plan: &Plan,
    target: &Target,
    meta: Option<crate::rundir::RunMeta>,
) -> Outcome {
    // What the log said is shown and stored: secret-shaped values in it are redacted (a server
    // that logs its database URL or its arguments).
    // By shape, by the values firedup knows, and by the forms that name a secret
    // (`api_key='...'` in sglang's `server_args=` line).
    let redact = |t: &mut String| *t = crate::secrets::redact_text(t);
    redact(&mut j.reason);
    if let Some(l) = j.line.as_mut() {
        redact(&mut l.text);
    }
    j.context.iter_mut().for_each(redact);
    // A probe's target is a URL that may carry a password (`--http http://u:pw@h/`).
    for p in &mut j.probes {
        redact(&mut p.target);
        redact(&mut p.last);
    }
    Outcome {
        attached: false,
        schema: crate::verdict::OUTCOME_SCHEMA,
        name: meta.as_ref().and_then(|m| m.name.clone()),
        owner: meta.and_then(|m| m.owner).map(|o| o.pid),
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
        ready_s: j
            .ready_at
            .map(|d| (d.as_secs_f64() * 1000.0).round() / 1000.0),
        host: None,
        log_from_line: target.log_start.map(|s| s.line),
        rank: j.rank,
        url: plan.address.as_ref().map(|a| a.base_url()),
        port: plan.address.as_ref().map(|a| a.port),
        job: j.job,
        node: j.node,
        nodes: None,
        settled: None,
        cause: j.cause,
        placed: j.placed,
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
