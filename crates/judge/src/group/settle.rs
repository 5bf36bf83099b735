//! When a failed group may decide while some of its nodes still run: on evidence, not after a
//! fixed wait (issue 27).
//!
//! The node that failed first is often not the first to say so (its peers' collectives time
//! out while its own launcher still reports). So once a node's verdict fails the group, each
//! node still running is asked how far it has looked: it has read its log to its end and
//! checked its processes up to `checked_through` (its judge has taken all of that in), and the
//! earliest failure evidence it holds that is no echo (`pending_cause`). The group decides:
//! - at once when no node runs any more (`every_node`);
//! - when the best verdict so far is a cause (rule 1 of [`super`]) at `c` on the group's clock,
//!   as soon as every node still running has checked past `c` + [`CHECK_MARGIN`] and holds no
//!   cause of its own at or before `c` (`evidence`). Such a node cannot beat it any more: a cause
//!   is dated by its line, and every line it has not read yet is stamped after what it checked;
//!   any other verdict it may reach is dated when reached, later still. A launcher that prints a
//!   dead rank's summary only after it reaped it is dated by that summary (or by its verdict),
//!   so it could never beat `c` either: waiting longer for it would not change the verdict;
//! - otherwise at the [`SETTLE_BOUND`] after the first verdict that failed the group (`bound`):
//!   a best verdict that is no cause (an echo, a silent end, a wait) can be beaten by any cause
//!   still to come, whenever it is dated, and a node that cannot say how far it looked (a lost
//!   link) or holds an earlier cause still settling gets the same bounded wait as before.
//!
//! Times here are durations: each node's from its own launch, moved onto the group's clock by
//! `launched_at` as [`super::group_verdict`] does; `failed_at` and `now` on any one clock.

use std::time::Duration;

use super::{NodeEnd, Standing, standing, when};
use crate::verdict::GroupSettled;

/// How long the group waits at most after the first verdict that failed it, for a node that
/// cannot say it has looked past the cause: the fixed window this rule replaced. It is well
/// above the agent's heartbeat (1 s) and the silence that makes a link lost (3 s), so a link
/// that only stutters still reports in time, and a node whose own cause settles (1.5 s after
/// its first fatal line, by default) says its verdict within it.
pub const SETTLE_BOUND: Duration = Duration::from_secs(10);

/// How far past the cause a node must have looked. A line read after a look is stamped with
/// when the log held it: by the file's modification time (the kernel's coarse clock, 10 ms) and
/// two clock reads that a loaded machine may hold apart; such a stamp can fall a little before
/// the look that missed the line. One second covers that with room, and costs nothing in
/// practice: the failing node's own verdict comes 1.5 s after its cause line (its settle window).
pub const CHECK_MARGIN: Duration = Duration::from_secs(1);

/// How far a node still running has looked, on its own clock (from its launch), and where its
/// ranks are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeProgress {
    /// It has read its log to its end and checked its processes up to this time, and its judge
    /// has taken all of it in; `None` while it has not said (or cannot: a lost link).
    pub checked_through: Option<Duration>,
    /// The earliest failure evidence it holds that is no echo: its verdict may yet be dated then.
    pub pending_cause: Option<Duration>,
    /// Where its ranks were at its last look at their stacks since its last progress (empty
    /// when none was taken since): the group compares them across its nodes also for a node it
    /// stops while it is silent ([`super::group_verdict`]).
    pub placed: Vec<crate::rank_place::RankPlace>,
    /// Its last sign of life (a new line, CPU use, ...), said when the group decides at its
    /// bound with it still running.
    pub last_progress: Option<Duration>,
}

/// A node still running, as the group sees it while it settles.
#[derive(Debug, Clone)]
pub struct Running {
    /// The node's rank.
    pub node_rank: u32,
    /// The host as given.
    pub node: String,
    /// When it was launched, from the group's first launch.
    pub launched_at: Duration,
    /// How far it has looked.
    pub progress: NodeProgress,
}

/// What the group does now.
#[derive(Debug, Clone, PartialEq)]
pub enum Settle {
    /// Decide now (the nodes still running are stopped), for this reason.
    Decide(GroupSettled),
    /// Wait for more news, at most until this time (on `now`'s clock).
    WaitUntil(Duration),
}

/// Whether a group that a node's verdict failed at `failed_at` may decide at `now`: `ended`
/// are the nodes with their own verdict (at least the one that failed the group), `running` the
/// others with what they said of their progress (see the module doc).
pub fn settle(
    ended: &[NodeEnd],
    running: &[Running],
    server: bool,
    failed_at: Duration,
    now: Duration,
) -> Settle {
    let after_s = round_ms(now.saturating_sub(failed_at).as_secs_f64());
    let decide = |by: &str, description: String| {
        Settle::Decide(GroupSettled {
            by: by.to_string(),
            after_s,
            description,
        })
    };
    if running.is_empty() {
        return decide("every_node", "every node said its own verdict".to_string());
    }
    let best = ended.iter().min_by_key(|n| {
        let s = standing(n, server);
        let unnamed = s == Standing::Waiting && n.outcome.rank.is_none();
        (s, unnamed, when(n), n.node_rank)
    });
    let cause = best
        .filter(|n| standing(n, server) == Standing::Cause)
        .map(|n| (n, when(n)));
    let blocking: Vec<String> = match cause {
        Some((_, c)) => running.iter().filter_map(|r| blocks(r, c)).collect(),
        None => Vec::new(),
    };
    match (cause, blocking.is_empty()) {
        (Some((n, c)), true) => {
            let checked: Vec<String> = running
                .iter()
                .map(|r| {
                    let through = r.launched_at + r.progress.checked_through.unwrap_or_default();
                    format!(
                        "node {} ({}) through {:.1}s",
                        r.node_rank,
                        r.node,
                        through.as_secs_f64()
                    )
                })
                .collect();
            decide(
                "evidence",
                format!(
                    "node {} ({})'s cause at {:.1}s came first: every other node still running had read its log and checked its processes past it ({}) with no earlier cause of its own",
                    n.node_rank,
                    n.node,
                    c.as_secs_f64(),
                    checked.join(", ")
                ),
            )
        }
        _ if now >= failed_at + SETTLE_BOUND => {
            let why = match cause {
                Some(_) => blocking.join("; "),
                None => format!(
                    "the first verdict is no cause of its own (a cause still to come on another node would come first); still running: {}",
                    running
                        .iter()
                        .map(still_running)
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            };
            decide(
                "bound",
                format!(
                    "decided {} after the first verdict that failed the group: {why}",
                    crate::duration::format_duration(SETTLE_BOUND)
                ),
            )
        }
        _ => Settle::WaitUntil(failed_at + SETTLE_BOUND),
    }
}

/// A node still running when the group decides at its bound, in words: its last sign of life
/// and whether its ranks' places were read since (on the group's clock).
fn still_running(r: &Running) -> String {
    let last = match r.progress.last_progress {
        Some(t) => format!(
            "its last sign of life at {:.1}s",
            (r.launched_at + t).as_secs_f64()
        ),
        None => "no word of its progress".to_string(),
    };
    let places = match r.progress.placed.len() {
        0 => "its ranks' places not read since",
        _ => "its ranks' places read since",
    };
    format!("node {} ({}), {last}, {places}", r.node_rank, r.node)
}

/// Why node `r` may still beat a cause at `c` (group clock), if it may.
fn blocks(r: &Running, c: Duration) -> Option<String> {
    let name = format!("node {} ({})", r.node_rank, r.node);
    if let Some(p) = r.progress.pending_cause.map(|p| r.launched_at + p) {
        if p <= c {
            return Some(format!(
                "{name} holds a cause of its own at {:.1}s, still settling",
                p.as_secs_f64()
            ));
        }
    }
    match r.progress.checked_through.map(|t| r.launched_at + t) {
        Some(t) if t >= c + CHECK_MARGIN => None,
        Some(t) => Some(format!(
            "{name} had looked only through {:.1}s",
            t.as_secs_f64()
        )),
        None => Some(format!("{name} never said how far it had looked")),
    }
}

fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::{CauseMark, Outcome, Verdict};

    /// A node's own verdict: `Some(echo)` for a line-named cause seen at `at` (node clock, s).
    fn ended(
        node_rank: u32,
        verdict: Verdict,
        echo: Option<bool>,
        at: f64,
        launched: f64,
    ) -> NodeEnd {
        let mut o = Outcome::without_watch(verdict, "said".into(), "r", "/l", None);
        o.elapsed_s = at + 1.5;
        o.cause = echo.map(|echo| CauseMark {
            at: Duration::from_secs_f64(at),
            echo,
        });
        NodeEnd {
            node_rank,
            node: format!("host{node_rank}"),
            outcome: o,
            launched_at: Duration::from_secs_f64(launched),
            stopped_by_group: false,
        }
    }

    /// A node still running: launched at (group clock), checked through and pending (node clock).
    fn running(
        node_rank: u32,
        launched: f64,
        through: Option<f64>,
        pending: Option<f64>,
    ) -> Running {
        Running {
            node_rank,
            node: format!("host{node_rank}"),
            launched_at: Duration::from_secs_f64(launched),
            progress: NodeProgress {
                checked_through: through.map(Duration::from_secs_f64),
                pending_cause: pending.map(Duration::from_secs_f64),
                placed: Vec::new(),
                last_progress: None,
            },
        }
    }

    use Verdict::*;

    /// (what, ended, running, failed_at, now, expected: Ok(by) or Err(wait until)).
    type Case = (
        &'static str,
        Vec<NodeEnd>,
        Vec<Running>,
        f64,
        f64,
        Result<&'static str, f64>,
    );

    #[test]
    fn a_failed_group_decides_on_evidence_and_waits_at_most_the_bound() {
        let cases: Vec<Case> = vec![
            (
                "no node runs any more",
                vec![ended(1, Failed, Some(false), 8.0, 0.2)],
                vec![],
                9.5,
                9.5,
                Ok("every_node"),
            ),
            (
                "node 0 checked past node 1's cause and the margin: decided",
                vec![ended(1, Failed, Some(false), 8.0, 0.2)],
                vec![running(0, 0.0, Some(9.3), None)],
                9.7,
                9.7,
                Ok("evidence"),
            ),
            (
                "node 0 checked past the cause but not past the margin yet: wait",
                vec![ended(1, Failed, Some(false), 8.0, 0.2)],
                vec![running(0, 0.0, Some(9.0), None)],
                9.7,
                9.7,
                Err(19.7),
            ),
            (
                "node 0 never said how far it looked (a lost link): wait for the bound",
                vec![ended(1, Failed, Some(false), 8.0, 0.2)],
                vec![running(0, 0.0, None, None)],
                9.7,
                12.0,
                Err(19.7),
            ),
            (
                "... and at the bound the group decides without it",
                vec![ended(1, Failed, Some(false), 8.0, 0.2)],
                vec![running(0, 0.0, None, None)],
                9.7,
                19.7,
                Ok("bound"),
            ),
            (
                "node 0 holds an earlier cause still settling: it may win, wait",
                vec![ended(1, Failed, Some(false), 8.0, 0.2)],
                vec![running(0, 0.0, Some(30.0), Some(7.9))],
                9.7,
                9.7,
                Err(19.7),
            ),
            (
                "node 0's own cause came after node 1's: it cannot win, decided",
                vec![ended(1, Failed, Some(false), 8.0, 0.2)],
                vec![running(0, 0.0, Some(30.0), Some(8.5))],
                9.7,
                9.7,
                Ok("evidence"),
            ),
            (
                "the launch times move the clocks: node 0 launched 2 s later checked through 7.5 s of its own = 9.5 s",
                vec![ended(1, Failed, Some(false), 8.0, 0.0)],
                vec![running(0, 2.0, Some(7.5), None)],
                9.7,
                9.7,
                Ok("evidence"),
            ),
            (
                "... and its evidence at 6.5 s of its own (8.5 s) is after node 1's cause at 8 s",
                vec![ended(1, Failed, Some(false), 8.0, 0.0)],
                vec![running(0, 2.0, Some(7.5), Some(6.5))],
                9.7,
                9.7,
                Ok("evidence"),
            ),
            (
                "the first verdict is an echo: any cause still to come beats it, wait",
                vec![ended(0, Failed, Some(true), 5.0, 0.0)],
                vec![running(1, 0.2, Some(60.0), None)],
                6.5,
                6.5,
                Err(16.5),
            ),
            (
                "a killed node is dated by its verdict: node 0 must have checked past that",
                vec![ended(1, Killed, None, 8.0, 0.2)],
                vec![running(0, 0.0, Some(10.0), None)],
                9.7,
                9.7,
                Err(19.7),
            ),
            (
                "... and decides once it has",
                vec![ended(1, Killed, None, 8.0, 0.2)],
                vec![running(0, 0.0, Some(10.8), None)],
                9.7,
                10.9,
                Ok("evidence"),
            ),
            (
                "an echo, then the cause: decided by the cause once the rest checked past it",
                vec![
                    ended(0, Failed, Some(true), 5.0, 0.0),
                    ended(1, Failed, Some(false), 4.0, 0.2),
                ],
                vec![running(2, 0.4, Some(6.0), None)],
                6.5,
                7.0,
                Ok("evidence"),
            ),
            (
                "one of three still short of the margin: wait",
                vec![ended(1, Failed, Some(false), 4.0, 0.2)],
                vec![
                    running(0, 0.0, Some(9.0), None),
                    running(2, 0.4, Some(4.5), None),
                ],
                6.5,
                7.0,
                Err(16.5),
            ),
        ];
        for (what, ended, running, failed_at, now, expected) in cases {
            let got = settle(
                &ended,
                &running,
                false,
                Duration::from_secs_f64(failed_at),
                Duration::from_secs_f64(now),
            );
            match (&got, expected) {
                (Settle::Decide(s), Ok(by)) => assert_eq!(s.by, by, "{what}: {s:?}"),
                (Settle::WaitUntil(t), Err(until)) => {
                    assert_eq!(*t, Duration::from_secs_f64(until), "{what}")
                }
                _ => panic!("{what}: expected {expected:?}, got {got:?}"),
            }
        }
    }

    /// A node that stops when the evidence says so ends with the verdict the fixed window would
    /// have given: what it could still say later is dated after the cause.
    #[test]
    fn deciding_on_evidence_names_the_node_the_fixed_window_would() {
        // Node 1 printed its OOM at 8 s; node 0's rank died silently at 7 s and its launcher
        // reports that only after reaping it, at 12 s (a summary line, and its verdict after).
        let first = ended(1, Failed, Some(false), 8.0, 0.2);
        let node0_late = ended(0, Killed, None, 12.0, 0.0);
        let at_the_bound = super::super::group_verdict("g", &[node0_late, first.clone()], false);
        let mut stopped = ended(0, Failed, Some(true), 10.0, 0.0);
        stopped.stopped_by_group = true;
        let on_evidence = super::super::group_verdict("g", &[stopped, first], false);
        assert_eq!(at_the_bound.node.as_deref(), Some("host1"));
        assert_eq!(on_evidence.node, at_the_bound.node);
        assert_eq!(on_evidence.verdict, at_the_bound.verdict);
    }

    #[test]
    fn a_bound_reached_on_a_wait_says_each_running_nodes_last_sign_of_life_and_places() {
        let stalled = ended(0, Stalled, None, 40.0, 0.0);
        let mut looked = running(1, 2.0, Some(49.0), None);
        looked.progress.last_progress = Some(Duration::from_secs(30));
        looked.progress.placed = vec![crate::rank_place::RankPlace {
            rank: 2,
            place: crate::rank_place::Place::Unknown,
        }];
        let unheard = running(2, 3.0, None, None);
        let failed_at = Duration::from_secs_f64(41.5);
        let Settle::Decide(s) = settle(
            &[stalled],
            &[looked, unheard],
            false,
            failed_at,
            failed_at + SETTLE_BOUND,
        ) else {
            panic!("the bound decides");
        };
        assert_eq!(s.by, "bound");
        assert!(
            s.description.ends_with(
                "still running: node 1 (host1), its last sign of life at 32.0s, its ranks' places \
                 read since; node 2 (host2), no word of its progress, its ranks' places not read \
                 since"
            ),
            "{}",
            s.description
        );
    }
}
