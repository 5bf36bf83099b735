//! The multi-process rule through the real binary: the verdict names the first rank to fail, with
//! the cause it printed or the signal or exit it ended with; the other ranks' collective errors
//! and torchrun's own summary are echoes.
//!
//! Two sets: real torchrun output recorded with two gloo ranks on CPU (tests/fixtures/torchrun,
//! see its README), replayed; and the same failures run live under real torchrun, when a Python
//! with torch is available: `FIREDUP_TEST_TORCH_PYTHON` (the CI installs torch into a venv and
//! sets it), else `/work/torchvenv/bin/python` if it exists; without one the live test says so and
//! passes without running.

use crate::common;
use common::{Env, Run, fixture, free_port};

/// One failure: the log (and two_ranks.py mode), torchrun's recorded exit code, and what the
/// verdict must say. `rank: None` means the log cannot tell which rank was the root cause.
struct Case {
    mode: &'static str,
    code: i32,
    verdict: &'static str,
    signature: &'static str,
    rank: Option<u64>,
    /// What the decisive line shows.
    line: &'static str,
    /// The root-cause rank's exit: ("code", N) or ("signal", N).
    exit: (&'static str, i64),
}

const CASES: &[Case] = &[
    Case {
        mode: "raise",
        code: 1,
        verdict: "failed",
        signature: "python_exception",
        rank: Some(1),
        line: "[rank1]:",
        exit: ("code", 1),
    },
    Case {
        mode: "raise_late",
        code: 1,
        verdict: "failed",
        signature: "python_exception",
        rank: Some(1),
        line: "[rank1]:",
        exit: ("code", 1),
    },
    Case {
        mode: "raise_misnamed",
        code: 1,
        verdict: "failed",
        signature: "python_exception",
        rank: Some(1),
        line: "[rank1]:",
        exit: ("code", 1),
    },
    Case {
        mode: "sigkill",
        code: 1,
        verdict: "killed",
        signature: "sigkill",
        rank: Some(1),
        line: "failed (exitcode: -9) local_rank: 1",
        exit: ("signal", 9),
    },
    Case {
        mode: "exit3",
        code: 1,
        verdict: "failed",
        signature: "rank_exited",
        rank: Some(1),
        line: "failed (exitcode: 3) local_rank: 1",
        exit: ("code", 3),
    },
    Case {
        mode: "exit0",
        code: 1,
        verdict: "failed",
        signature: "rank_exited",
        rank: None,
        line: "Connection closed by peer",
        exit: ("code", 1),
    },
    Case {
        mode: "hang",
        code: 1,
        verdict: "failed",
        signature: "nccl_error",
        rank: None,
        line: "Timed out waiting 10000ms for recv operation",
        exit: ("code", 1),
    },
    Case {
        mode: "launcher_sigterm",
        code: 1,
        verdict: "killed",
        signature: "terminated",
        rank: None,
        line: "Received 15 death signal",
        exit: ("code", 1),
    },
    Case {
        mode: "sigill",
        code: 1,
        verdict: "killed",
        signature: "illegal_instruction",
        rank: Some(1),
        line: "failed (exitcode: -4) local_rank: 1",
        exit: ("signal", 4),
    },
    Case {
        mode: "segfault",
        code: 1,
        verdict: "killed",
        signature: "segfault",
        rank: Some(1),
        line: "failed (exitcode: -11) local_rank: 1",
        exit: ("signal", 11),
    },
];

/// Checks `r` against `case`. `live`: a live run, where a rank the log cannot name may be named
/// from what the shell saw (the process that ended first), never another one.
fn check(case: &Case, r: &Run, live: bool) {
    let what = format!("{} ({})", case.mode, if live { "live" } else { "replay" });
    assert_eq!(
        (r.verdict(), r.signature()),
        (case.verdict, Some(case.signature)),
        "{what}: {}",
        r.explain()
    );
    let rank = r.json["rank"].as_u64();
    match (case.rank, live) {
        (None, true) => assert!(
            rank.is_none() || rank == Some(1),
            "{what}: rank {rank:?}: {}",
            r.explain()
        ),
        _ => assert_eq!(rank, case.rank, "{what}: {}", r.explain()),
    }
    let line = r.json["line"]["text"].as_str().unwrap_or("");
    assert!(
        line.contains(case.line),
        "{what}: decisive line {line:?} should show {:?}",
        case.line
    );
    if !(live && case.rank.is_none()) {
        let (field, value) = case.exit;
        assert_eq!(
            r.json["exit"][field].as_i64(),
            Some(value),
            "{what}: exit {}: {}",
            r.json["exit"],
            r.explain()
        );
    }
}

#[test]
fn recorded_torchrun_failures_name_the_root_cause_rank() {
    let env = Env::new();
    for case in CASES {
        let log = fixture(&format!("torchrun/{}.log", case.mode));
        let code = case.code.to_string();
        let r = env.replay(&log, &code);
        check(case, &r, false);
    }
}

/// A Python with torch: `FIREDUP_TEST_TORCH_PYTHON`, else the default venv if it exists.
fn torch_python() -> Option<String> {
    if let Ok(p) = std::env::var("FIREDUP_TEST_TORCH_PYTHON") {
        if !p.is_empty() {
            return Some(p);
        }
    }
    let default = "/work/torchvenv/bin/python";
    std::path::Path::new(default)
        .exists()
        .then(|| default.to_string())
}

#[test]
fn live_torchrun_failures_name_the_root_cause_rank() {
    let Some(python) = torch_python() else {
        println!(
            "skipped: no Python with torch (set FIREDUP_TEST_TORCH_PYTHON to run real torchrun)"
        );
        return;
    };
    let env = Env::new();
    let script = fixture("torchrun/two_ranks.py");
    for case in CASES {
        // raise_late and raise_misnamed are the raise case under a slower torchrun monitor
        // (which rank torchrun then names first is a race; the verdict must not depend on it).
        let (mode, interval) = match case.mode {
            "raise_late" | "raise_misnamed" => ("raise", "3"),
            m => (m, "0.1"),
        };
        let port = free_port().to_string();
        let r = env
            .run()
            .until("exit")
            .json()
            .command(&[
                &python,
                "-m",
                "torch.distributed.run",
                "--nproc-per-node",
                "2",
                "--monitor-interval",
                interval,
                "--master-port",
                &port,
                &script,
                mode,
            ])
            .output();
        check(case, &r, true);
    }
}
