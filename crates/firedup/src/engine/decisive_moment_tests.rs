//! The judge loop asks its source for a decisive moment's reading (issue 26, class 9: GPU memory
//! read while the process still holds it) on a line that names a failure, not on ordinary
//! lines, and not on an echo of another rank's failure. It asks for the readiness probes at once
//! on a ready line that came before the verdict (issue 28: the run's own listener, seen by the
//! next probe round, ends the confirmation window; that round should not wait for its timer).

use std::time::{Duration, Instant};

use super::{NoProgress, judge_loop};
use crate::judge::Observation;
use crate::plan::{WatchOptions, resolve};
use crate::source::{Seen, Source};
use crate::verdict::ExitInfo;

/// A source that hands out a script of observations, one per collection, and notes the decisive
/// moments it is told of (as the number of observations handed out by then).
struct Scripted {
    script: Vec<Observation>,
    handed: usize,
    moments: Vec<usize>,
    /// The ready lines it was told of, as `moments`.
    ready_lines: Vec<usize>,
    start: Instant,
}

impl Source for Scripted {
    fn collect(&mut self, out: &mut Vec<Seen>) {
        if let Some(o) = self.script.get(self.handed) {
            out.push(Seen::Obs(self.now(), o.clone()));
            self.handed += 1;
        }
    }
    fn wait(&mut self, _: Instant) {}
    fn now(&self) -> Duration {
        self.start.elapsed()
    }
    fn next_wake(&self) -> Instant {
        Instant::now()
    }
    fn decisive_moment(&mut self) {
        self.moments.push(self.handed);
    }
    fn ready_line_seen(&mut self) {
        self.ready_lines.push(self.handed);
    }
}

fn moments(lines: &[&str]) -> Vec<usize> {
    let opts = WatchOptions {
        until_exit: true,
        ..Default::default()
    };
    scripted(opts, lines).moments
}

/// The judge loop over `lines` between a start and an exit, judged by `opts`.
fn scripted(opts: WatchOptions, lines: &[&str]) -> Scripted {
    let log = "/nonexistent/x.log";
    let plan = resolve(&opts, &["python3".into()], log, true).expect("a plan");
    let mut script = vec![Observation::Started { pid: 1 }];
    for (i, l) in lines.iter().enumerate() {
        script.push(Observation::Line {
            number: i as u64 + 1,
            text: l.to_string(),
        });
    }
    script.push(Observation::Exited(Some(ExitInfo::code(1))));
    let mut source = Scripted {
        script,
        handed: 0,
        moments: Vec::new(),
        ready_lines: Vec::new(),
        start: Instant::now(),
    };
    judge_loop(&plan, log.as_ref(), &mut source, &mut NoProgress, None);
    source
}

#[test]
fn a_line_naming_a_failure_is_a_decisive_moment_and_others_are_not() {
    let cases: &[(&str, &[&str], Vec<usize>)] = &[
        (
            "ordinary lines",
            &["loading weights", "step 1 of 3"],
            vec![],
        ),
        (
            "a CUDA OOM line, after an ordinary one",
            &[
                "loading weights",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            ],
            vec![3],
        ),
        (
            "a peer's echo only",
            &[
                "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:42",
            ],
            vec![],
        ),
    ];
    for (name, lines, want) in cases {
        assert_eq!(&moments(lines), want, "{name}");
    }
}

#[test]
fn a_ready_line_before_the_verdict_asks_for_the_readiness_probes_at_once() {
    // The port is a readiness condition that no probe has met yet: the ready line alone does
    // not decide, and the probes are asked for at once; lines after a verdict ask for nothing.
    let opts = |port: Option<u16>| WatchOptions {
        ready_lines: vec!["fired up".into()],
        port,
        ..Default::default()
    };
    let cases: &[(&str, Option<u16>, &[&str], Vec<usize>)] = &[
        (
            "ordinary lines",
            Some(8000),
            &["loading weights", "step 1 of 3"],
            vec![],
        ),
        (
            "a ready line while the port is not seen up",
            Some(8000),
            &["loading weights", "server fired up"],
            vec![3],
        ),
        (
            "a ready line that decides at once (no probe, no window)",
            None,
            &["server fired up", "server fired up"],
            vec![],
        ),
    ];
    for (name, port, lines, want) in cases {
        let mut o = opts(*port);
        if port.is_none() {
            // No window either: the first ready line is the verdict.
            o.no_probe = true;
            o.hold = Some("0s".into());
        }
        assert_eq!(&scripted(o, lines).ready_lines, want, "{name}");
    }
}
