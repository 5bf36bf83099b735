//! No deadline is decided while the source is gathering the evidence that would explain it (the
//! ranks' stacks being compared: not caught up, no time to tick up to), and the loop does not spin
//! on the passed deadline meanwhile: it waits for the source. On simulated time.

use std::time::{Duration, Instant};

use super::{NoProgress, judge_loop};
use crate::judge::Observation;
use crate::plan::{WatchOptions, resolve};
use crate::source::{Seen, Source};

/// Two ranks joined at 0 s and went silent; their stacks are compared from `from` to `until`,
/// which then names rank 1 outside the collective.
struct Comparing {
    t: Duration,
    from: Duration,
    until: Duration,
    started: bool,
    named: bool,
    /// Waits that returned at once with nothing to wait for: a busy loop.
    spins: u32,
}

impl Comparing {
    fn comparing(&self) -> bool {
        self.t >= self.from && self.t < self.until
    }
}

impl Source for Comparing {
    fn collect(&mut self, out: &mut Vec<Seen>) {
        if !self.started {
            self.started = true;
            out.push(Seen::Obs(self.t, Observation::Started { pid: 1 }));
            for (i, text) in ["rank 0 joined", "rank 1 joined"].iter().enumerate() {
                out.push(Seen::Obs(
                    self.t,
                    Observation::Line {
                        number: i as u64 + 1,
                        text: text.to_string(),
                    },
                ));
            }
        }
        if self.t >= self.until && !self.named {
            self.named = true;
            out.push(Seen::Obs(
                self.t,
                Observation::RankOutsideCollective {
                    rank: 1,
                    evidence: "rank 1 in time.sleep; rank 0 in all_reduce".into(),
                },
            ));
        }
    }
    fn wait(&mut self, until: Instant) {
        let d = until.saturating_duration_since(Instant::now());
        if d < Duration::from_millis(1) {
            self.spins += 1;
        }
        // The comparison's end wakes the loop, as the observer's thread does.
        let step = d.max(Duration::from_millis(1));
        self.t = match self.comparing() {
            true => (self.t + step).min(self.until),
            false => self.t + step,
        };
    }
    fn now(&self) -> Duration {
        self.t
    }
    fn next_wake(&self) -> Instant {
        Instant::now() + Duration::from_secs(1)
    }
    fn caught_up(&self) -> bool {
        !self.comparing()
    }
}

#[test]
fn a_stall_due_while_the_stacks_are_compared_waits_for_them_and_names_the_rank() {
    let opts = WatchOptions {
        until_exit: true,
        stall: Some("20s".into()),
        ..Default::default()
    };
    let log = "/nonexistent/x.log";
    let plan = resolve(&opts, &["torchrun".into()], log, true).expect("a plan");
    let mut source = Comparing {
        t: Duration::ZERO,
        from: Duration::from_secs(15),
        until: Duration::from_millis(27_500),
        started: false,
        named: false,
        spins: 0,
    };
    let j = judge_loop(&plan, log.as_ref(), &mut source, &mut NoProgress, None);
    assert_eq!(j.verdict.as_str(), "stalled", "{j:?}");
    assert_eq!(j.rank, Some(1), "{j:?}");
    assert!(
        source.spins == 0,
        "{} waits returned at once while the comparison ran",
        source.spins
    );
}
