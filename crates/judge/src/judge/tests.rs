//! Judge tests on simulated time: each case is a script of timestamped observations and the verdict,
//! signature and time it must end with. No clocks, no sleeps.

use super::*;
use crate::classify::{Classifier, ClassifierSpec, ReadyLine};
use crate::probe_outcome::ProbeOutcome;
use crate::profile::ProbeKind;
use crate::verdict::{ExitInfo, Signature, Verdict};

/// The classifier of the scripts: the catalog, a `--fail-line`, the ready line `READY`, noise and
/// two phases.
fn classifier() -> Classifier {
    classifier_with(&["READY"])
}

/// [`classifier`] with other ready lines (none: readiness by probes alone).
fn classifier_with(ready_lines: &[&str]) -> Classifier {
    crate::test_classifier::classifier(&ClassifierSpec {
        signatures: crate::test_classifier::catalog().signatures.clone(),
        fail_lines: vec!["USER-FATAL".into()],
        ready_lines: ready_lines
            .iter()
            .map(|r| ReadyLine::new(r).unwrap())
            .collect(),
        noise: vec!["^DEBUG".into()],
        phases: vec![
            ("load_weights".into(), "Load weight begin".into()),
            (
                "capture_cuda_graph".into(),
                "Capture cuda graph begin".into(),
            ),
        ],
    })
    .unwrap()
}

#[derive(Debug, Clone)]
enum Step {
    Line(u64, &'static str),
    Exit(u64, Option<ExitInfo>),
    Started(u64),
    SpawnFailed(u64),
    Usage(u64, u64, u64),
    Oom(u64),
    Log(u64, LogState),
    Tick(u64),
    /// A probe result: 'u' up, 'n' not yet, 'x' foreign (someone else's port), 'r' rejected (an
    /// HTTP answer refusing the probe), 'f' fault.
    Probe(u64, ProbeKind, char),
    /// An sd_notify datagram.
    Notify(u64, &'static str),
    Gpu(u64, u64),
    /// firedup's own stop began (`stop.json` read before the exit).
    FiredupStop(u64),
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn cfg(mode: Mode) -> JudgeConfig {
    let mut c = JudgeConfig::new(mode, "/tmp/server.log", classifier());
    c.stall = Some(ms(10_000));
    c.timeout = Some(ms(60_000));
    c.log_grace = ms(5_000);
    c
}

/// Runs a script; between steps, ticks at every deadline the judge asked for, as the shell does.
fn run(config: JudgeConfig, steps: &[Step]) -> Judgement {
    let mut j = Judge::new(config);
    let mut number = 0;
    let feed = |j: &mut Judge, at: u64, obs: Observation| {
        // Deliver the deadlines that fall before this observation first.
        while let Some(d) = j.next_deadline() {
            if d > ms(at) || j.verdict().is_some() {
                break;
            }
            j.observe(d, Observation::Tick);
        }
        j.observe(ms(at), obs);
    };
    for s in steps {
        if j.verdict().is_some() {
            break;
        }
        match s.clone() {
            Step::Line(at, text) => {
                number += 1;
                feed(
                    &mut j,
                    at,
                    Observation::Line {
                        number,
                        text: text.to_string(),
                    },
                );
            }
            Step::Exit(at, e) => feed(&mut j, at, Observation::Exited(e)),
            Step::Started(at) => feed(&mut j, at, Observation::Started { pid: 42 }),
            Step::SpawnFailed(at) => feed(
                &mut j,
                at,
                Observation::SpawnFailed {
                    reason: "command not found: x".into(),
                },
            ),
            Step::Usage(at, cpu, read) => feed(
                &mut j,
                at,
                Observation::Usage {
                    cpu_ticks: cpu,
                    read_bytes: read,
                },
            ),
            Step::Oom(at) => feed(
                &mut j,
                at,
                Observation::OomEvidence("cgroup counted 1 OOM kill".into()),
            ),
            Step::Log(at, s) => feed(&mut j, at, Observation::Log(s)),
            Step::Tick(at) => feed(&mut j, at, Observation::Tick),
            Step::Probe(at, kind, what) => {
                let detail = format!("{what} at {at}");
                let outcome = match what {
                    'u' => ProbeOutcome::Up {
                        detail,
                        latency: ms(3),
                        ours: false,
                    },
                    'n' => ProbeOutcome::NotYet { detail },
                    'x' => ProbeOutcome::Foreign { detail },
                    'r' => ProbeOutcome::Rejected { detail },
                    _ => ProbeOutcome::Fault { detail },
                };
                feed(&mut j, at, Observation::Probe { kind, outcome })
            }
            Step::Notify(at, text) => feed(
                &mut j,
                at,
                Observation::Notify(crate::notify_message::parse(text.as_bytes())),
            ),
            Step::Gpu(at, mib) => feed(&mut j, at, Observation::GpuMemory(mib)),
            Step::FiredupStop(at) => feed(
                &mut j,
                at,
                Observation::FiredupStop {
                    by: "firedup stop (pid 7, uid 1000)".into(),
                },
            ),
        }
    }
    // Let time run out: tick through every remaining deadline.
    let mut guard = 0;
    while j.verdict().is_none() {
        let d = j
            .next_deadline()
            .expect("a judge without a verdict must always have a deadline");
        j.observe(d, Observation::Tick);
        guard += 1;
        assert!(guard < 10_000, "no verdict");
    }
    j.verdict().unwrap().clone()
}

use Step::*;

#[test]
fn verdict_table() {
    let code = |c| Some(ExitInfo::code(c));
    let sig = |s| Some(ExitInfo::signal(s, false));
    let cases: Vec<(&str, Mode, Vec<Step>, Verdict, Option<Signature>, u64)> = vec![
        (
            "ready line",
            Mode::UntilReady,
            vec![Started(0), Line(100, "loading"), Line(900, "READY")],
            Verdict::Ready,
            None,
            900,
        ),
        (
            "job exits 0",
            Mode::UntilExit,
            vec![Started(0), Line(10, "working"), Exit(500, code(0))],
            Verdict::Succeeded,
            None,
            500,
        ),
        (
            "server exits 0 before ready",
            Mode::UntilReady,
            vec![Started(0), Exit(300, code(0))],
            Verdict::Exited,
            None,
            300,
        ),
        (
            "exit 1, nothing printed",
            Mode::UntilReady,
            vec![Started(0), Line(1, "hello"), Exit(300, code(1))],
            Verdict::Exited,
            None,
            300,
        ),
        (
            "exit 127 is never_started",
            Mode::UntilReady,
            vec![
                Started(0),
                Line(1, "sh: 1: vllm: not found"),
                Exit(5, code(127)),
            ],
            Verdict::NeverStarted,
            None,
            5,
        ),
        (
            "exit 126 is never_started",
            Mode::UntilExit,
            vec![Started(0), Exit(5, code(126))],
            Verdict::NeverStarted,
            None,
            5,
        ),
        (
            "spawn failure",
            Mode::UntilReady,
            vec![SpawnFailed(1)],
            Verdict::NeverStarted,
            None,
            1,
        ),
        (
            "SIGKILL",
            Mode::UntilReady,
            vec![Started(0), Exit(700, sig(9))],
            Verdict::Killed,
            Some(Signature::Sigkill),
            700,
        ),
        (
            "SIGKILL with OOM evidence",
            Mode::UntilReady,
            vec![Started(0), Oom(690), Exit(700, sig(9))],
            Verdict::Killed,
            Some(Signature::OomKilled),
            700,
        ),
        (
            "shell 137",
            Mode::UntilExit,
            vec![Started(0), Exit(700, code(137))],
            Verdict::Killed,
            Some(Signature::Sigkill),
            700,
        ),
        (
            "SIGSEGV",
            Mode::UntilExit,
            vec![Started(0), Exit(10, sig(11))],
            Verdict::Killed,
            Some(Signature::Segfault),
            10,
        ),
        (
            "SIGABRT",
            Mode::UntilExit,
            vec![
                Started(0),
                Line(
                    5,
                    "terminate called after throwing an instance of 'std::runtime_error'",
                ),
                Exit(10, sig(6)),
            ],
            Verdict::Killed,
            Some(Signature::Abort),
            10,
        ),
        (
            "SIGTERM",
            Mode::UntilExit,
            vec![Started(0), Exit(10, sig(15))],
            Verdict::Killed,
            Some(Signature::Terminated),
            10,
        ),
        (
            "shell 130 (SIGINT)",
            Mode::UntilExit,
            vec![Started(0), Exit(10, code(130))],
            Verdict::Killed,
            Some(Signature::Terminated),
            10,
        ),
        (
            "fatal line then exit",
            Mode::UntilReady,
            vec![
                Started(0),
                Line(
                    100,
                    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                ),
                Exit(400, code(1)),
            ],
            Verdict::Failed,
            Some(Signature::CudaOom),
            400,
        ),
        (
            "fatal line, process lives: failed after the settle window",
            Mode::UntilReady,
            vec![
                Started(0),
                Line(
                    100,
                    "RuntimeError: CUDA error: an illegal memory access was encountered",
                ),
            ],
            Verdict::Failed,
            Some(Signature::CudaError),
            1600,
        ),
        (
            "fatal line then ready text: still failed",
            Mode::UntilReady,
            vec![
                Started(0),
                Line(100, "OSError: [Errno 98] Address already in use"),
                Line(200, "READY"),
            ],
            Verdict::Failed,
            Some(Signature::PortInUse),
            1600,
        ),
        (
            "most specific cause wins over the whole failure",
            Mode::UntilReady,
            vec![
                Started(0),
                Line(100, "Traceback (most recent call last):"),
                Line(
                    110,
                    "RuntimeError: CUDA error: operation not permitted when stream is capturing",
                ),
                Line(
                    120,
                    "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 1.00 GiB",
                ),
                Exit(300, code(1)),
            ],
            Verdict::Failed,
            Some(Signature::CudaOom),
            300,
        ),
        (
            "bare traceback then exit 1 is python_exception",
            Mode::UntilExit,
            vec![
                Started(0),
                Line(10, "Traceback (most recent call last):"),
                Line(11, "ValueError: bad shape"),
                Exit(20, code(1)),
            ],
            Verdict::Failed,
            Some(Signature::PythonException),
            20,
        ),
        (
            "bare traceback in a job that exits 0 is not a failure",
            Mode::UntilExit,
            vec![
                Started(0),
                Line(10, "Traceback (most recent call last):"),
                Line(11, "ValueError: retrying"),
                Exit(20, code(0)),
            ],
            Verdict::Succeeded,
            None,
            20,
        ),
        (
            "fatal line then SIGKILL is failed with the line's cause",
            Mode::UntilReady,
            vec![
                Started(0),
                Line(
                    10,
                    "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
                ),
                Exit(20, sig(9)),
            ],
            Verdict::Failed,
            Some(Signature::NcclError),
            20,
        ),
        (
            "user fail line",
            Mode::UntilReady,
            vec![Started(0), Line(10, "USER-FATAL now"), Exit(20, code(2))],
            Verdict::Failed,
            None,
            20,
        ),
        (
            "stalled: no lines, no cpu",
            Mode::UntilReady,
            vec![Started(0), Line(10, "starting")],
            Verdict::Stalled,
            None,
            10_010,
        ),
        (
            "stalled: a repeating heartbeat is not progress",
            Mode::UntilReady,
            vec![
                Started(0),
                Line(10, "[10:00:00] waiting for engine"),
                Line(3000, "[10:00:03] waiting for engine"),
                Line(6000, "[10:00:06] waiting for engine"),
                Line(9000, "[10:00:09] waiting for engine"),
                Line(12000, "[10:00:12] waiting for engine"),
            ],
            Verdict::Stalled,
            None,
            10_010,
        ),
        (
            "progress counter moving keeps it alive until the timeout",
            Mode::UntilReady,
            vec![
                Started(0),
                Line(5000, "Capturing batches 1/36"),
                Line(14000, "Capturing batches 2/36"),
                Line(23000, "Capturing batches 3/36"),
                Line(32000, "Capturing batches 4/36"),
                Line(41000, "Capturing batches 5/36"),
                Line(50000, "Capturing batches 6/36"),
                Line(59000, "Capturing batches 7/36"),
                Tick(60000),
            ],
            Verdict::TimedOut,
            None,
            60_000,
        ),
        (
            "cpu use is progress",
            Mode::UntilReady,
            vec![
                Started(0),
                Usage(0, 0, 0),
                Usage(8000, 400, 0),
                Usage(16000, 800, 0),
                Usage(24000, 1200, 0),
                Usage(32000, 1600, 0),
                Usage(40000, 2000, 0),
                Usage(48000, 2400, 0),
                Usage(56000, 2800, 0),
                Tick(60000),
            ],
            Verdict::TimedOut,
            None,
            60_000,
        ),
        (
            "a trickle of cpu is not progress",
            Mode::UntilReady,
            vec![
                Started(0),
                Usage(0, 0, 0),
                Usage(5000, 1, 0),
                Usage(9000, 2, 0),
            ],
            Verdict::Stalled,
            None,
            10_000,
        ),
        (
            "reading weights is progress",
            Mode::UntilReady,
            vec![
                Started(0),
                Usage(0, 0, 0),
                Usage(9000, 0, 50 << 20),
                Tick(15000),
            ],
            Verdict::Stalled,
            None,
            19_000,
        ),
        (
            "log unreadable persistently",
            Mode::UntilReady,
            vec![
                Started(0),
                Log(100, LogState::Unreadable("permission denied".into())),
            ],
            Verdict::MonitorError,
            None,
            2100,
        ),
        (
            "log unreadable briefly is fine",
            Mode::UntilReady,
            vec![
                Started(0),
                Log(100, LogState::Unreadable("permission denied".into())),
                Log(500, LogState::Readable),
                Line(900, "READY"),
            ],
            Verdict::Ready,
            None,
            900,
        ),
    ];
    let mut failures = Vec::new();
    for (name, mode, steps, verdict, signature, at) in cases {
        let j = run(cfg(mode), &steps);
        if j.verdict != verdict || j.signature != signature || j.at != ms(at) {
            failures.push(format!(
                "{name}: got {:?}/{:?} at {:?} ({}), want {verdict:?}/{signature:?} at {at}ms",
                j.verdict, j.signature, j.at, j.reason
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn attach_with_no_log_and_no_process_is_never_started_after_the_grace() {
    let mut c = cfg(Mode::UntilReady);
    c.expect_process = false;
    let j = run(c, &[Log(0, LogState::Missing { dir_exists: false })]);
    assert_eq!(j.verdict, Verdict::NeverStarted);
    assert_eq!(j.at, ms(5_000));
    assert!(
        j.reason.contains("/tmp/server.log") && j.reason.contains("directory does not exist"),
        "{}",
        j.reason
    );
}

/// A watch that began long after the launch (`watch RUN_ID`): its waits count from the attach,
/// its times from the launch.
#[test]
fn a_late_attach_waits_from_the_attach_and_reports_times_from_the_launch() {
    let table = [
        // (what the watch sees from 100 s after the launch on, verdict, at)
        (vec![], Verdict::NeverStarted, ms(105_000)),
        (vec![Started(100_000)], Verdict::Stalled, ms(110_000)),
        (
            vec![
                Started(100_000),
                Usage(100_000, 0, 0),
                Usage(108_000, 900, 0),
                Usage(116_000, 1800, 0),
                Usage(124_000, 2700, 0),
                Usage(132_000, 3600, 0),
                Usage(140_000, 4500, 0),
                Usage(148_000, 5400, 0),
                Usage(156_000, 6300, 0),
            ],
            Verdict::TimedOut,
            ms(160_000),
        ),
        (
            vec![Started(100_000), Line(100_000, "READY")],
            Verdict::Ready,
            ms(100_000),
        ),
    ];
    for (steps, verdict, at) in table {
        let mut c = cfg(Mode::UntilReady);
        c.expect_process = false;
        let mut j = Judge::new(c);
        j.watch_began(ms(100_000));
        let feed = |j: &mut Judge, at: Duration, obs: Observation| {
            // Ticks at every deadline the judge asked for before `at`, as the shell does.
            while let Some(d) = j.next_deadline() {
                if d > at || j.verdict().is_some() {
                    break;
                }
                j.observe(d, Observation::Tick);
            }
            if j.verdict().is_none() {
                j.observe(at, obs);
            }
        };
        for s in &steps {
            match s {
                Started(t) => feed(&mut j, ms(*t), Observation::Started { pid: 1 }),
                Usage(t, cpu, read) => feed(
                    &mut j,
                    ms(*t),
                    Observation::Usage {
                        cpu_ticks: *cpu,
                        read_bytes: *read,
                    },
                ),
                Line(t, text) => feed(
                    &mut j,
                    ms(*t),
                    Observation::Line {
                        number: 1,
                        text: text.to_string(),
                    },
                ),
                _ => unreachable!(),
            }
        }
        feed(&mut j, ms(1_000_000), Observation::Tick);
        let got = j.verdict().cloned().expect("a verdict");
        assert_eq!(
            (got.verdict, got.at),
            (verdict, at),
            "{steps:?}: {}",
            got.reason
        );
    }
}

#[test]
fn a_missing_log_with_a_live_process_keeps_waiting() {
    let j = run(
        cfg(Mode::UntilReady),
        &[
            Started(0),
            Log(0, LogState::Missing { dir_exists: true }),
            Usage(0, 0, 0),
            Usage(9000, 900, 0),
            Line(12_000, "READY"),
        ],
    );
    assert_eq!(j.verdict, Verdict::Ready);
}

/// llama-cpp-python's server given a file that is not a GGUF (recorded, issue 15): the vendored
/// llama.cpp's reader names the cause first; its "failed to load model" and Python's ValueError
/// follow. The first line is decisive.
#[test]
fn a_gguf_readers_invalid_magic_line_is_decisive_before_the_loaders_echoes() {
    let j = run(
        cfg(Mode::UntilReady),
        &[
            Started(0),
            Line(
                1,
                "gguf_init_from_reader: invalid magic characters: 'not ', expected 'GGUF'",
            ),
            Line(
                2,
                "llama_model_load: error loading model: llama_model_loader: failed to load model from /work/garbage.gguf",
            ),
            Line(3, "llama_model_load_from_file_impl: failed to load model"),
            Line(4, "Traceback (most recent call last):"),
            Line(
                5,
                "ValueError: Failed to load model from file: /work/garbage.gguf",
            ),
            Exit(10, Some(ExitInfo::code(1))),
        ],
    );
    assert_eq!(j.verdict, Verdict::Failed);
    assert_eq!(j.signature, Some(Signature::ModelLoadFailed));
    assert_eq!(j.line.unwrap().number, 1);
}

#[test]
fn the_decisive_line_and_context_are_reported() {
    let j = run(
        cfg(Mode::UntilReady),
        &[
            Started(0),
            Line(1, "Load weight begin. avail mem=70 GB"),
            Line(2, "DEBUG noise"),
            Line(
                3,
                "Capture cuda graph begin. This can take up to several minutes.",
            ),
            Line(4, "Traceback (most recent call last):"),
            Line(
                5,
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
            ),
            Line(6, "[rank0]:[W] destroying process group"),
            Exit(10, Some(ExitInfo::code(1))),
        ],
    );
    assert_eq!(j.verdict, Verdict::Failed);
    assert_eq!(j.signature, Some(Signature::CudaOom));
    let line = j.line.unwrap();
    assert_eq!(line.number, 5);
    assert!(
        j.context
            .iter()
            .any(|c| c.contains("Capture cuda graph begin"))
    );
    assert!(
        j.context
            .iter()
            .any(|c| c.contains("destroying process group"))
    );
    assert!(
        !j.context.iter().any(|c| c.contains("DEBUG")),
        "noise is not context"
    );
    assert_eq!(j.phase.as_deref(), Some("capture_cuda_graph"));
    let phases: Vec<&str> = j.timeline.iter().map(|p| p.phase.as_str()).collect();
    assert_eq!(phases, vec!["load_weights", "capture_cuda_graph"]);
    assert_eq!(j.exit, Some(ExitInfo::code(1)));
    assert!(j.secondary.contains(&Signature::PythonException));
}

/// The context before a failure is the last lines (a redrawn progress bar once, at its latest
/// state), in order, however many lines came before: the kept lines are recycled once the
/// context is full (issue 28), and each keeps its own text.
#[test]
fn the_context_is_the_last_lines_however_many_came_before() {
    let texts = [
        "loading shard alpha",
        "loading shard bravo",
        "loading shard charlie",
        "loading shard delta",
        "loading shard echo",
        "loading shard foxtrot",
        "loading shard golf",
        // A bar redrawn: one line of context, its last state.
        "Loading checkpoint shards:  50% 2/4",
        "Loading checkpoint shards:  75% 3/4",
        "loading shard hotel",
        "loading shard india",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
    ];
    let mut steps = vec![Started(0)];
    for (n, t) in texts.iter().enumerate() {
        steps.push(Line(n as u64 + 1, t));
    }
    steps.push(Exit(10, Some(ExitInfo::code(1))));
    let j = run(cfg(Mode::UntilReady), &steps);
    assert_eq!(j.verdict, Verdict::Failed);
    assert_eq!(
        j.context,
        vec![
            "loading shard echo",
            "loading shard foxtrot",
            "loading shard golf",
            "Loading checkpoint shards:  75% 3/4",
            "loading shard hotel",
            "loading shard india",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
        ]
    );
}

#[test]
fn hold_reports_a_crash_after_ready() {
    let mut c = cfg(Mode::UntilReady);
    c.hold = Some(ms(30_000));
    let j = run(
        c.clone(),
        &[
            Started(0),
            Line(100, "READY"),
            Exit(5_000, Some(ExitInfo::signal(11, true))),
        ],
    );
    assert_eq!(j.verdict, Verdict::Killed);
    assert_eq!(j.signature, Some(Signature::Segfault));
    assert!(j.reason.contains("after becoming ready"), "{}", j.reason);
    let j = run(c, &[Started(0), Line(100, "READY")]);
    assert_eq!(j.verdict, Verdict::Ready);
    assert_eq!(j.at, ms(30_100));
}

/// The confirmation window after the ready condition: a fatal line or an exit inside it is the
/// verdict (uvicorn's `Application startup complete.` and then its bind error); surviving it is
/// `ready` at the time the condition first held, not at the end of the window.
#[test]
fn confirmation_window_lets_a_fatal_line_or_an_exit_override_ready() {
    let bind_error = "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use";
    let code = |c| Some(ExitInfo::code(c));
    // (name, confirm ms, hold ms, steps, verdict, signature, verdict at ms, ready_at ms)
    let cases: Vec<(
        &str,
        u64,
        Option<u64>,
        Vec<Step>,
        Verdict,
        Option<Signature>,
        u64,
        Option<u64>,
    )> = vec![
        (
            "survives the window: ready at the ready line's time",
            500,
            None,
            vec![Started(0), Line(100, "READY"), Tick(700)],
            Verdict::Ready,
            None,
            100,
            Some(100),
        ),
        (
            "a bind error on the next line, then exit 1",
            500,
            None,
            vec![
                Started(0),
                Line(100, "READY"),
                Line(102, bind_error),
                Exit(150, code(1)),
            ],
            Verdict::Failed,
            Some(Signature::PortInUse),
            150,
            Some(100),
        ),
        (
            "a bind error while the process lingers: failed after the settle, never ready",
            500,
            None,
            vec![
                Started(0),
                Line(100, "READY"),
                Line(400, bind_error),
                Tick(5_000),
            ],
            Verdict::Failed,
            Some(Signature::PortInUse),
            1_900,
            Some(100),
        ),
        (
            "an exit 0 inside the window is not ready",
            500,
            None,
            vec![Started(0), Line(100, "READY"), Exit(300, code(0))],
            Verdict::Exited,
            None,
            300,
            Some(100),
        ),
        (
            "a fatal line after the window is too late: ready was already given",
            500,
            None,
            vec![
                Started(0),
                Line(100, "READY"),
                Tick(600),
                Line(700, bind_error),
            ],
            Verdict::Ready,
            None,
            100,
            Some(100),
        ),
        (
            "no window: ready at once, as before",
            0,
            None,
            vec![Started(0), Line(100, "READY"), Line(101, bind_error)],
            Verdict::Ready,
            None,
            100,
            Some(100),
        ),
        (
            "a hold shorter than the settle window: the fatal line still wins",
            0,
            Some(1_000),
            vec![
                Started(0),
                Line(100, "READY"),
                Line(900, bind_error),
                Tick(1_100),
                Tick(5_000),
            ],
            Verdict::Failed,
            Some(Signature::PortInUse),
            2_400,
            Some(100),
        ),
    ];
    for (name, confirm, hold, steps, verdict, signature, at, ready_at) in cases {
        let mut c = cfg(Mode::UntilReady);
        c.confirm = ms(confirm);
        c.hold = hold.map(ms);
        let j = run(c, &steps);
        assert_eq!(j.verdict, verdict, "{name}: {}", j.reason);
        assert_eq!(j.signature, signature, "{name}: {}", j.reason);
        assert_eq!(j.at, ms(at), "{name}: {}", j.reason);
        assert_eq!(j.ready_at, ready_at.map(ms), "{name}");
        // An exit inside the window is told as such (the server was never reported ready).
        if j.exit.is_some() && hold.is_none() {
            assert!(
                j.reason.contains("after its ready condition held"),
                "{name}: {}",
                j.reason
            );
        }
    }
}

#[test]
fn every_ready_condition_must_hold() {
    let c = crate::test_classifier::classifier(&ClassifierSpec {
        ready_lines: vec![
            ReadyLine::new("http up").unwrap(),
            ReadyLine::new("model loaded").unwrap(),
        ],
        ..Default::default()
    })
    .unwrap();
    let mut cfgv = cfg(Mode::UntilReady);
    cfgv.classifier = c;
    let mut j = Judge::new(cfgv);
    j.observe(ms(0), Observation::Started { pid: 1 });
    j.observe(
        ms(1),
        Observation::Line {
            number: 1,
            text: "http up".into(),
        },
    );
    assert!(j.verdict().is_none());
    j.observe(
        ms(2),
        Observation::Line {
            number: 2,
            text: "model loaded".into(),
        },
    );
    assert_eq!(j.verdict().unwrap().verdict, Verdict::Ready);
}

#[test]
fn after_a_verdict_nothing_changes_and_no_deadline_is_asked() {
    let mut j = Judge::new(cfg(Mode::UntilExit));
    j.observe(ms(0), Observation::Started { pid: 1 });
    j.observe(ms(5), Observation::Exited(Some(ExitInfo::code(0))));
    assert_eq!(j.next_deadline(), None);
    assert!(
        j.observe(ms(6), Observation::Exited(Some(ExitInfo::code(1))))
            .is_empty()
    );
    assert_eq!(j.verdict().unwrap().verdict, Verdict::Succeeded);
}

#[test]
fn probes_table() {
    use ProbeKind::{Http, Notify as Ntf, Port, Request};
    let http = vec![(Http, "http://127.0.0.1:8000/health".to_string())];
    let with = |probes: &[(ProbeKind, String)], lines: bool| {
        let mut c = cfg(Mode::UntilReady);
        c.ready_probes = probes.to_vec();
        if !lines {
            c.classifier = classifier_with(&[]);
        }
        c
    };
    let http_request = vec![
        (Http, "http://127.0.0.1:8000/health".to_string()),
        (Request, "http://127.0.0.1:8000/v1/completions".to_string()),
    ];
    let notify = vec![(Ntf, "NOTIFY_SOCKET".to_string())];
    let no_stall = |mut c: JudgeConfig| {
        c.stall = None;
        c
    };
    let port = vec![(Port, "127.0.0.1:6379".to_string())];
    let cases: Vec<(&str, JudgeConfig, Vec<Step>, Verdict, u64)> = vec![
        (
            "the ready line alone is not enough while health answers 503",
            with(&http, true),
            vec![
                Started(0),
                Probe(100, Http, 'n'),
                Line(500, "READY"),
                Probe(800, Http, 'n'),
                Probe(1200, Http, 'u'),
            ],
            Verdict::Ready,
            1200,
        ),
        (
            "health 200 alone is not enough before the ready line",
            with(&http, true),
            vec![Started(0), Probe(100, Http, 'u'), Line(700, "READY")],
            Verdict::Ready,
            700,
        ),
        (
            "a probe alone can be the readiness condition",
            with(&http, false),
            vec![Started(0), Probe(100, Http, 'n'), Probe(300, Http, 'u')],
            Verdict::Ready,
            300,
        ),
        (
            "health up, request lagging: ready when the request returns tokens",
            with(&http_request, false),
            vec![
                Started(0),
                Probe(100, Http, 'u'),
                Probe(150, Request, 'n'),
                Probe(2000, Request, 'u'),
            ],
            Verdict::Ready,
            2000,
        ),
        (
            "someone else on the port is never ready",
            with(&port, false),
            vec![Started(0), Probe(100, Port, 'x'), Probe(4_000, Port, 'x')],
            Verdict::Stalled,
            10_000,
        ),
        (
            "repeated faults of firedup's own probe are a monitor error, fast",
            with(&http, true),
            vec![
                Started(0),
                Probe(250, Http, 'f'),
                Probe(500, Http, 'f'),
                Probe(750, Http, 'f'),
            ],
            Verdict::MonitorError,
            750,
        ),
        (
            // vLLM with its port taken by another HTTP server the owner check cannot tell apart:
            // its 404s come for seconds before vLLM reaches its bind and says why it failed.
            "refusals before the ready line wait for the log, which names the bind failure",
            with(&http, true),
            vec![
                Started(0),
                Probe(250, Http, 'r'),
                Probe(500, Http, 'r'),
                Probe(750, Http, 'r'),
                Probe(1000, Http, 'r'),
                Probe(4000, Http, 'r'),
                Line(
                    4100,
                    "(APIServer pid=7) OSError: [Errno 98] Address already in use",
                ),
                Probe(4250, Http, 'r'),
                Exit(4300, Some(ExitInfo::code(1))),
            ],
            Verdict::Failed,
            4300,
        ),
        (
            "refusals once every ready line was seen are a monitor error",
            with(&http, true),
            vec![
                Started(0),
                Probe(250, Http, 'r'),
                Line(300, "READY"),
                Probe(500, Http, 'r'),
                Probe(750, Http, 'r'),
                Probe(1000, Http, 'r'),
            ],
            Verdict::MonitorError,
            1000,
        ),
        (
            "refusals with readiness by probes alone are a monitor error, fast",
            with(&http, false),
            vec![
                Started(0),
                Probe(250, Http, 'r'),
                Probe(500, Http, 'r'),
                Probe(750, Http, 'r'),
            ],
            Verdict::MonitorError,
            750,
        ),
        (
            "a fatal line that settles wins over the probe's faults",
            with(&http, true),
            vec![
                Started(0),
                Line(100, "torch.OutOfMemoryError: CUDA out of memory."),
                Probe(250, Http, 'f'),
                Probe(500, Http, 'f'),
                Probe(750, Http, 'f'),
                Probe(1000, Http, 'f'),
            ],
            Verdict::Failed,
            1600,
        ),
        (
            "a fault between answers does not add up",
            with(&http, true),
            vec![
                Started(0),
                Probe(250, Http, 'f'),
                Probe(500, Http, 'f'),
                Probe(750, Http, 'n'),
                Probe(1000, Http, 'f'),
                Line(1100, "READY"),
                Probe(1250, Http, 'u'),
            ],
            Verdict::Ready,
            1250,
        ),
        (
            "a fatal line wins over a probe coming up",
            with(&http, false),
            vec![
                Started(0),
                Line(100, "torch.OutOfMemoryError: CUDA out of memory."),
                Probe(200, Http, 'u'),
            ],
            Verdict::Failed,
            1600,
        ),
        (
            "sd_notify READY=1",
            with(&notify, false),
            vec![
                Started(0),
                Notify(100, "STATUS=loading"),
                Notify(900, "READY=1"),
            ],
            Verdict::Ready,
            900,
        ),
        (
            "EXTEND_TIMEOUT_USEC moves the start deadline",
            no_stall(with(&notify, false)),
            vec![
                Started(0),
                Notify(50_000, "EXTEND_TIMEOUT_USEC=30000000"),
                Notify(70_000, "READY=1"),
            ],
            Verdict::Ready,
            70_000,
        ),
        (
            "without the extension the deadline holds",
            no_stall(with(&notify, false)),
            vec![Started(0), Notify(50_000, "STATUS=still loading")],
            Verdict::TimedOut,
            60_000,
        ),
        (
            "growing GPU memory is progress against the stall window",
            with(&[], true),
            vec![
                Started(0),
                Gpu(4000, 1000),
                Gpu(8000, 9000),
                Gpu(12_000, 20_000),
                Gpu(16_000, 40_000),
                Line(19_000, "READY"),
            ],
            Verdict::Ready,
            19_000,
        ),
        (
            "GPU memory that does not grow is no progress",
            with(&[], true),
            vec![
                Started(0),
                Gpu(4000, 1000),
                Gpu(8000, 1000),
                Gpu(12_000, 1000),
            ],
            Verdict::Stalled,
            14_000,
        ),
    ];
    for (name, config, steps, verdict, at) in cases {
        let j = run(config, &steps);
        assert_eq!(j.verdict, verdict, "{name}: {}", j.reason);
        if name.starts_with("refusals before") {
            assert_eq!(
                j.signature,
                Some(Signature::PortInUse),
                "{name}: {}",
                j.reason
            );
        }
        if name.starts_with("refusals once") {
            assert!(j.reason.contains("was refused 3 times"), "{}", j.reason);
        }
        if name.starts_with("someone else") {
            assert!(
                j.reason.contains("port 127.0.0.1:6379 (x at"),
                "{}",
                j.reason
            );
        }
        assert_eq!(j.at, ms(at), "{name}: {}", j.reason);
    }
}

#[test]
fn probe_reports_carry_both_readiness_times_and_why_it_waited() {
    let mut c = cfg(Mode::UntilReady);
    c.classifier = classifier_with(&[]);
    c.stall = None;
    c.ready_probes = vec![
        (ProbeKind::Http, "http://h/health".into()),
        (ProbeKind::Request, "http://h/v1/completions".into()),
    ];
    let j = run(
        c.clone(),
        &[
            Started(0),
            Probe(1000, ProbeKind::Http, 'u'),
            Probe(3500, ProbeKind::Request, 'u'),
        ],
    );
    let ready: Vec<Option<f64>> = j.probes.iter().map(|p| p.ready_s).collect();
    assert_eq!(ready, vec![Some(1.0), Some(3.5)]);
    assert_eq!(j.probes[0].latency_ms, Some(3.0));
    // Timed out: the reason says which condition was missing and what the probe saw last.
    let j = run(
        c,
        &[
            Started(0),
            Probe(1000, ProbeKind::Http, 'u'),
            Probe(2000, ProbeKind::Request, 'n'),
        ],
    );
    assert_eq!(j.verdict, Verdict::TimedOut);
    assert!(
        j.reason
            .contains("still waiting for: request http://h/v1/completions (n at 2000)"),
        "{}",
        j.reason
    );
}

#[test]
fn a_phase_entered_again_moves_the_current_phase_without_growing_the_timeline() {
    let mut c = cfg(Mode::UntilReady);
    c.stall = None;
    let mut steps = vec![Started(0)];
    for i in 0..1000u64 {
        steps.push(Line(1 + i * 2, "Load weight begin"));
        steps.push(Line(2 + i * 2, "Capture cuda graph begin"));
    }
    steps.push(Line(3000, "READY"));
    let j = run(c, &steps);
    assert_eq!(j.verdict, Verdict::Ready);
    let phases: Vec<&str> = j.timeline.iter().map(|p| p.phase.as_str()).collect();
    assert_eq!(phases, ["load_weights", "capture_cuda_graph", "ready"]);
    assert_eq!(j.timeline[0].at_s, 0.001);
}

#[test]
fn a_phase_budget_bounds_one_phase() {
    let mut c = cfg(Mode::UntilReady);
    c.phase_budgets = vec![("capture_cuda_graph".into(), ms(5000))];
    c.stall = None;
    let j = run(
        c.clone(),
        &[
            Started(0),
            Line(100, "Load weight begin"),
            Line(20_000, "Capture cuda graph begin"),
            Line(24_000, "Capturing batches 3/36"),
        ],
    );
    assert_eq!(j.verdict, Verdict::TimedOut);
    assert_eq!(j.at, ms(25_000));
    assert!(
        j.reason.contains("phase capture_cuda_graph") && j.reason.contains("budget of 5.0s"),
        "{}",
        j.reason
    );
    // The budget does not apply to other phases: a long weight load is fine.
    let j = run(
        c,
        &[
            Started(0),
            Line(100, "Load weight begin"),
            Line(20_000, "Capture cuda graph begin"),
            Line(23_000, "READY"),
        ],
    );
    assert_eq!(j.verdict, Verdict::Ready);
}

#[test]
fn a_launcher_that_exits_0_leaving_a_daemon_is_followed_to_ready_and_to_its_exit() {
    let mut j = Judge::new(cfg(Mode::UntilReady));
    j.observe(ms(0), Observation::Started { pid: 42 });
    j.observe(
        ms(5),
        Observation::LauncherLeft {
            pid: 43,
            command: "redis-server *:6379".into(),
            output: None,
        },
    );
    assert!(
        j.verdict().is_none(),
        "a daemon's launcher exit is not the run's exit"
    );
    j.observe(
        ms(9),
        Observation::Line {
            number: 1,
            text: "READY".into(),
        },
    );
    let v = j.verdict().expect("ready");
    assert_eq!(v.verdict, Verdict::Ready);
    assert!(v.process_alive);
    assert!(v.reason.contains("daemon pid 43"), "{}", v.reason);
    // The daemon ends before ready: that is the run's exit.
    let mut j = Judge::new(cfg(Mode::UntilReady));
    j.observe(ms(0), Observation::Started { pid: 42 });
    j.observe(
        ms(5),
        Observation::LauncherLeft {
            pid: 43,
            command: "sleep 300".into(),
            output: None,
        },
    );
    j.observe(ms(50), Observation::Exited(None));
    let v = j.verdict().expect("exited");
    assert_eq!(v.verdict, Verdict::Exited);
    assert!(!v.process_alive);
}

#[test]
fn the_decisive_line_of_ready_is_the_one_that_met_the_condition_first() {
    // llama-server's ready pattern also matches its idle line, printed right after (and again
    // after every request): the line that made it ready stays decisive.
    let j = run(
        cfg(Mode::UntilReady),
        &[
            Started(0),
            Line(100, "READY: server is listening"),
            Line(200, "READY: all slots are idle"),
            Tick(2000),
        ],
    );
    assert_eq!(j.verdict, Verdict::Ready, "{}", j.reason);
    assert_eq!(
        j.line.map(|l| l.text).as_deref(),
        Some("READY: server is listening")
    );
}

#[test]
fn an_end_whose_status_could_not_be_learned_says_so_without_claiming_an_exit() {
    let mut j = Judge::new(cfg(Mode::UntilReady));
    j.observe(ms(0), Observation::Started { pid: 42 });
    j.observe(ms(50), Observation::Exited(None));
    let v = j.verdict().expect("a verdict");
    assert_eq!(
        v.verdict,
        Verdict::Exited,
        "the only verdict for an end without a cause"
    );
    assert!(
        v.reason.contains("could not be learned") && !v.reason.contains("exited with"),
        "{}",
        v.reason
    );
}

#[test]
fn a_daemon_whose_output_is_not_the_log_is_judged_by_its_probes_or_at_once() {
    // `redis-server --daemonize yes`: the ready line goes to /dev/null.
    let left = Observation::LauncherLeft {
        pid: 43,
        command: "redis-server --daemonize yes --port 7001".into(),
        output: Some("/dev/null".into()),
    };
    let port_up = Observation::Probe {
        kind: ProbeKind::Port,
        outcome: ProbeOutcome::Up {
            detail: "127.0.0.1:7001 accepts".into(),
            latency: ms(1),
            ours: false,
        },
    };
    // With a port probe, the listener decides: ready, the line not waited for.
    let mut c = cfg(Mode::UntilReady);
    c.ready_probes = vec![(ProbeKind::Port, "127.0.0.1:7001".into())];
    for order in [
        [left.clone(), port_up.clone()],
        [port_up.clone(), left.clone()],
    ] {
        let mut j = Judge::new(c.clone());
        j.observe(ms(0), Observation::Started { pid: 42 });
        j.observe(ms(5), order[0].clone());
        j.observe(ms(9), order[1].clone());
        let v = j.verdict().expect("ready by the probe");
        assert_eq!(v.verdict, Verdict::Ready, "{}", v.reason);
        assert!(
            v.reason.contains("port 127.0.0.1:7001") && !v.reason.contains("READY"),
            "{}",
            v.reason
        );
        assert!(v.reason.contains("/dev/null"), "{}", v.reason);
    }
    // Without a probe, nothing can tell: said at once, not a stall.
    let mut j = Judge::new(cfg(Mode::UntilReady));
    j.observe(ms(0), Observation::Started { pid: 42 });
    j.observe(ms(5), left);
    let v = j.verdict().expect("decided at once");
    assert_eq!(v.verdict, Verdict::MonitorError);
    assert!(
        v.reason.contains("/dev/null") && v.reason.contains("--port"),
        "{}",
        v.reason
    );
}

#[test]
fn an_exit_after_the_owner_ended_is_firedups_stop_not_someone_elses() {
    // Issue 23: the supervisor stops a run whose owner (`run --owner PID`) ended; the SIGTERM is
    // firedup's, so the verdict says the owner ended, never "someone else sent it SIGTERM".
    // (how the process ended, a phrase the reason must hold)
    let table = [
        (Some(ExitInfo::signal(15, false)), "signal 15 (SIGTERM)"),
        (Some(ExitInfo::signal(9, false)), "signal 9 (SIGKILL)"),
        (Some(ExitInfo::code(0)), "exit code 0"),
        (None, "an unknown status"),
    ];
    for (exit, phrase) in table {
        let mut j = Judge::new(cfg(Mode::UntilExit));
        j.observe(ms(0), Observation::Started { pid: 42 });
        j.observe(ms(5), Observation::OwnerGone { pid: 7 });
        j.observe(ms(50), Observation::Exited(exit));
        let v = j.verdict().expect("a verdict");
        assert_eq!(v.verdict, Verdict::Killed, "{exit:?}: {}", v.reason);
        assert_eq!(
            v.signature, None,
            "{exit:?}: firedup's stop is no failure cause"
        );
        assert!(
            v.reason.starts_with("stopped: its owner, pid 7, ended") && v.reason.contains(phrase),
            "{exit:?}: {}",
            v.reason
        );
    }
}

#[test]
fn a_cause_printed_while_firedup_stops_the_run_for_its_owner_is_not_a_failure() {
    // Issue 23: a server that prints a fatal-looking line while it shuts down on firedup's
    // SIGTERM (its owner ended), and takes longer than the settle window to exit, is firedup's
    // stop, not a failure; a cause printed before the owner ended still is.
    let owner_then_line = |owner_first: bool| {
        let mut j = Judge::new(cfg(Mode::UntilExit));
        j.observe(ms(0), Observation::Started { pid: 42 });
        let line = Observation::Line {
            number: 1,
            text: "torch.OutOfMemoryError: CUDA out of memory".into(),
        };
        let gone = Observation::OwnerGone { pid: 7 };
        let (a, b) = if owner_first {
            (gone, line)
        } else {
            (line, gone)
        };
        j.observe(ms(10), a);
        j.observe(ms(20), b);
        let mut at = 20;
        while j.verdict().is_none() && at < 60_000 {
            at += 100;
            j.observe(ms(at), Observation::Tick);
        }
        j.verdict().cloned().expect("a verdict before the exit")
    };
    let v = owner_then_line(true);
    assert_eq!(v.verdict, Verdict::Killed, "{}", v.reason);
    assert_eq!(v.signature, None, "{}", v.reason);
    assert_eq!(
        v.reason,
        "stopped: its owner, pid 7, ended, so firedup stopped the run"
    );
    let v = owner_then_line(false);
    assert_eq!(v.verdict, Verdict::Failed, "{}", v.reason);
    assert_eq!(v.signature, Some(Signature::CudaOom), "{}", v.reason);
}

#[test]
fn an_end_by_firedups_own_stop_is_not_someone_elses() {
    let code = |c| Some(ExitInfo::code(c));
    let sig = |s| Some(ExitInfo::signal(s, false));
    let hold = |c: JudgeConfig, h: u64| JudgeConfig {
        hold: Some(ms(h)),
        ..c
    };
    let replay = |c: JudgeConfig, ready: u64, ended: u64| JudgeConfig {
        recorded_end: Some(RecordedEnd {
            ready_at: Some(ms(ready)),
            ended_at: Some(ms(ended)),
        }),
        ..hold(c, 86_400_000)
    };
    let unrecorded = |c: JudgeConfig, ended: u64| JudgeConfig {
        recorded_end: Some(RecordedEnd {
            ready_at: None,
            ended_at: Some(ms(ended)),
        }),
        ..hold(c, 86_400_000)
    };
    // (name, config, steps, verdict, signature, the reason has, the reason has not)
    let cases: Vec<(
        &str,
        JudgeConfig,
        Vec<Step>,
        Verdict,
        Option<Signature>,
        &str,
        &str,
    )> = vec![
        (
            "someone else's SIGTERM before ready",
            cfg(Mode::UntilReady),
            vec![Started(0), Line(100, "loading"), Exit(500, sig(15))],
            Verdict::Killed,
            Some(Signature::Terminated),
            "someone else",
            "firedup stop",
        ),
        (
            "firedup's stop before ready: terminated, by firedup",
            cfg(Mode::UntilReady),
            vec![
                Started(0),
                Line(100, "loading"),
                FiredupStop(500),
                Exit(520, sig(15)),
            ],
            Verdict::Killed,
            Some(Signature::Terminated),
            "firedup stop (pid 7, uid 1000) stopped it",
            "someone else",
        ),
        (
            "firedup's SIGKILL after the grace, in job mode",
            cfg(Mode::UntilExit),
            vec![Started(0), FiredupStop(100), Exit(5_200, sig(9))],
            Verdict::Killed,
            Some(Signature::Sigkill),
            "firedup stop (pid 7, uid 1000) stopped it",
            "someone else",
        ),
        (
            "a server that exits 0 on firedup's SIGTERM before ready",
            cfg(Mode::UntilReady),
            vec![Started(0), FiredupStop(100), Exit(150, code(0))],
            Verdict::Exited,
            None,
            "when firedup stop (pid 7, uid 1000) stopped it",
            "someone else",
        ),
        (
            // Not `ready`: the server is gone, and a script that reads exit 0 would call it up.
            "firedup's stop during the hold after ready: terminated by firedup, after ready",
            hold(cfg(Mode::UntilReady), 10_000),
            vec![
                Started(0),
                Line(100, "READY"),
                FiredupStop(2_000),
                Exit(2_100, sig(15)),
            ],
            Verdict::Killed,
            Some(Signature::Terminated),
            "killed by SIGTERM (signal 15 (SIGTERM)) 2.0s after becoming ready: firedup stop (pid 7, uid 1000) stopped it",
            "someone else",
        ),
        (
            "a re-attach to a ready run firedup stopped: terminated by firedup, at the recorded times",
            replay(cfg(Mode::UntilReady), 1_500, 4_000),
            vec![
                Started(0),
                Line(9_000, "READY"),
                FiredupStop(9_001),
                Exit(9_001, sig(15)),
            ],
            Verdict::Killed,
            Some(Signature::Terminated),
            "2.5s after becoming ready: firedup stop (pid 7, uid 1000) stopped it",
            "someone else",
        ),
        (
            "a re-attach to a run that crashed after ready: its exit, at the recorded times",
            replay(cfg(Mode::UntilReady), 1_500, 4_000),
            vec![Started(0), Line(9_000, "READY"), Exit(9_001, code(1))],
            Verdict::Exited,
            None,
            "exit code 1 2.5s after becoming ready",
            "1ms after",
        ),
        (
            "a re-attach with no recorded verdict to a run firedup stopped claims no times",
            unrecorded(cfg(Mode::UntilReady), 4_000),
            vec![
                Started(0),
                Line(9_000, "READY"),
                FiredupStop(9_001),
                Exit(9_001, sig(15)),
            ],
            Verdict::Killed,
            Some(Signature::Terminated),
            "after becoming ready: firedup stop (pid 7, uid 1000) stopped it",
            "9.0s",
        ),
        (
            "a re-attach with no recorded verdict claims no time after ready",
            unrecorded(cfg(Mode::UntilReady), 4_000),
            vec![Started(0), Line(9_000, "READY"), Exit(9_001, code(1))],
            Verdict::Exited,
            None,
            "exit code 1 after becoming ready",
            "1ms after",
        ),
    ];
    for (name, config, steps, verdict, signature, has, has_not) in cases {
        let j = run(config, &steps);
        assert_eq!(
            (j.verdict, j.signature),
            (verdict, signature),
            "{name}: {j:?}"
        );
        assert!(j.reason.contains(has), "{name}: {}", j.reason);
        assert!(!j.reason.contains(has_not), "{name}: {}", j.reason);
    }
}
