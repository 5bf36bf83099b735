//! Lines as a person reads them, through the real binary: logs whose lines are dressed by
//! relays and launchers (escape codes written out by rsyslog, compose and `srun --label`
//! prefixes, torchrun's rank prefixes), hard-wrapped by a terminal, or interleaved by two ranks
//! (`tests/fixtures/normalised/`, README.md there says where each came from) are replayed by
//! `tests/fixtures/replay.sh`, and the verdict, signature, decisive line and rank must be what a
//! person would name.

use crate::common;
use common::{Env, fixture};

/// `firedup run --json [extra] -- sh replay.sh FILE END`.
fn replay(env: &Env, file: &str, end: &str, extra: &[&str]) -> common::Run {
    let replay = fixture("replay.sh");
    let log = fixture(&format!("normalised/{file}"));
    let mut args = vec!["run", "--json"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", &replay, &log, end]);
    env.firedup(&args)
}

#[test]
fn dressed_failures_name_their_signature_decisive_line_and_rank() {
    // (fixture, signature, decisive line number, the start of its original text, rank)
    let cases: &[(&str, &str, u64, &str, Option<u64>)] = &[
        (
            "torchrun_tee.log",
            "import_error",
            11,
            "[default1]:[rank1]: ModuleNotFoundError: No module named",
            Some(1),
        ),
        (
            "torchrun_interleaved.log",
            "import_error",
            11,
            "[rank0]: Traceback (most recent call last):[rank1]: ModuleNotFoundError",
            Some(1),
        ),
        (
            "vllm_compose_rsyslog.log",
            "cuda_oom",
            10,
            "vllm-1  | (EngineCore_DP0 pid=214) #033[1;31mERROR#033[0m 10-11 10:42:14 [core.py:708] #033[1;31mValueError",
            None,
        ),
        (
            "vllm_wrapped_160.log",
            "cuda_oom",
            6,
            "(EngineCore_DP0 pid=214) ValueError: To serve at least one request",
            None,
        ),
        (
            "sglang_srun_label.log",
            "cuda_oom",
            9,
            "1: RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
            Some(1),
        ),
    ];
    let env = Env::new();
    for (file, signature, number, text, rank) in cases {
        let r = replay(&env, file, "1", &["--until", "exit"]);
        let line = &r.json["line"];
        assert_eq!(
            (r.verdict(), r.signature(), line["number"].as_u64()),
            ("failed", Some(*signature), Some(*number)),
            "{file}: {}",
            r.explain()
        );
        let shown = line["text"].as_str().unwrap_or("");
        assert!(
            shown.starts_with(text),
            "{file}: the original line is shown: {shown}"
        );
        assert_eq!(r.json["rank"].as_u64(), *rank, "{file}: {}", r.explain());
    }
}

#[test]
fn a_ready_line_under_escape_text_and_a_compose_prefix_is_ready() {
    let env = Env::new();
    let r = replay(
        &env,
        "vllm_ready_rsyslog.log",
        "hang",
        &["--ready-line", r"^INFO:\s+Application startup complete\."],
    );
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    assert_eq!(
        r.json["line"]["number"].as_u64(),
        Some(6),
        "{}",
        r.explain()
    );
}
