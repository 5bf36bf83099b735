//! Time the watcher did not see and lines stamped with when the log held them (issue 24, item 4),
//! on simulated time: a watcher paused longer than the stall window re-arms it instead of taking
//! its own absence for a silent server; a line stamped earlier than the last sign of life never
//! moves progress back; a phase line from before the watch began is timed where the log put it
//! while its budget counts from the watch. A process seen gone before its status is learned is
//! judged by that status when it comes, timed from when it was seen gone.

use std::time::Duration;

use super::*;
use crate::classify::{ClassifierSpec, ReadyLine};
use crate::verdict::Verdict;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn config() -> JudgeConfig {
    let classifier = crate::test_classifier::classifier(&ClassifierSpec {
        signatures: crate::test_classifier::catalog().signatures.clone(),
        fail_lines: vec![],
        ready_lines: vec![ReadyLine::new("READY").unwrap()],
        noise: vec![],
        phases: vec![("load_weights".into(), "Load weight begin".into())],
    })
    .unwrap();
    let mut c = JudgeConfig::new(crate::mode::Mode::UntilReady, "/tmp/server.log", classifier);
    c.stall = Some(ms(10_000));
    c.timeout = Some(ms(600_000));
    c
}

fn line(j: &mut Judge, at: u64, number: u64, text: &str) {
    j.observe(
        ms(at),
        Observation::Line {
            number,
            text: text.into(),
        },
    );
}

fn usage(j: &mut Judge, at: u64, cpu_ticks: u64) {
    j.observe(
        ms(at),
        Observation::Usage {
            cpu_ticks,
            read_bytes: 0,
        },
    );
}

#[test]
fn a_watcher_paused_past_the_stall_window_re_arms_it_and_reads_what_came_meanwhile() {
    // (the watcher says it was paused, verdict right after the pause)
    for (resumed, after_pause) in [(false, Some(Verdict::Stalled)), (true, None)] {
        let mut j = Judge::new(config());
        j.watch_began(ms(0));
        j.observe(ms(0), Observation::Started { pid: 7 });
        usage(&mut j, 0, 0);
        line(&mut j, 1_000, 1, "[10:00:01] waiting for engine");
        usage(&mut j, 1_000, 100);
        // Paused from 1 s to 30 s while the server worked (CPU) and repeated its heartbeat.
        if resumed {
            j.watch_resumed(ms(30_000));
        }
        line(&mut j, 30_000, 2, "[10:00:29] waiting for engine");
        usage(&mut j, 30_000, 2_900);
        assert_eq!(
            j.verdict().map(|v| v.verdict),
            after_pause,
            "resumed: {resumed}"
        );
        if resumed {
            // The window counts again from the resume (and the CPU use seen then): a server
            // silent from then on is stalled a window later, not before.
            j.observe(ms(39_999), Observation::Tick);
            assert!(j.verdict().is_none());
            j.observe(ms(40_000), Observation::Tick);
            assert_eq!(j.verdict().map(|v| v.verdict), Some(Verdict::Stalled));
        }
    }
}

#[test]
fn a_line_stamped_before_the_last_sign_of_life_does_not_move_progress_back() {
    let mut j = Judge::new(config());
    j.watch_began(ms(0));
    j.observe(ms(0), Observation::Started { pid: 7 });
    line(&mut j, 5_000, 1, "loading the tokenizer");
    // Read later, stamped with when the log was known to hold it.
    line(&mut j, 1_000, 2, "loading the config");
    j.observe(ms(14_999), Observation::Tick);
    assert!(j.verdict().is_none(), "{:?}", j.verdict());
    j.observe(ms(15_000), Observation::Tick);
    assert_eq!(j.verdict().map(|v| v.verdict), Some(Verdict::Stalled));
}

#[test]
fn a_phase_from_before_a_late_attach_is_timed_by_the_log_and_budgeted_from_the_attach() {
    let mut c = config();
    c.phase_budgets = vec![("load_weights".into(), ms(20_000))];
    c.stall = None;
    let mut j = Judge::new(c);
    j.watch_began(ms(100_000));
    j.observe(ms(100_000), Observation::Started { pid: 7 });
    // The log held it since 50 s (its stamp); the watch began at 100 s.
    line(&mut j, 50_000, 1, "Load weight begin");
    j.observe(ms(119_999), Observation::Tick);
    assert!(j.verdict().is_none(), "{:?}", j.verdict());
    line(&mut j, 60_000, 2, "READY");
    j.observe(ms(121_000), Observation::Tick);
    let v = j.verdict().cloned().expect("a verdict");
    assert_eq!(v.verdict, Verdict::Ready, "{}", v.reason);
    // Ready when the log said so, not when the watch read it.
    assert_eq!(v.ready_at, Some(ms(60_000)), "{}", v.reason);
}

#[test]
fn a_process_seen_gone_is_judged_by_its_late_status_timed_from_when_it_went() {
    // (hold, mode, the exit's status, its reason contains)
    let cases: &[(Option<u64>, crate::mode::Mode, i32, &str)] = &[
        (
            Some(5_000),
            crate::mode::Mode::UntilReady,
            3,
            "exit code 3 100ms after becoming ready",
        ),
        (
            None,
            crate::mode::Mode::UntilExit,
            0,
            "the job exited 0 after 1.1s",
        ),
        (
            None,
            crate::mode::Mode::UntilExit,
            2,
            "exited with exit code 2, and no known",
        ),
    ];
    for (hold, mode, code, want) in cases {
        let mut c = config();
        c.hold = hold.map(ms);
        c.mode = *mode;
        let mut j = Judge::new(c);
        j.watch_began(ms(0));
        j.observe(ms(0), Observation::Started { pid: 7 });
        line(&mut j, 1_000, 1, "READY");
        j.observe(ms(1_100), Observation::Gone);
        // Its supervisor's record comes 9 s later; meanwhile no deadline runs.
        assert_eq!(j.next_deadline(), None, "{want}");
        j.observe(ms(7_000), Observation::Tick);
        assert!(j.verdict().is_none(), "{want}: {:?}", j.verdict());
        j.observe(
            ms(10_000),
            Observation::Exited(Some(crate::verdict::ExitInfo::code(*code))),
        );
        let v = j.verdict().cloned().expect("a verdict");
        assert!(v.reason.contains(want), "{want}: {}", v.reason);
        assert_ne!(v.verdict, Verdict::Ready, "{want}");
    }
}

/// What a multi-node group waits for (issue 27): the earliest failure evidence that is no echo,
/// while there is no verdict; an echo, a plain line or a decided watch holds none.
#[test]
fn the_pending_cause_is_the_earliest_evidence_that_is_no_echo() {
    let echo = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:10895";
    let oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB";
    // (lines at ms, pending cause expected before the settle window ends)
    let cases: Vec<(Vec<(u64, &str)>, Option<u64>)> = vec![
        (vec![(1_000, "loading weights")], None),
        (vec![(1_000, echo)], None),
        (vec![(1_000, "loading weights"), (2_000, oom)], Some(2_000)),
        (vec![(1_000, echo), (2_500, oom)], Some(2_500)),
    ];
    for (lines, expected) in cases {
        let mut j = Judge::new(config());
        j.watch_began(ms(0));
        j.observe(ms(0), Observation::Started { pid: 7 });
        for (i, (at, text)) in lines.iter().enumerate() {
            line(&mut j, *at, i as u64 + 1, text);
        }
        assert_eq!(j.pending_cause(), expected.map(ms), "{lines:?}");
        // Once decided (the settle window ended), nothing is pending any more.
        j.observe(ms(60_000), Observation::Tick);
        if expected.is_some() {
            assert!(j.verdict().is_some(), "{lines:?}");
            assert_eq!(j.pending_cause(), None, "{lines:?}");
        }
    }
}
