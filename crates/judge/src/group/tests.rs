//! The group's rule on simulated time: each case is the nodes' own verdicts (when each node was
//! launched on the group's clock, when its cause was seen on its own) and the group's verdict.

use std::time::Duration;

use super::*;
use crate::verdict::CauseMark;

/// One node: verdict, `Some(echo)` for a line-named cause, when it was seen (node clock, s),
/// when the node was launched (group clock, s), stopped by the group, the rank its judge named.
struct N(Verdict, Option<bool>, f64, f64, bool, Option<u32>);

fn nodes(spec: &[N]) -> Vec<NodeEnd> {
    spec.iter()
        .enumerate()
        .map(|(i, N(verdict, echo, at, launched, stopped, rank))| {
            let mut o = Outcome::without_watch(
                *verdict,
                format!("node {i} said {verdict}"),
                &format!("run-{i}"),
                &format!("/logs/{i}.log"),
                Some(100 + i as u32),
            );
            o.elapsed_s = at + 0.5;
            o.rank = *rank;
            o.cause = echo.map(|echo| CauseMark {
                at: Duration::from_secs_f64(*at),
                echo,
            });
            NodeEnd {
                node_rank: i as u32,
                node: format!("host{i}"),
                outcome: o,
                launched_at: Duration::from_secs_f64(*launched),
                stopped_by_group: *stopped,
            }
        })
        .collect()
}

use Verdict::*;

#[test]
fn the_group_verdict_follows_the_cross_node_rule() {
    let cases: Vec<(&str, Vec<N>, Verdict, Option<&str>)> = vec![
        (
            "every node succeeded",
            vec![
                N(Succeeded, None, 5.0, 0.0, false, None),
                N(Succeeded, None, 5.0, 0.2, false, None),
            ],
            Succeeded,
            None,
        ),
        (
            "node 0 ready, node 1 still serving (its dummy health endpoint)",
            vec![
                N(Ready, None, 5.0, 0.0, false, None),
                N(Ready, None, 5.0, 0.2, false, None),
            ],
            Ready,
            None,
        ),
        (
            "node 1's OOM beats node 0's collective timeout seen before it on node 0's clock",
            vec![
                N(Failed, Some(true), 9.0, 0.0, false, Some(0)),
                N(Failed, Some(false), 8.5, 1.0, false, Some(1)),
            ],
            Failed,
            Some("host1"),
        ),
        (
            "an echo never wins over a cause, even one seen much later",
            vec![
                N(Failed, Some(true), 1.0, 0.0, false, None),
                N(Failed, Some(false), 30.0, 0.0, false, None),
            ],
            Failed,
            Some("host1"),
        ),
        (
            "two causes: the earliest on the group's clock (node 1 launched later, its 2 s is 5 s)",
            vec![
                N(Failed, Some(false), 4.0, 0.0, false, None),
                N(Failed, Some(false), 2.0, 3.0, false, None),
            ],
            Failed,
            Some("host0"),
        ),
        (
            "a tie goes to the lower node rank",
            vec![
                N(Killed, None, 4.0, 0.0, false, None),
                N(Killed, None, 4.0, 0.0, false, None),
            ],
            Killed,
            Some("host0"),
        ),
        (
            "node 1 SIGKILLed: killed, node 1, ahead of node 0's echo",
            vec![
                N(Failed, Some(true), 3.0, 0.0, false, None),
                N(Killed, None, 3.5, 0.0, false, None),
            ],
            Killed,
            Some("host1"),
        ),
        (
            "a node that died printing nothing beats its peers' echoes",
            vec![
                N(Failed, Some(true), 3.0, 0.0, false, None),
                N(Exited, None, 4.0, 0.0, false, None),
            ],
            Exited,
            Some("host1"),
        ),
        (
            "a node the group stopped never decides over the node that failed",
            vec![
                N(Killed, None, 1.0, 0.0, true, None),
                N(Failed, Some(true), 4.0, 0.0, false, None),
            ],
            Failed,
            Some("host1"),
        ),
        (
            "lost contact with node 0 is not the group's verdict while node 1 names a cause",
            vec![
                N(MonitorError, None, 1.0, 0.0, false, None),
                N(Failed, Some(false), 4.0, 0.0, false, None),
            ],
            Failed,
            Some("host1"),
        ),
        (
            "a server's node 1 whose processes ended with 0 has left the group",
            vec![
                N(Ready, None, 1.0, 0.0, false, None),
                N(Succeeded, None, 4.0, 0.0, false, None),
            ],
            Exited,
            Some("host1"),
        ),
        (
            "lost contact alone is the group's monitor_error, naming that node",
            vec![
                N(Ready, None, 1.0, 0.0, false, None),
                N(MonitorError, None, 4.0, 0.0, false, None),
            ],
            MonitorError,
            Some("host1"),
        ),
        (
            "all nodes only waiting: stalled, the node whose stacks named a rank outside the collective",
            vec![
                N(Stalled, None, 60.0, 0.0, false, None),
                N(Stalled, None, 61.0, 0.0, false, Some(3)),
            ],
            Stalled,
            Some("host1"),
        ),
        (
            "all nodes only waiting, no stacks: the first to stall",
            vec![
                N(Stalled, None, 61.0, 0.0, false, None),
                N(Stalled, None, 60.0, 0.0, false, None),
            ],
            Stalled,
            Some("host1"),
        ),
        (
            "an echo beats waiting",
            vec![
                N(Stalled, None, 10.0, 0.0, false, None),
                N(Failed, Some(true), 50.0, 0.0, false, None),
            ],
            Failed,
            Some("host1"),
        ),
    ];
    for (what, spec, verdict, node) in cases {
        let server = spec[0].0 == Ready;
        let o = group_verdict("grp-1", &nodes(&spec), server);
        assert_eq!((o.verdict, o.node.as_deref()), (verdict, node), "{what}");
        assert_eq!(o.run_id, "grp-1", "{what}");
        let listed: Vec<u32> = o
            .nodes
            .as_ref()
            .unwrap()
            .iter()
            .map(|n| n.node_rank)
            .collect();
        assert_eq!(listed, (0..spec.len() as u32).collect::<Vec<_>>(), "{what}");
        if let Some(n) = node {
            assert!(
                o.reason.contains(n),
                "{what}: the reason names the node: {}",
                o.reason
            );
        }
    }
}

#[test]
fn the_deciding_nodes_line_rank_and_log_are_the_groups() {
    let spec = vec![
        N(Failed, Some(true), 9.0, 0.0, false, Some(0)),
        N(Failed, Some(false), 8.5, 1.0, false, Some(1)),
    ];
    let o = group_verdict("grp-2", &nodes(&spec), false);
    assert_eq!(o.rank, Some(1));
    assert_eq!(o.log, "/logs/1.log");
    assert_eq!(o.reason, "node 1 (host1): node 1 said failed");
    let n1 = &o.nodes.as_ref().unwrap()[1];
    assert_eq!(
        (n1.node.as_str(), n1.pid, n1.log.as_str()),
        ("host1", Some(101), "/logs/1.log")
    );
    // The group's time is its last node's verdict: node 1 launched at 1 s, decided at 9 s.
    assert_eq!(o.elapsed_s, 10.0);
}

#[test]
fn each_nodes_timeline_is_on_the_groups_clock() {
    // (launched on the group's clock, the node's own phase times) → the node's `timeline`.
    let cases: [(f64, &[f64], &[f64]); 3] = [
        (0.0, &[0.5, 2.0], &[0.5, 2.0]),
        (1.25, &[0.5, 2.0], &[1.75, 3.25]),
        (3.0, &[], &[]),
    ];
    for (launched, own, group) in cases {
        let mut n = nodes(&[N(Ready, None, 1.0, launched, false, None)]);
        n[0].outcome.timeline = own
            .iter()
            .enumerate()
            .map(|(i, at)| PhaseAt {
                phase: format!("p{i}"),
                at_s: *at,
            })
            .collect();
        let o = group_verdict("grp-t", &n, true);
        let got: Vec<f64> = o.nodes.unwrap()[0]
            .timeline
            .iter()
            .map(|p| p.at_s)
            .collect();
        assert_eq!(got, group, "launched at {launched}");
    }
}

#[test]
fn only_a_fine_node_leaves_the_group_fine() {
    for (v, fails) in [
        (Ready, false),
        (Succeeded, false),
        (Failed, true),
        (Exited, true),
        (Killed, true),
        (Stalled, true),
        (TimedOut, true),
        (MonitorError, true),
        (NeverStarted, true),
    ] {
        let n = &nodes(&[N(v, None, 1.0, 0.0, false, None)])[0];
        assert_eq!(fails_the_group(n, false), fails, "{v}");
    }
}

/// A real judge over `log` (one line a second from `t0` s), then an exit 1: its verdict as an
/// outcome with the cause mark the judge set.
fn judged(log: &[&str], t0: u64) -> Outcome {
    use crate::classify::{ClassifierSpec, builtin_catalog};
    use crate::judge::{Judge, JudgeConfig, Observation};
    use crate::{Classifier, ExitInfo, Mode};
    let classifier = Classifier::new(&ClassifierSpec {
        signatures: builtin_catalog().signatures,
        fail_lines: Vec::new(),
        ready_lines: Vec::new(),
        noise: Vec::new(),
        phases: Vec::new(),
    })
    .unwrap();
    let mut j = Judge::new(JudgeConfig::new(Mode::UntilExit, "/l", classifier));
    j.observe(Duration::ZERO, Observation::Started { pid: 42 });
    let mut at = t0;
    for (i, text) in log.iter().enumerate() {
        at += 1;
        let line = Observation::Line {
            number: i as u64 + 1,
            text: text.to_string(),
        };
        j.observe(Duration::from_secs(at), line);
    }
    j.observe(
        Duration::from_secs(at + 1),
        Observation::Exited(Some(ExitInfo::code(1))),
    );
    let v = j.verdict().expect("an exit decides").clone();
    let mut o = Outcome::without_watch(v.verdict, v.reason, "r", "/l", Some(42));
    o.cause = v.cause;
    o.elapsed_s = v.at.as_secs_f64();
    o
}

#[test]
fn the_judge_marks_its_cause_an_echo_or_not_and_the_group_chooses_by_it() {
    // Node 0's collective times out first on the group's clock; node 1's OOM is its cause.
    let echo = judged(
        &[
            "[rank0]: RuntimeError: [gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 10000ms for recv operation to complete",
        ],
        0,
    );
    let cause = judged(
        &["[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB"],
        5,
    );
    assert_eq!(
        echo.cause.map(|c| (c.echo, c.at)),
        Some((true, Duration::from_secs(1)))
    );
    assert_eq!(
        cause.cause.map(|c| (c.echo, c.at)),
        Some((false, Duration::from_secs(6)))
    );
    let ends: Vec<NodeEnd> = [echo, cause]
        .into_iter()
        .enumerate()
        .map(|(i, outcome)| NodeEnd {
            node_rank: i as u32,
            node: format!("host{i}"),
            outcome,
            launched_at: Duration::ZERO,
            stopped_by_group: false,
        })
        .collect();
    let o = group_verdict("grp-3", &ends, false);
    assert_eq!(
        (o.verdict, o.node.as_deref()),
        (Verdict::Failed, Some("host1"))
    );
}

/// Where a rank was: `I` inside, `O` outside, `U` not known.
#[derive(Clone, Copy)]
enum P {
    I(u32),
    O(u32),
    U(u32),
}

fn placed(ps: &[P]) -> Vec<crate::rank_place::RankPlace> {
    use crate::rank_place::{Place, RankPlace};
    ps.iter()
        .map(|p| match *p {
            P::I(rank) => RankPlace {
                rank,
                place: Place::Inside("waits in futex_do_wait".into()),
            },
            P::O(rank) => RankPlace {
                rank,
                place: Place::Outside("sleeps in hrtimer_nanosleep".into()),
            },
            P::U(rank) => RankPlace {
                rank,
                place: Place::Unknown,
            },
        })
        .collect()
}

#[test]
fn the_ranks_places_compared_across_nodes_name_the_one_outside_or_nobody() {
    // (what, each node: its verdict, the rank its own judge named, its ranks' places;
    // the group's verdict, node, rank)
    type Spec<'a> = (Verdict, Option<u32>, &'a [P]);
    fn node(v: Verdict, rank: Option<u32>, ps: &[P]) -> Spec<'_> {
        (v, rank, ps)
    }
    let cases: Vec<(&str, Vec<Spec>, Verdict, Option<&str>, Option<u32>)> = vec![
        (
            "one rank a node: node 1's only rank sleeps while node 0's waits inside",
            vec![
                node(Stalled, None, &[P::I(0)]),
                node(Stalled, None, &[P::O(1)]),
            ],
            Stalled,
            Some("host1"),
            Some(1),
        ),
        (
            "the same when node 1 stalled first and node 0's rank is the one outside",
            vec![
                node(Stalled, None, &[P::O(0)]),
                node(Stalled, None, &[P::I(1)]),
            ],
            Stalled,
            Some("host0"),
            Some(0),
        ),
        (
            "three nodes, timed out counts as waiting too",
            vec![
                node(Stalled, None, &[P::I(0)]),
                node(TimedOut, None, &[P::I(1)]),
                node(Stalled, None, &[P::O(2)]),
            ],
            Stalled,
            Some("host2"),
            Some(2),
        ),
        (
            "two ranks a node: the node's own naming agrees with the group's",
            vec![
                node(Stalled, None, &[P::I(0), P::I(1)]),
                node(Stalled, Some(2), &[P::O(2), P::I(3)]),
            ],
            Stalled,
            Some("host1"),
            Some(2),
        ),
        (
            "two ranks outside, one on each node: nobody is named, not even a node's own",
            vec![
                node(Stalled, Some(0), &[P::O(0), P::I(1)]),
                node(Stalled, Some(2), &[P::O(2), P::I(3)]),
            ],
            Stalled,
            Some("host1"),
            None,
        ),
        (
            "two ranks outside, each node's only one: nobody",
            vec![
                node(Stalled, None, &[P::O(0)]),
                node(Stalled, None, &[P::O(1)]),
            ],
            Stalled,
            Some("host1"),
            None,
        ),
        (
            "node 0's stacks were not read: nobody",
            vec![node(Stalled, None, &[]), node(Stalled, None, &[P::O(1)])],
            Stalled,
            Some("host1"),
            None,
        ),
        (
            "a peer's place is not known: nobody",
            vec![
                node(Stalled, None, &[P::U(0)]),
                node(Stalled, None, &[P::O(1)]),
            ],
            Stalled,
            Some("host1"),
            None,
        ),
        (
            "every rank inside: nobody",
            vec![
                node(Stalled, None, &[P::I(0)]),
                node(Stalled, None, &[P::I(1)]),
            ],
            Stalled,
            Some("host1"),
            None,
        ),
        (
            "one rank number on two nodes (local ranks, not global): nobody",
            vec![
                node(Stalled, None, &[P::I(0)]),
                node(Stalled, None, &[P::O(0)]),
            ],
            Stalled,
            Some("host1"),
            None,
        ),
        (
            "node 0 lost: the group's places are not all known, nobody is named",
            vec![
                node(MonitorError, None, &[]),
                node(Stalled, None, &[P::O(1)]),
            ],
            Stalled,
            Some("host1"),
            None,
        ),
        (
            "node 0 stopped by the group while silent, its rank inside: node 1's rank is named",
            vec![
                node(Killed, None, &[P::I(0)]),
                node(Stalled, None, &[P::O(1)]),
            ],
            Stalled,
            Some("host1"),
            Some(1),
        ),
        (
            "node 1 stopped by the group while silent, its rank outside: named, node 0's verdict",
            vec![
                node(Stalled, None, &[P::I(0), P::I(1)]),
                node(Killed, None, &[P::O(2), P::I(3)]),
            ],
            Stalled,
            Some("host1"),
            Some(2),
        ),
        (
            "node 0 stopped by the group with no look since its last progress: no rank from places",
            vec![node(Killed, None, &[]), node(Stalled, None, &[P::O(1)])],
            Stalled,
            Some("host1"),
            None,
        ),
        (
            "node 1 stopped by the group, two ranks outside across the group: nobody",
            vec![
                node(Stalled, None, &[P::O(0), P::I(1)]),
                node(Killed, None, &[P::O(2), P::I(3)]),
            ],
            Stalled,
            Some("host0"),
            None,
        ),
        (
            "a node that failed is the cause, whatever the places say",
            vec![
                node(Failed, None, &[P::I(0)]),
                node(Stalled, None, &[P::O(1)]),
            ],
            Failed,
            Some("host0"),
            None,
        ),
    ];
    for (what, spec, verdict, node, rank) in cases {
        // Node 1 stalls first on the group's clock (a tie would go to node 0).
        let ns: Vec<N> = spec
            .iter()
            .enumerate()
            .map(|(i, (v, r, _))| {
                let at = if i == 1 { 60.0 } else { 61.0 };
                let echo = (*v == Failed).then_some(false);
                let stopped = *v == Killed;
                N(*v, echo, at, 0.0, stopped, *r)
            })
            .collect();
        let mut ends = nodes(&ns);
        for (e, (_, _, ps)) in ends.iter_mut().zip(&spec) {
            e.outcome.placed = placed(ps);
        }
        let o = group_verdict("grp-p", &ends, false);
        assert_eq!(
            (o.verdict, o.node.as_deref(), o.rank),
            (verdict, node, rank),
            "{what}: {}",
            o.reason
        );
        // A node that named the rank itself said why in its own reason (not in this table's).
        if let Some(r) = rank.filter(|_| spec.iter().all(|(_, own, _)| own.is_none())) {
            assert!(
                o.reason.contains(&format!("rank {r} ")) && o.reason.contains("sleeps"),
                "{what}: the reason gives the evidence: {}",
                o.reason
            );
        }
    }
}

#[test]
fn the_reason_names_the_rank_outside_and_its_peers_on_other_nodes() {
    let mut ends = nodes(&[
        N(Stalled, None, 60.0, 0.0, false, None),
        N(Stalled, None, 60.0, 0.0, false, None),
    ]);
    ends[0].outcome.placed = placed(&[P::I(0)]);
    ends[1].outcome.placed = placed(&[P::O(1)]);
    let o = group_verdict("grp-r", &ends, false);
    assert_eq!(
        o.reason,
        "node 1 (host1): node 1 said stalled; rank 1 is not inside a collective while its peers \
         on other nodes wait in one (rank 1 sleeps in hrtimer_nanosleep on node 1 (host1) while \
         rank 0 waits in futex_do_wait on node 0 (host0))"
    );
    // Two outside: said, and nobody named.
    ends[0].outcome.placed = placed(&[P::O(0)]);
    let o = group_verdict("grp-r", &ends, false);
    assert_eq!(o.rank, None);
    assert!(
        o.reason.ends_with(
            "; no rank is named: 2 ranks are outside a collective (rank 0 sleeps in \
             hrtimer_nanosleep on node 0 (host0), rank 1 sleeps in hrtimer_nanosleep on node 1 \
             (host1))"
        ),
        "{}",
        o.reason
    );
}
