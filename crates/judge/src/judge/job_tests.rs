//! A batch scheduler's job on simulated time: the queue (its phase, its deadline, the reasons
//! that can never clear), the windows that start when the job runs, each end state's verdict
//! through the exit rules, and a requeue. Each case is a script of snapshots and log lines.

use std::time::Duration;

use super::*;
use crate::classify::{Classifier, ClassifierSpec, ReadyLine, builtin_catalog};
use crate::job::{JobSnapshot, JobSummary};
use crate::verdict::{ExitInfo, Signature, Verdict};

const LOG: &str = "/scratch/logs/slurm-42.out";

fn classifier() -> Classifier {
    Classifier::new(&ClassifierSpec {
        signatures: builtin_catalog().signatures,
        ready_lines: vec![ReadyLine::new("READY").unwrap()],
        ..Default::default()
    })
    .unwrap()
}

/// Stall 10 s, timeout 60 s, log grace 5 s, no queue timeout, no process to watch.
fn cfg(mode: Mode) -> JudgeConfig {
    let mut c = JudgeConfig::new(mode, LOG, classifier());
    c.stall = Some(s(10));
    c.timeout = Some(s(60));
    c.log_grace = s(5);
    c.expect_process = false;
    c
}

fn s(v: u64) -> Duration {
    Duration::from_secs(v)
}

/// A snapshot of job 42 in `state`.
fn job(state: &str) -> JobSnapshot {
    JobSnapshot {
        scheduler: "slurm".into(),
        id: "42".into(),
        state: state.into(),
        ..JobSnapshot::default()
    }
}

fn pending(reason: &str, position: Option<u32>) -> JobSnapshot {
    JobSnapshot {
        reason: Some(reason.into()),
        queue_position: position,
        ..job("PENDING")
    }
}

fn running() -> JobSnapshot {
    JobSnapshot {
        nodes: vec!["node07".into()],
        ..job("RUNNING")
    }
}

fn ended(state: &str, exit: &str) -> JobSnapshot {
    JobSnapshot {
        nodes: vec!["node07".into()],
        exit: crate::job::exit_from_slurm(exit),
        ..job(state)
    }
}

fn restarted(mut j: JobSnapshot, restarts: u32) -> JobSnapshot {
    j.restarts = restarts;
    j
}

#[derive(Debug, Clone)]
enum Step {
    Job(u64, JobSnapshot),
    Line(u64, &'static str),
    Tick(u64),
}
use Step::{Job, Line, Tick};

/// Runs a script (times in seconds), ticking at every deadline the judge asks for, as the shell
/// does; returns the judge (with its verdict, if one came) and every event.
fn run(config: JudgeConfig, steps: &[Step]) -> (Judge, Vec<Event>) {
    let mut j = Judge::new(config);
    let mut events = Vec::new();
    let mut number = 0;
    let mut feed = |j: &mut Judge, at: u64, obs: Observation| {
        while let Some(d) = j.next_deadline() {
            if d > s(at) || j.verdict().is_some() {
                break;
            }
            events.extend(j.observe(d, Observation::Tick));
        }
        events.extend(j.observe(s(at), obs));
    };
    for step in steps {
        if j.verdict().is_some() {
            break;
        }
        match step.clone() {
            Job(at, snap) => feed(&mut j, at, Observation::Job(snap)),
            Line(at, text) => {
                number += 1;
                let text = text.to_string();
                feed(&mut j, at, Observation::Line { number, text });
            }
            Tick(at) => feed(&mut j, at, Observation::Tick),
        }
    }
    (j, events)
}

/// What a case must end with.
struct Want {
    verdict: Verdict,
    signature: Option<Signature>,
    at: u64,
    /// Words the reason must hold.
    reason: &'static [&'static str],
    /// Words the reason must not hold.
    not_reason: &'static [&'static str],
    /// Words the decisive line must hold ("" when there must be none).
    line: Option<&'static str>,
    exit: Option<ExitInfo>,
    rank: Option<u32>,
}

fn want(verdict: Verdict, signature: Option<Signature>, at: u64) -> Want {
    Want {
        verdict,
        signature,
        at,
        reason: &[],
        not_reason: &[],
        line: None,
        exit: None,
        rank: None,
    }
}

impl Want {
    fn reason(mut self, words: &'static [&'static str]) -> Want {
        self.reason = words;
        self
    }
    fn not_reason(mut self, words: &'static [&'static str]) -> Want {
        self.not_reason = words;
        self
    }
    fn line(mut self, text: &'static str) -> Want {
        self.line = Some(text);
        self
    }
    fn exit(mut self, slurm: &str) -> Want {
        self.exit = crate::job::exit_from_slurm(slurm);
        self
    }
    fn rank(mut self, rank: u32) -> Want {
        self.rank = Some(rank);
        self
    }
}

/// Checks every case; reports all that fail at once.
fn check(cases: Vec<(&str, JudgeConfig, Vec<Step>, Want)>) {
    let mut failures = Vec::new();
    for (name, config, steps, w) in cases {
        let (j, _) = run(config, &steps);
        let Some(v) = j.verdict() else {
            failures.push(format!("{name}: no verdict"));
            continue;
        };
        let mut wrong = Vec::new();
        if (v.verdict, v.signature, v.at) != (w.verdict, w.signature, s(w.at)) {
            wrong.push(format!(
                "got {:?} {:?} at {:?}, want {:?} {:?} at {}s",
                v.verdict, v.signature, v.at, w.verdict, w.signature, w.at
            ));
        }
        for word in w.reason {
            if !v.reason.contains(word) {
                wrong.push(format!("reason lacks {word:?}"));
            }
        }
        for word in w.not_reason {
            if v.reason.contains(word) {
                wrong.push(format!("reason holds {word:?}"));
            }
        }
        match (w.line, &v.line) {
            (Some(""), Some(l)) => wrong.push(format!("a decisive line: {:?}", l.text)),
            (Some(t), None) if !t.is_empty() => wrong.push(format!("no decisive line, want {t:?}")),
            (Some(t), Some(l)) if !l.text.contains(t) => {
                wrong.push(format!("decisive line {:?}, want {t:?}", l.text))
            }
            _ => {}
        }
        if w.exit.is_some() && v.exit != w.exit {
            wrong.push(format!("exit {:?}, want {:?}", v.exit, w.exit));
        }
        if w.rank.is_some() && v.rank != w.rank {
            wrong.push(format!("rank {:?}, want {:?}", v.rank, w.rank));
        }
        if !wrong.is_empty() {
            failures.push(format!(
                "{name}: {} (reason: {})",
                wrong.join("; "),
                v.reason
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// [`cfg`] without a stall window: a quiet job waits for its end.
fn quiet(mode: Mode) -> JudgeConfig {
    let mut c = cfg(mode);
    c.stall = None;
    c
}

fn with_queue_timeout(mut c: JudgeConfig, secs: u64) -> JudgeConfig {
    c.queue_timeout = Some(s(secs));
    c
}

fn with_hold(mut c: JudgeConfig, secs: u64) -> JudgeConfig {
    c.hold = Some(s(secs));
    c
}

const OOM_LINE: &str = "slurmstepd-vm: error: Detected 1 oom-kill event(s) in StepId=42.batch. Some of your processes may have been killed by the cgroup out-of-memory handler.";
const TIME_LIMIT_LINE: &str = "slurmstepd: error: *** JOB 42 ON node07 CANCELLED AT 2026-12-03T20:59:01 DUE TO TIME LIMIT ***";
const CANCEL_LINE: &str =
    "slurmstepd: error: *** JOB 42 ON node07 CANCELLED AT 2026-12-03T20:59:01 ***";

#[test]
fn the_queue_counts_toward_no_window_and_its_own_deadline_bounds_it() {
    use Mode::{UntilExit, UntilReady};
    use Verdict::*;
    check(vec![
        (
            "queued far longer than the stall, timeout and log grace, then ready",
            cfg(UntilReady),
            vec![
                Job(0, pending("Priority", Some(3))),
                Job(150, pending("Resources", Some(1))),
                Job(300, running()),
                Line(305, "loading"),
                Line(310, "READY"),
            ],
            want(Ready, None, 310).reason(&["Slurm job 42 RUNNING on node07"]),
        ),
        (
            "--queue-timeout: still pending, the state and reason named",
            with_queue_timeout(cfg(UntilReady), 120),
            vec![
                Job(0, pending("Priority", Some(3))),
                Job(60, pending("Priority", Some(2))),
                Tick(500),
            ],
            want(TimedOut, None, 120).reason(&[
                "timed out in the queue: still PENDING (Priority, 2nd in the queue) after 2m",
            ]),
        ),
        (
            "--queue-timeout bounds the wait, not the run",
            with_queue_timeout(cfg(UntilExit), 120),
            vec![
                Job(0, pending("Priority", None)),
                Job(100, running()),
                Line(105, "loading the data"),
                Line(112, "building the model"),
                Line(119, "training"),
                Line(126, "evaluating"),
                Line(133, "saving"),
                Job(140, ended("COMPLETED", "0:0")),
            ],
            want(Succeeded, None, 140).exit("0:0"),
        ),
        (
            "the stall window starts when the job runs",
            cfg(UntilExit),
            vec![
                Job(0, pending("Resources", None)),
                Job(100, running()),
                Tick(500),
            ],
            want(Stalled, None, 110),
        ),
        (
            "the start deadline starts when the job runs",
            cfg(UntilReady),
            vec![
                Job(0, pending("Resources", None)),
                Job(100, running()),
                Line(108, "a"),
                Line(116, "b"),
                Line(124, "c"),
                Line(132, "d"),
                Line(140, "e"),
                Line(148, "f"),
                Line(156, "g"),
                Tick(500),
            ],
            want(TimedOut, None, 160),
        ),
        (
            "a reason that can never clear: never_started at once",
            with_queue_timeout(cfg(UntilReady), 600),
            vec![
                Job(0, pending("Priority", Some(1))),
                Job(20, pending("DependencyNeverSatisfied", None)),
                Tick(500),
            ],
            want(NeverStarted, None, 20).reason(&[
                "never started: the scheduler will never start it (DependencyNeverSatisfied: ",
                "(Slurm job 42 PENDING)",
            ]),
        ),
        (
            "more nodes than the partition has",
            cfg(UntilExit),
            vec![Job(1, pending("PartitionNodeLimit", None))],
            want(NeverStarted, None, 1).reason(&["PartitionNodeLimit: the number of nodes"]),
        ),
        (
            "a per-job limit of the QOS",
            cfg(UntilExit),
            vec![Job(1, pending("QOSMaxWallDurationPerJobLimit", None))],
            want(NeverStarted, None, 1).reason(&["its QOS allows one job"]),
        ),
        (
            "a pending reason that can clear waits (ReqNodeNotAvail may be temporary)",
            with_queue_timeout(cfg(UntilExit), 300),
            vec![
                Job(0, pending("ReqNodeNotAvail, UnavailableNodes:node07", None)),
                Job(100, pending("JobHeldUser", None)),
                Job(200, pending("BeginTime", None)),
                Tick(1000),
            ],
            want(TimedOut, None, 300).reason(&["still PENDING (BeginTime)"]),
        ),
        (
            "held after a requeue counts as queued",
            with_queue_timeout(cfg(UntilExit), 30),
            vec![
                Job(
                    0,
                    JobSnapshot {
                        reason: Some("JobHeldUser".into()),
                        ..job("REQUEUE_HOLD")
                    },
                ),
                Tick(100),
            ],
            want(TimedOut, None, 30)
                .reason(&["still REQUEUE_HOLD (requeued and held, JobHeldUser)"]),
        ),
        (
            "the job ended for a reason that could never clear before it ever ran",
            cfg(UntilExit),
            vec![Job(
                3,
                JobSnapshot {
                    reason: Some("DependencyNeverSatisfied".into()),
                    ..job("CANCELLED")
                },
            )],
            want(NeverStarted, None, 3).reason(&["without starting it (DependencyNeverSatisfied"]),
        ),
    ]);
}

#[test]
fn while_queued_the_only_deadline_is_the_queue_timeout() {
    let mut j = Judge::new(cfg(Mode::UntilReady));
    j.observe(s(0), Observation::Job(pending("Priority", Some(3))));
    assert_eq!(j.next_deadline(), None, "stall, timeout and log grace wait");
    let mut j = Judge::new(with_queue_timeout(cfg(Mode::UntilReady), 90));
    j.observe(s(5), Observation::Job(pending("Priority", Some(3))));
    assert_eq!(j.next_deadline(), Some(s(95)));
    let status = j.status(s(6));
    assert_eq!(status.phase.as_deref(), Some("queued"));
    assert_eq!(
        status.job.as_deref(),
        Some("queued: Priority, 3rd in the queue")
    );
    j.observe(s(40), Observation::Job(running()));
    assert_eq!(
        j.next_deadline(),
        Some(s(50)),
        "the stall window from the start"
    );
    let status = j.status(s(41));
    assert_eq!(status.job.as_deref(), Some("running on node07"));
    assert!(status.process_alive);
}

#[test]
fn the_queue_and_the_start_are_phases_and_notes() {
    let (j, events) = run(
        cfg(Mode::UntilReady),
        &[
            Job(0, pending("Priority", Some(3))),
            Job(10, pending("Priority", Some(2))),
            Job(20, pending("Resources", Some(1))),
            Job(30, running()),
            Line(31, "READY"),
        ],
    );
    let v = j.verdict().expect("ready");
    let timeline: Vec<(&str, f64)> = v
        .timeline
        .iter()
        .map(|p| (p.phase.as_str(), p.at_s))
        .collect();
    assert_eq!(
        timeline,
        [("queued", 0.0), ("running", 30.0), ("ready", 31.0)]
    );
    let notes: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::Job { note, .. } => Some(note.as_str()),
            _ => None,
        })
        .collect();
    // A new place in the queue is shown in the status, not said again.
    assert_eq!(
        notes,
        [
            "queued: Priority, 3rd in the queue",
            "queued: Resources, 1st in the queue",
            "running on node07 after 30.0s in the queue",
        ]
    );
    assert_eq!(
        v.job,
        Some(JobSummary {
            scheduler: "slurm".into(),
            id: "42".into(),
            state: "RUNNING".into(),
            nodes: vec!["node07".into()],
            reason: None,
        })
    );
}

#[test]
fn each_end_state_is_judged_through_the_exit_rules() {
    use Mode::{UntilExit, UntilReady};
    use Verdict::*;
    let cancelled_by_firedup = JobSnapshot {
        cancel_requested: true,
        ..ended("CANCELLED", "0:15")
    };
    check(vec![
        (
            "COMPLETED is a job's exit 0",
            quiet(UntilExit),
            vec![Job(0, running()), Line(1, "done"), Job(2, ended("COMPLETED", "0:0"))],
            want(Succeeded, None, 2).exit("0:0").reason(&["Slurm job 42 COMPLETED on node07, ExitCode 0:0"]),
        ),
        (
            "COMPLETED, but the log printed a fatal cause: the cause wins",
            quiet(UntilExit),
            vec![
                Job(0, running()),
                Line(1, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"),
                Job(1, ended("COMPLETED", "0:0")),
            ],
            want(Failed, Some(Signature::CudaOom), 1).exit("0:0"),
        ),
        (
            "COMPLETED before ready: a server that exited",
            quiet(UntilReady),
            vec![Job(0, running()), Line(1, "bye"), Job(2, ended("COMPLETED", "0:0"))],
            want(Exited, None, 2).reason(&["exited 0", "before it was ready"]),
        ),
        (
            "FAILED with an exit code and nothing printed",
            quiet(UntilExit),
            vec![Job(0, running()), Line(1, "working"), Job(2, ended("FAILED", "3:0"))],
            want(Exited, None, 2).exit("3:0").reason(&["exit code 3", "ExitCode 3:0"]),
        ),
        (
            "FAILED after a traceback: the log's cause",
            quiet(UntilExit),
            vec![
                Job(0, running()),
                Line(1, "Traceback (most recent call last):"),
                Line(1, "  File \"train.py\", line 3, in <module>"),
                Line(1, "KeyError: 'lr'"),
                Job(2, ended("FAILED", "1:0")),
            ],
            want(Failed, Some(Signature::PythonException), 2)
                .line("KeyError: 'lr'")
                .exit("1:0"),
        ),
        (
            "FAILED by a signal",
            quiet(UntilExit),
            vec![Job(0, running()), Job(2, ended("FAILED", "0:11"))],
            want(Killed, Some(Signature::Segfault), 2).exit("0:11"),
        ),
        (
            "ExitCode 0:53 and no log: the --output directory",
            quiet(UntilExit),
            vec![Job(0, running()), Job(1, ended("FAILED", "0:53"))],
            want(NeverStarted, None, 1).line("").reason(&[
                "never started: the job ended before writing its log (Slurm exit 0:53): its --output directory probably does not exist (/scratch/logs, for the log /scratch/logs/slurm-42.out)",
            ]),
        ),
        (
            "srun: the failing task and its code, not srun's 143",
            quiet(UntilExit),
            vec![
                Job(0, running()),
                Line(1, "srun: error: node07: task 1: Exited with exit code 7"),
                Line(1, "srun: launch/slurm: _step_signal: Terminating StepId=42.0"),
                Line(1, "srun: error: node07: tasks 0,2-3: Terminated"),
                Job(2, ended("FAILED", "143:0")),
            ],
            want(Failed, Some(Signature::RankExited), 2).rank(1).exit("7:0"),
        ),
        (
            "OUT_OF_MEMORY: the scheduler's OOM kill, its decisive line slurmstepd's",
            quiet(UntilExit),
            vec![
                Job(0, running()),
                Line(1, "allocating"),
                Line(2, "/var/spool/slurmd/job42/slurm_script: line 3: 4242 Killed python3 eat.py"),
                Line(2, OOM_LINE),
                Job(3, ended("OUT_OF_MEMORY", "0:125")),
            ],
            want(Killed, Some(Signature::OomKilled), 3)
                .line("Detected 1 oom-kill event(s)")
                .exit("0:125")
                .reason(&["OUT_OF_MEMORY", "ExitCode 0:125"]),
        ),
        (
            "OUT_OF_MEMORY with nothing in the log",
            quiet(UntilExit),
            vec![Job(0, running()), Job(3, ended("OUT_OF_MEMORY", "0:125"))],
            want(Killed, Some(Signature::OomKilled), 3).exit("0:125"),
        ),
        (
            "OUT_OF_MEMORY in an srun task: the task named",
            quiet(UntilExit),
            vec![
                Job(0, running()),
                Line(2, "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=42.0. Some of your processes may have been killed by the cgroup out-of-memory handler."),
                Line(2, "srun: error: node07: task 1: Out Of Memory"),
                Job(3, ended("OUT_OF_MEMORY", "0:125")),
            ],
            want(Killed, Some(Signature::OomKilled), 3).rank(1),
        ),
        (
            "OUT_OF_MEMORY after Python's MemoryError: the printed cause",
            quiet(UntilExit),
            vec![
                Job(0, running()),
                Line(1, "Traceback (most recent call last):"),
                Line(1, "MemoryError"),
                Line(2, OOM_LINE),
                Job(2, ended("OUT_OF_MEMORY", "0:125")),
            ],
            want(Failed, Some(Signature::HostOom), 2).exit("0:125"),
        ),
        (
            "TIMEOUT: the time limit, its decisive line slurmstepd's",
            quiet(UntilExit),
            vec![
                Job(0, running()),
                Line(10, "epoch 3"),
                Line(40, TIME_LIMIT_LINE),
                Job(41, ended("TIMEOUT", "0:15")),
            ],
            want(Killed, Some(Signature::TimeLimit), 41)
                .line("DUE TO TIME LIMIT")
                .exit("0:15")
                .reason(&["killed: the scheduler ended the job at its time limit"]),
        ),
        (
            "TIMEOUT: a traceback after the scheduler's line is its consequence",
            quiet(UntilExit),
            vec![
                Job(0, running()),
                Line(40, TIME_LIMIT_LINE),
                Line(40, "Traceback (most recent call last):"),
                Line(40, "KeyboardInterrupt"),
                Line(40, "RuntimeError: interrupted"),
                Job(41, ended("TIMEOUT", "0:15")),
            ],
            want(Killed, Some(Signature::TimeLimit), 41).line("DUE TO TIME LIMIT"),
        ),
        (
            "TIMEOUT after a cause was printed: the cause, then the time limit",
            quiet(UntilExit),
            vec![
                Job(0, running()),
                Line(10, "Traceback (most recent call last):"),
                Line(10, "ValueError: bad shard"),
                Line(40, TIME_LIMIT_LINE),
                Job(41, ended("TIMEOUT", "0:15")),
            ],
            want(Failed, Some(Signature::PythonException), 41)
                .line("ValueError: bad shard")
                .reason(&["then the scheduler ended the job at its time limit"]),
        ),
        (
            "DEADLINE is a time limit",
            quiet(UntilExit),
            vec![Job(0, running()), Job(9, ended("DEADLINE", "0:15"))],
            want(Killed, Some(Signature::TimeLimit), 9),
        ),
        (
            "NODE_FAIL",
            quiet(UntilExit),
            vec![
                Job(0, running()),
                Line(5, "slurmstepd: error: *** JOB 42 ON node07 CANCELLED AT 2026-12-03T20:59:01 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***"),
                Job(6, ended("NODE_FAIL", "0:0")),
            ],
            want(Killed, Some(Signature::NodeFail), 6).line("DUE TO NODE FAILURE"),
        ),
        (
            "BOOT_FAIL is the node's failure",
            quiet(UntilExit),
            vec![Job(0, pending("Resources", None)), Job(6, ended("BOOT_FAIL", "0:0"))],
            want(Killed, Some(Signature::NodeFail), 6),
        ),
        (
            "PREEMPTED",
            quiet(UntilExit),
            vec![
                Job(0, running()),
                Line(5, "slurmstepd: error: *** JOB 42 ON node07 CANCELLED AT 2026-12-03T20:59:01 DUE TO PREEMPTION ***"),
                Job(6, ended("PREEMPTED", "0:15")),
            ],
            want(Killed, Some(Signature::Preempted), 6).line("DUE TO PREEMPTION"),
        ),
        (
            "CANCELLED by someone else",
            quiet(UntilExit),
            vec![Job(0, running()), Line(5, CANCEL_LINE), Job(6, ended("CANCELLED", "0:15"))],
            want(Killed, Some(Signature::Cancelled), 6)
                .line(CANCEL_LINE)
                .reason(&["someone else cancelled the job"]),
        ),
        (
            "CANCELLED while still queued",
            quiet(UntilExit),
            vec![
                Job(0, pending("Priority", None)),
                Job(6, JobSnapshot { nodes: vec![], ..ended("CANCELLED", "0:0") }),
            ],
            want(Killed, Some(Signature::Cancelled), 6).reason(&["while it was still queued"]),
        ),
        (
            "CANCELLED after it ran between two polls: its nodes show it ran",
            quiet(UntilExit),
            vec![Job(0, pending("Priority", None)), Job(6, ended("CANCELLED", "0:15"))],
            want(Killed, Some(Signature::Cancelled), 6)
                .reason(&["someone else cancelled the job"])
                .not_reason(&["queued"]),
        ),
        (
            "CANCELLED by firedup: as a local process firedup stopped with SIGTERM",
            quiet(UntilReady),
            vec![
                Job(0, running()),
                Line(5, CANCEL_LINE),
                Job(6, cancelled_by_firedup),
            ],
            want(Killed, Some(Signature::Terminated), 6)
                .line(CANCEL_LINE)
                .reason(&["firedup cancelled the job (scancel)"]),
        ),
        (
            "ready under --hold, then the time limit: a crash inside the hold",
            with_hold(quiet(UntilReady), 30),
            vec![
                Job(0, running()),
                Line(5, "READY"),
                Line(9, TIME_LIMIT_LINE),
                Job(10, ended("TIMEOUT", "0:15")),
            ],
            want(Killed, Some(Signature::TimeLimit), 10).reason(&["the scheduler ended the job at its time limit 5.0s after becoming ready: ask for more time"]),
        ),
    ]);
}

#[test]
fn a_requeued_job_is_judged_on_and_says_so() {
    use Mode::{UntilExit, UntilReady};
    use Verdict::*;
    check(vec![
        (
            "requeued before ready: back to the queue, then ready",
            quiet(UntilReady),
            vec![
                Job(0, pending("Priority", None)),
                Job(10, running()),
                Line(12, "loading"),
                Job(15, restarted(job("REQUEUED"), 1)),
                Job(16, restarted(pending("BeginTime", None), 1)),
                // 100 s in the queue: neither the stall nor the timeout runs.
                Job(116, restarted(running(), 1)),
                Line(120, "READY"),
            ],
            want(Ready, None, 120).reason(&["requeued once"]),
        ),
        (
            "what the attempt before printed is not this attempt's cause",
            quiet(UntilExit),
            vec![
                Job(0, running()),
                Line(1, "Traceback (most recent call last):"),
                Line(1, "ValueError: node07 flaky"),
                Job(2, restarted(pending("BeginTime", None), 1)),
                Job(3, restarted(running(), 1)),
                Line(4, "retrying"),
                Job(5, restarted(ended("FAILED", "2:0"), 1)),
            ],
            want(Exited, None, 5).exit("2:0").reason(&["requeued once"]),
        ),
        (
            "requeued straight back to running (the queue not seen)",
            quiet(UntilExit),
            vec![
                Job(0, running()),
                Line(1, "a"),
                Job(50, restarted(running(), 2)),
                Line(55, "b"),
                Job(58, restarted(ended("COMPLETED", "0:0"), 2)),
            ],
            want(Succeeded, None, 58).reason(&["requeued twice"]),
        ),
        (
            "requeued while a fatal line settles: that failure is the verdict",
            {
                let mut c = cfg(UntilExit);
                c.fail_settle = s(2);
                c
            },
            vec![
                Job(0, running()),
                Line(
                    1,
                    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                ),
                Job(2, restarted(pending("BeginTime", None), 1)),
                Tick(100),
            ],
            want(Failed, Some(Signature::CudaOom), 3).reason(&["requeued once"]),
        ),
        (
            "suspended and resumed: a wait, not a requeue",
            cfg(UntilExit),
            vec![
                Job(0, running()),
                Line(1, "training"),
                Job(5, job("SUSPENDED")),
                // 100 s suspended: the stall window waits.
                Job(105, running()),
                Line(106, "resumed training"),
                Job(108, ended("COMPLETED", "0:0")),
            ],
            want(Succeeded, None, 108)
                .reason(&["(Slurm job 42 COMPLETED on node07, ExitCode 0:0)"]),
        ),
        (
            "requeued inside the hold: the ready server went away",
            with_hold(quiet(UntilReady), 60),
            vec![
                Job(0, running()),
                Line(5, "READY"),
                Job(20, restarted(pending("BeginTime", None), 1)),
            ],
            want(Killed, None, 20)
                .reason(&["the scheduler requeued the job 15.0s after becoming ready"]),
        ),
    ]);
}
