//! The confirmation window ends on direct evidence (issue 28), on simulated time: once the ready
//! condition holds, a port, HTTP or request probe answered by the run's own listener is `ready`
//! at once; an answer whose owner was not checked, the sd_notify probe, a `--hold`, or no probe
//! at all leave the window (or the hold) to run its length, and a bind error inside it still wins.

use std::time::Duration;

use super::*;
use crate::classify::{ClassifierSpec, ReadyLine};
use crate::probe_outcome::ProbeOutcome;
use crate::profile::ProbeKind;
use crate::verdict::{Signature, Verdict};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

const BIND_ERROR: &str = "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use";

/// A watch with the ready line `READY`, the catalog, a 500ms window, and these probes.
fn config(probes: &[ProbeKind], hold: Option<u64>) -> JudgeConfig {
    let classifier = crate::test_classifier::classifier(&ClassifierSpec {
        signatures: crate::test_classifier::catalog().signatures.clone(),
        ready_lines: vec![ReadyLine::new("READY").unwrap()],
        ..Default::default()
    })
    .unwrap();
    let mut c = JudgeConfig::new(crate::mode::Mode::UntilReady, "/tmp/server.log", classifier);
    c.timeout = Some(ms(60_000));
    c.confirm = ms(500);
    c.hold = hold.map(ms);
    c.ready_probes = probes
        .iter()
        .map(|k| (*k, "127.0.0.1:8000".into()))
        .collect();
    c
}

/// One step of a script: a line, a probe's answer (`ours`: its listener is the run's), an exit.
#[derive(Clone, Copy)]
enum Step {
    Line(u64, &'static str),
    Up(u64, ProbeKind, bool),
    Exit(u64, i32),
}

/// Feeds `steps` without any tick (no time passes beyond the last step): the verdict, if one
/// came, and when the judge decided it (the time of the observation that decided it).
fn feed(c: JudgeConfig, steps: &[Step]) -> (Option<Judgement>, Option<u64>) {
    let mut j = Judge::new(c);
    j.observe(ms(0), Observation::Started { pid: 42 });
    let mut number = 0;
    for s in steps {
        let (at, obs) = match *s {
            Step::Line(at, text) => {
                number += 1;
                let text = text.to_string();
                (at, Observation::Line { number, text })
            }
            Step::Up(at, kind, ours) => {
                let outcome = ProbeOutcome::Up {
                    detail: "up".into(),
                    latency: ms(1),
                    ours,
                };
                (at, Observation::Probe { kind, outcome })
            }
            Step::Exit(at, code) => (
                at,
                Observation::Exited(Some(crate::verdict::ExitInfo::code(code))),
            ),
        };
        j.observe(ms(at), obs);
        if let Some(v) = j.verdict() {
            return (Some(v.clone()), Some(at));
        }
    }
    (j.verdict().cloned(), None)
}

#[test]
fn the_window_ends_at_once_only_on_the_runs_own_listener() {
    use ProbeKind::{Http, Notify, Port, Request};
    use Step::{Exit, Line, Up};
    // (name, probes, hold, steps, decided at (None: still waiting), verdict)
    let cases: Vec<(
        &str,
        Vec<ProbeKind>,
        Option<u64>,
        Vec<Step>,
        Option<u64>,
        Option<Verdict>,
    )> = vec![
        (
            "listening before the ready line: ready at the line",
            vec![Port],
            None,
            vec![Up(50, Port, true), Line(100, "READY")],
            Some(100),
            Some(Verdict::Ready),
        ),
        (
            "the ready line first, then the run's own listener: ready at its answer",
            vec![Port],
            None,
            vec![Up(50, Port, false), Line(100, "READY"), Up(300, Port, true)],
            Some(300),
            Some(Verdict::Ready),
        ),
        (
            "the HTTP probe answered by the run's listener",
            vec![Http],
            None,
            vec![Up(50, Http, true), Line(100, "READY")],
            Some(100),
            Some(Verdict::Ready),
        ),
        (
            "the request probe answered by the run's listener",
            vec![Http, Request],
            None,
            vec![
                Up(50, Http, false),
                Up(60, Request, true),
                Line(100, "READY"),
            ],
            Some(100),
            Some(Verdict::Ready),
        ),
        (
            "an answer whose owner was not checked: the window runs",
            vec![Http],
            None,
            vec![Up(50, Http, false), Line(100, "READY")],
            None,
            None,
        ),
        (
            "sd_notify alone is no listener: the window runs",
            vec![Notify],
            None,
            vec![Up(50, Notify, true), Line(100, "READY")],
            None,
            None,
        ),
        (
            "no probe (--no-probe): the window runs",
            vec![],
            None,
            vec![Line(100, "READY")],
            None,
            None,
        ),
        (
            "a hold runs its length, evidence or not",
            vec![Port],
            Some(1_000),
            vec![Up(50, Port, true), Line(100, "READY")],
            None,
            None,
        ),
        (
            "uvicorn's order with an unchecked answer: the bind error inside the window wins",
            vec![Http],
            None,
            vec![
                Up(50, Http, false),
                Line(100, "READY"),
                Line(102, BIND_ERROR),
                Exit(150, 1),
            ],
            Some(150),
            Some(Verdict::Failed),
        ),
    ];
    for (name, probes, hold, steps, decided_at, verdict) in cases {
        let (j, at) = feed(config(&probes, hold), &steps);
        assert_eq!(at, decided_at, "{name}: {j:?}");
        assert_eq!(j.as_ref().map(|j| j.verdict), verdict, "{name}: {j:?}");
        if let Some(j) = j.filter(|j| j.verdict == Verdict::Ready) {
            // Reported at the time the condition first held, as after a window.
            assert_eq!(j.ready_at, Some(ms(100)), "{name}");
            assert_eq!(j.at, ms(100), "{name}");
        }
        if verdict == Some(Verdict::Failed) {
            let j = feed(config(&probes, hold), &steps).0.unwrap();
            assert_eq!(j.signature, Some(Signature::PortInUse), "{name}");
        }
    }
}

/// Without direct evidence the window still decides: ready at the end of the window, reported at
/// the time the condition held (what the cases above leave waiting).
#[test]
fn without_evidence_the_window_still_ends_ready() {
    let mut j = Judge::new(config(&[ProbeKind::Http], None));
    j.observe(ms(0), Observation::Started { pid: 42 });
    let up = ProbeOutcome::Up {
        detail: "up".into(),
        latency: ms(1),
        ours: false,
    };
    let kind = ProbeKind::Http;
    j.observe(ms(50), Observation::Probe { kind, outcome: up });
    let line = Observation::Line {
        number: 1,
        text: "READY".into(),
    };
    j.observe(ms(100), line);
    assert!(j.verdict().is_none());
    assert_eq!(j.next_deadline(), Some(ms(600)));
    j.observe(ms(600), Observation::Tick);
    let v = j.verdict().expect("ready after the window");
    assert_eq!((v.verdict, v.at), (Verdict::Ready, ms(100)));
}
