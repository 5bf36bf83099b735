//! The judge loop asks its source for a decisive moment's reading (issue 26, class 9: GPU memory
//! read while the process still holds it) on a line that names a failure, not on ordinary
//! lines, and not on an echo of another rank's failure.

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
}

fn moments(lines: &[&str]) -> Vec<usize> {
    let opts = WatchOptions {
        until_exit: true,
        ..Default::default()
    };
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
        start: Instant::now(),
    };
    judge_loop(&plan, log.as_ref(), &mut source, &mut NoProgress, None);
    source.moments
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
