//! The seam for observations: a [`Source`] turns what happens to a server into timestamped
//! observations for the judge loop ([`crate::engine::judge_loop`]). This machine's source is
//! [`crate::host::local::LocalSource`] (inotify, pidfd, the prober, sd_notify); over SSH it is
//! [`crate::remote::source::RemoteSource`], fed by a `firedup __agent` on the host.

use std::time::{Duration, Instant};

use crate::judge::Observation;
use crate::plan::Plan;

/// Something the source saw.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// An observation for the judge, at a time on the source's clock ([`Source::now`]).
    Obs(Duration, Observation),
    /// A note about the watch itself (lost contact, reconnected).
    Note(Duration, String),
}

/// Where observations come from.
pub trait Source {
    /// Appends what was seen since the last call; never blocks.
    fn collect(&mut self, out: &mut Vec<Seen>);
    /// Blocks until something may have happened, or `until`.
    fn wait(&mut self, until: Instant);
    /// The source's clock: time since launch (or attach) by the server side's reckoning.
    fn now(&self) -> Duration;
    /// The latest instant at which the source wants to be collected again.
    fn next_wake(&self) -> Instant;
    /// Whether the judge may be ticked now (false while the source cannot see: a lost link).
    fn can_tick(&self) -> bool {
        true
    }
    /// Whether everything the log held when this collection began has been collected: false
    /// while a backlog is handed over in slices. No deadline is decided before it is.
    fn caught_up(&self) -> bool {
        true
    }
    /// While not [`Source::caught_up`]: the time on the source's clock by which everything the
    /// log held has been collected, so the judge may be ticked then (`None`: not yet known).
    fn read_through(&self) -> Option<Duration> {
        None
    }
    /// The time on the source's clock at which the last collection that ended caught up began:
    /// everything the log held and the processes showed by then has been handed over (`None`:
    /// not known, as over a link that has not said it yet). A multi-node group decides on it
    /// (`firedup_judge::group::settle`).
    fn checked_through(&self) -> Option<Duration> {
        None
    }
    /// A line just named a failure: read now what lasts only while the process lives (its GPU
    /// memory), rather than at the next timer. Sources that cannot (a remote agent's prober runs
    /// on its own timer) ignore it.
    fn decisive_moment(&mut self) {}
    /// A line just met a ready condition before the verdict: run the readiness probes now (the
    /// run's own listener ends the confirmation window, and may be what is still missing),
    /// rather than at their next round. Sources whose probes run elsewhere ignore it.
    fn ready_line_seen(&mut self) {}
    /// The verdict is known: stop looking (probing, sampling) at once, without waiting for
    /// anything. What the source holds is let go when it is dropped, later.
    fn stand_down(&mut self) {}
}

/// How often CPU time and reads are sampled for a stall window (a tenth of it, 1 to 10 s).
pub fn sample_interval(plan: &Plan) -> Duration {
    plan.judge
        .stall
        .map(|s| (s / 10).clamp(Duration::from_secs(1), Duration::from_secs(10)))
        .unwrap_or(Duration::from_secs(10))
}
