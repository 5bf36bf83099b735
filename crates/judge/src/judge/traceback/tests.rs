//! The traceback structure on real traceback text (recorded with PyTorch 2.15 on Python 3.11, see
//! `tests/fixtures/tracebacks/record.sh`, or pasted into sglang / PyTorch issues): first the role
//! of each line, then the verdict a whole log gets through the judge.

use std::time::Duration;

use super::*;
use crate::classify::{Classifier, ClassifierSpec};
use crate::judge::{Judge, JudgeConfig, Judgement, Observation};
use crate::mode::Mode;
use crate::verdict::{ExitInfo, Verdict};

fn classifier() -> Classifier {
    crate::test_classifier::classifier(&ClassifierSpec {
        signatures: crate::test_classifier::catalog().signatures.clone(),
        ..ClassifierSpec::default()
    })
    .unwrap()
}

/// The roles of `lines`, each `(rank, text)` as the normaliser gives them.
fn roles(lines: &[(Option<u32>, &str)]) -> Vec<LineRole> {
    let c = classifier();
    let mut t = Tracebacks::default();
    lines
        .iter()
        .enumerate()
        .map(|(i, (rank, text))| t.on_line(i as u64 + 1, *rank, text, text, &c.classify(text)))
        .collect()
}

/// A short role code per line: `.` outside, `s` source, `c` in a chain, `x` exception line; then
/// the chain id.
fn codes(roles: &[LineRole]) -> Vec<String> {
    roles
        .iter()
        .map(|r| {
            let kind = match (r.source, r.exception_of.is_some(), r.chain) {
                (true, _, _) => "s",
                (_, true, _) => "x",
                (_, _, Some(_)) => "c",
                _ => ".",
            };
            match r.chain {
                Some(c) => format!("{kind}{c}"),
                None => kind.to_string(),
            }
        })
        .collect()
}

#[test]
fn roles_of_lines_in_real_tracebacks() {
    let n = None;
    // (what, lines, expected codes)
    let cases: Vec<(&str, Vec<(Option<u32>, &str)>, Vec<&str>)> = vec![
        (
            "source line that names CUDA OOM, exception line ValueError",
            vec![
                (n, "Traceback (most recent call last):"),
                (n, r#"  File "/tmp/source_line.py", line 4, in check_batch"#),
                (
                    n,
                    r#"    raise (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB") if oom"#,
                ),
                (n, "ValueError: batch of 3 rows has no labels"),
                (n, "after"),
            ],
            vec!["c0", "s0", "s0", "x0", "c0"],
        ),
        (
            "direct cause chain, carets, blank lines",
            vec![
                (n, "Traceback (most recent call last):"),
                (n, r#"  File "/tmp/perm.py", line 8, in load"#),
                (n, "    with open(path) as f:"),
                (n, "         ^^^^^^^^^^"),
                (
                    n,
                    "PermissionError: [Errno 13] Permission denied: '/tmp/secret/settings.json'",
                ),
                (n, ""),
                (
                    n,
                    "The above exception was the direct cause of the following exception:",
                ),
                (n, ""),
                (n, "Traceback (most recent call last):"),
                (n, r#"  File "/tmp/perm.py", line 11, in load"#),
                (
                    n,
                    r#"    raise ConfigLoadError(f"could not read settings from {path}") from e"#,
                ),
                (
                    n,
                    "ConfigLoadError: could not read settings from /tmp/secret/settings.json",
                ),
                (n, ""),
                (n, "Traceback (most recent call last):"),
                (n, r#"  File "/tmp/other.py", line 1, in <module>"#),
                (n, "KeyboardInterrupt"),
            ],
            vec![
                "c0", "s0", "s0", "s0", "x0", ".", "c0", ".", "c0", "s0", "s0", "x0", ".", "c1",
                "s1", "x1",
            ],
        ),
        (
            "a wrapper's message goes on over the next lines, until a blank line",
            vec![
                (
                    n,
                    "[2025-05-15 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
                ),
                (
                    n,
                    r#"  File "/usr/lib/python3.10/site-packages/torch/_dynamo/output_graph.py", line 1544, in _call_user_compiler"#,
                ),
                (n, "    raise BackendCompilerFailed("),
                (
                    n,
                    "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
                ),
                (
                    n,
                    "RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture. If you need this call to be captured, please file an issue. Current cudaStreamCaptureStatus: cudaStreamCaptureStatusActive",
                ),
                (n, ""),
                (
                    n,
                    r#"Set TORCH_LOGS="+dynamo" and TORCHDYNAMO_VERBOSE=1 for more information"#,
                ),
            ],
            vec!["c0", "s0", "s0", "x0", "c0", ".", "."],
        ),
        (
            "the message ends at a new log record",
            vec![
                (n, "Traceback (most recent call last):"),
                (n, r#"  File "/tmp/x.py", line 1, in <module>"#),
                (n, "ValueError: bad"),
                (
                    n,
                    "[2025-05-15 10:00:01] Received sigquit from a child process. It usually means the child failed.",
                ),
            ],
            vec!["c0", "s0", "x0", "."],
        ),
        (
            "During handling: one chain; Python 3.11 ~~~^~~~ markers are source",
            vec![
                (n, "Traceback (most recent call last):"),
                (n, r#"  File "/tmp/during.py", line 7, in <module>"#),
                (n, r#"    load_weights("/nonexistent/state.pt")"#),
                (
                    n,
                    "FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/state.pt'",
                ),
                (n, ""),
                (
                    n,
                    "During handling of the above exception, another exception occurred:",
                ),
                (n, ""),
                (n, "Traceback (most recent call last):"),
                (n, r#"  File "/tmp/during.py", line 9, in <module>"#),
                (n, "    torch.zeros(2, 3) @ torch.zeros(2, 3)"),
                (n, "    ~~~~~~~~~~~~~~~~~~^~~~~~~~~~~~~~~~~~~"),
                (
                    n,
                    "RuntimeError: mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)",
                ),
            ],
            vec![
                "c0", "s0", "s0", "x0", ".", "c0", ".", "c0", "s0", "s0", "s0", "x0",
            ],
        ),
        (
            "two ranks' tracebacks interleaved ([rankN]: taken off by the normaliser)",
            vec![
                (Some(0), "Traceback (most recent call last):"),
                (Some(1), "Traceback (most recent call last):"),
                (Some(0), r#"  File "/tmp/train.py", line 12, in <module>"#),
                (Some(1), r#"  File "/tmp/train.py", line 12, in <module>"#),
                (Some(1), "    dist.all_reduce(t)"),
                (Some(0), r#"    raise RuntimeError("CUDA out of memory")"#),
                (
                    Some(1),
                    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:29500",
                ),
                (Some(0), "ValueError: rank 0 failed on purpose"),
            ],
            vec!["c0", "c1", "s0", "s1", "s1", "s0", "x1", "x0"],
        ),
        (
            "an exception group: the gutter is read through, one chain",
            vec![
                (n, "  + Exception Group Traceback (most recent call last):"),
                (n, r#"  |   File "<string>", line 1, in <module>"#),
                (n, "  | ExceptionGroup: eg (2 sub-exceptions)"),
                (n, "  +-+---------------- 1 ----------------"),
                (n, "    | Traceback (most recent call last):"),
                (n, r#"    |   File "<string>", line 3, in f"#),
                (n, r#"    |     raise RuntimeError("CUDA out of memory")"#),
                (n, "    | ValueError: 1"),
                (n, "    +---------------- 2 ----------------"),
                (n, "    | TypeError: 2"),
                (n, "    +------------------------------------"),
                (n, ""),
                (n, "next"),
            ],
            vec![
                "c0", "s0", "x0", "c0", "c0", "s0", "s0", "x0", "c0", "c0", "c0", ".", ".",
            ],
        ),
        (
            "a traceback indented as a whole by its logger",
            vec![
                (n, "    Traceback (most recent call last):"),
                (n, r#"      File "/app/server.py", line 12, in start"#),
                (n, r#"        raise RuntimeError("CUDA out of memory")"#),
                (n, "    ValueError: bad config"),
            ],
            vec!["c0", "s0", "s0", "x0"],
        ),
        (
            "pytest's E lines are not a traceback",
            vec![
                (
                    n,
                    "E       RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
                ),
                (n, "    def test_x():"),
            ],
            vec![".", "."],
        ),
    ];
    for (what, lines, expected) in cases {
        assert_eq!(codes(&roles(&lines)), expected, "{what}");
    }
}

#[test]
fn a_source_line_names_nothing_and_an_exception_line_names_a_python_exception() {
    let c = classifier();
    let source = r#"    raise RuntimeError(f"CUDA out of memory. Tried to allocate {n} GiB")"#;
    let mut class = c.classify(source);
    assert!(
        !class.hits.is_empty(),
        "the catalog matches the source text"
    );
    let role = LineRole {
        source: true,
        chain: Some(0),
        exception_of: None,
        handled_before: false,
    };
    role.apply(&mut class);
    assert!(class.hits.is_empty());
    // An exception line the catalog has no generic match for still names python_exception.
    let mut class = c.classify("KeyboardInterrupt");
    let role = LineRole {
        source: false,
        chain: Some(0),
        exception_of: Some(1),
        handled_before: false,
    };
    role.apply(&mut class);
    assert_eq!(
        class.strongest().and_then(|h| h.signature),
        Some(Signature::PythonException)
    );
}

#[test]
fn exception_lines_are_told_from_other_lines() {
    for yes in [
        "ValueError: bad",
        "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
        "KeyboardInterrupt",
        "torch._inductor.exc.InductorError: OSError: [Errno 28] No space left on device",
        "ConfigLoadError: could not read settings from /tmp/secret/settings.json",
    ] {
        assert!(is_exception_line(yes), "{yes}");
    }
    for no in [
        "",
        "Set TORCH_LOGS=\"+dynamo\" and TORCHDYNAMO_VERBOSE=1 for more information",
        "[2025-05-15 10:00:01] Received sigquit",
        "E       RuntimeError: x",
        "torch.",
        "INFO:     Started server process [4242]",
        "main: loading model",
        "ERROR:    Traceback (most recent call last):",
        "100%|██████████| 7/7",
    ] {
        assert!(!is_exception_line(no), "{no}");
    }
}

// ---------------------------------------------------------------------------------------------
// Through the judge: which cause a whole log names, and its decisive line.
// ---------------------------------------------------------------------------------------------

/// The verdict of `log` (one line per line) from a process that then exits with `code`.
fn judge(log: &str, code: i32) -> Judgement {
    let cfg = JudgeConfig::new(Mode::UntilExit, "/tmp/server.log", classifier());
    let mut j = Judge::new(cfg);
    j.observe(Duration::ZERO, Observation::Started { pid: 42 });
    for (i, text) in log.lines().enumerate() {
        j.observe(
            Duration::from_millis(1),
            Observation::Line {
                number: i as u64 + 1,
                text: text.to_string(),
            },
        );
    }
    j.observe(
        Duration::from_millis(2),
        Observation::Exited(Some(ExitInfo::code(code))),
    );
    let mut guard = 0;
    while j.verdict().is_none() {
        let d = j.next_deadline().expect("a deadline until the verdict");
        j.observe(d, Observation::Tick);
        guard += 1;
        assert!(guard < 1000, "no verdict");
    }
    j.verdict().unwrap().clone()
}

/// sglang's scheduler, `torch.compile` wrapping a CUDA graph capture failure (the wrapper line as
/// PyTorch prints it, the cause as pasted in sglang issue #6342).
const COMPILER_WRAPS_CAPTURE: &str = r#"[2025-05-15 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 336, in capture
    ) = self.capture_one_batch_size(bs, forward)
  File "/usr/local/lib/python3.10/dist-packages/torch/_dynamo/output_graph.py", line 1544, in _call_user_compiler
    raise BackendCompilerFailed(
torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:
RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture. If you need this call to be captured, please file an issue. Current cudaStreamCaptureStatus: cudaStreamCaptureStatusActive

Set TORCH_LOGS="+dynamo" and TORCHDYNAMO_VERBOSE=1 for more information
"#;

/// sglang issue #6342: dynamo's wrapper and the capture failure on one line, then the scheduler's
/// own traceback "during handling".
const DYNAMO_WRAPS_CAPTURE: &str = r#"Traceback (most recent call last):
  File "/data/miniconda3/envs/env-3.10/lib/python3.10/site-packages/torch/_dynamo/convert_frame.py", line 952, in _compile
    raise InternalTorchDynamoError(
torch._dynamo.exc.InternalTorchDynamoError: RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture. If you need this call to be captured, please file an issue. Current cudaStreamCaptureStatus: cudaStreamCaptureStatusActive

You can suppress this exception and fall back to eager by setting:
    import torch._dynamo
    torch._dynamo.config.suppress_errors = True

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/data/miniconda3/envs/env-3.10/lib/python3.10/site-packages/sglang/srt/managers/scheduler.py", line 2255, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, pp_rank, dp_rank)
Exception: Capture cuda graph failed: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture.
"#;

/// Recorded: `tests/fixtures/tracebacks/source_line_valueerror.log`.
const SOURCE_LINE: &str = r#"Traceback (most recent call last):
  File "/tmp/tmp.7dRAT01Mi7/source_line.py", line 7, in <module>
    check_batch(torch.zeros(3, 4), oom=False)
  File "/tmp/tmp.7dRAT01Mi7/source_line.py", line 4, in check_batch
    raise (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB") if oom
ValueError: batch of 3 rows has no labels
"#;

/// Recorded: `tests/fixtures/tracebacks/during_handling.log` (shortened).
const DURING_HANDLING: &str = r#"Traceback (most recent call last):
  File "/tmp/tmp.7dRAT01Mi7/during.py", line 7, in <module>
    load_weights("/nonexistent/state.pt")
  File "/work/torchvenv/lib/python3.11/site-packages/torch/serialization.py", line 777, in __init__
    super().__init__(open(name, mode))  # noqa: SIM115
                     ^^^^^^^^^^^^^^^^
FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/state.pt'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/tmp/tmp.7dRAT01Mi7/during.py", line 9, in <module>
    torch.zeros(2, 3) @ torch.zeros(2, 3)
    ~~~~~~~~~~~~~~~~~~^~~~~~~~~~~~~~~~~~~
RuntimeError: mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)
"#;

/// Recorded: `tests/fixtures/tracebacks/chained_permission.log`.
const CHAINED_PERMISSION: &str = r#"Traceback (most recent call last):
  File "/tmp/tmp.7dRAT01Mi7/perm.py", line 8, in load
    with open(path) as f:
         ^^^^^^^^^^
PermissionError: [Errno 13] Permission denied: '/tmp/tmp.7dRAT01Mi7/secret/settings.json'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/tmp/tmp.7dRAT01Mi7/perm.py", line 13, in <module>
    load(sys.argv[1])
  File "/tmp/tmp.7dRAT01Mi7/perm.py", line 11, in load
    raise ConfigLoadError(f"could not read settings from {path}") from e
ConfigLoadError: could not read settings from /tmp/tmp.7dRAT01Mi7/secret/settings.json
"#;

/// Recorded: `tests/fixtures/tracebacks/inductor_enospc.log` (frames shortened).
const INDUCTOR_ENOSPC: &str = r#"Traceback (most recent call last):
  File "/tmp/tmp.7dRAT01Mi7/enospc.py", line 7, in <module>
    print(f(torch.randn(64)).sum())
          ^^^^^^^^^^^^^^^^^^
  File "/work/torchvenv/lib/python3.11/site-packages/torch/_inductor/compile_fx.py", line 1369, in _compile_fx_inner
    raise InductorError(e, currentframe()).with_traceback(
  File "/work/torchvenv/lib/python3.11/site-packages/torch/_inductor/codecache.py", line 628, in write_atomic
    with tmp_path.open(write_mode, encoding="utf-8" if encode_utf_8 else None) as f:
torch._inductor.exc.InductorError: OSError: [Errno 28] No space left on device

Set TORCHDYNAMO_VERBOSE=1 for the full Dynamo stack trace (please do this especially if you're reporting a bug to PyTorch). For even more developer context, set TORCH_LOGS="+dynamo"
"#;

/// sglang's scheduler header names what failed (a fatal python_exception): it stays decisive.
const SCHEDULER_VALUE_ERROR: &str = r#"[2025-04-01 07:08:56 DP0 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2255, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, pp_rank, dp_rank)
ValueError: batch of 3 rows has no labels
"#;

/// A fatal wrapper line printed alone, then a separate traceback (a later, unrelated chain) that
/// mentions CUDA graph capture: evidence after the first fatal line outside its chain is a
/// consequence, not the cause.
const EVIDENCE_AFTER_THE_FATAL_LINE: &str = r#"torch._inductor.exc.CppCompileError: C++ compile error
Traceback (most recent call last):
  File "/tmp/launcher.py", line 3, in <module>
    main()
RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture.
"#;

/// Two tracebacks not linked by a chain marker: the second one's evidence is not part of the first
/// one's failure.
const TWO_CHAINS: &str = r#"Traceback (most recent call last):
  File "/tmp/a.py", line 3, in <module>
    compile()
torch._inductor.exc.CppCompileError: C++ compile error

Traceback (most recent call last):
  File "/tmp/b.py", line 3, in <module>
    capture()
RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture.
"#;

/// vLLM's worker (vllm/v1/executor/multiproc_executor.py): `logger.exception("WorkerProc failed to
/// start.")` announces the failure on a line of its own; its traceback follows with the frames of
/// the model loader, and the exception line says what failed.
fn worker_announces(exception: &str) -> String {
    let p = "(Worker pid=60) ERROR 12-04 03:00:12 [multiproc_executor.py:559] ";
    let mut log =
        format!("{p}WorkerProc failed to start.\n{p}Traceback (most recent call last):\n");
    for i in 0..20 {
        log.push_str(&format!(
            "{p}  File \"/venv/lib/python3.12/site-packages/vllm/model_executor/m{i}.py\", line {i}, in load\n{p}    self.load_{i}()\n"
        ));
    }
    log.push_str(&format!("{p}{exception}\n"));
    log.push_str(
        "(EngineCore pid=51) ERROR 12-04 03:00:13 [core.py:708] EngineCore failed to start.\n",
    );
    log
}

#[test]
fn a_failure_announced_on_its_own_line_is_shown_by_its_exception_line() {
    // (exception line, signature, decisive line number, decisive line ends with)
    let cases = [
        (
            "KeyError: 'model.layers.0.mlp.gate_up_proj.weight'",
            Signature::PythonException,
            43,
            "KeyError: 'model.layers.0.mlp.gate_up_proj.weight'",
        ),
        // A named cause wins by precedence, on the same line.
        (
            "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
            Signature::ModelLoadFailed,
            43,
            "HeaderTooLarge",
        ),
    ];
    for (exception, signature, number, ends) in cases {
        let j = judge(&worker_announces(exception), 1);
        let line = j.line.clone().expect("a decisive line");
        assert_eq!(
            (j.verdict, j.signature, line.number),
            (Verdict::Failed, Some(signature), number),
            "{exception}: {}",
            j.reason
        );
        assert!(line.text.ends_with(ends), "{}", line.text);
        assert!(
            j.context.iter().any(|c| c == &line.text),
            "the context shows the decisive line: {:?}",
            j.context
        );
    }
    // An announcer with no traceback after it stays decisive.
    let j = judge(
        "(Worker pid=60) ERROR 12-04 03:00:12 [multiproc_executor.py:559] WorkerProc failed to start.\n",
        1,
    );
    assert_eq!(j.line.map(|l| l.number), Some(1), "{}", j.reason);
}

#[test]
fn the_cause_of_a_traceback_chain_is_its_most_specific_hit_on_its_first_line() {
    // (what, log, exit code, signature, decisive line number, decisive line starts with)
    let cases = [
        (
            "BackendCompilerFailed wrapping a CUDA graph capture failure",
            COMPILER_WRAPS_CAPTURE,
            1,
            Signature::GraphCapture,
            7,
            "RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture",
        ),
        (
            "the same, the process still exiting 0",
            COMPILER_WRAPS_CAPTURE,
            0,
            Signature::GraphCapture,
            7,
            "RuntimeError: Cannot call",
        ),
        (
            "InternalTorchDynamoError wrapping a capture failure, then During handling",
            DYNAMO_WRAPS_CAPTURE,
            1,
            Signature::GraphCapture,
            4,
            "torch._dynamo.exc.InternalTorchDynamoError: RuntimeError: Cannot call",
        ),
        (
            "InductorError wrapping ENOSPC",
            INDUCTOR_ENOSPC,
            1,
            Signature::DiskFull,
            9,
            "torch._inductor.exc.InductorError: OSError: [Errno 28]",
        ),
        (
            "a PermissionError, the direct cause of a loader's own error",
            CHAINED_PERMISSION,
            1,
            Signature::PermissionDenied,
            5,
            "PermissionError: [Errno 13] Permission denied",
        ),
        (
            "a source line raising CUDA OOM is not the error; the ValueError is",
            SOURCE_LINE,
            1,
            Signature::PythonException,
            6,
            "ValueError: batch of 3 rows",
        ),
        (
            // Issue 26: the exception raised while the first was handled ended the script.
            "During handling: the last exception line is decisive, not the header nor the first",
            DURING_HANDLING,
            1,
            Signature::PythonException,
            15,
            "RuntimeError: mm: mat1 and mat2",
        ),
        (
            "a fatal header that names what failed stays decisive",
            SCHEDULER_VALUE_ERROR,
            1,
            Signature::PythonException,
            1,
            "[2025-04-01 07:08:56 DP0 TP0] Scheduler hit an exception:",
        ),
        (
            "evidence after the first fatal line, outside its chain, does not count",
            EVIDENCE_AFTER_THE_FATAL_LINE,
            1,
            Signature::CompileError,
            1,
            "torch._inductor.exc.CppCompileError",
        ),
        (
            "another chain's evidence does not join the winner's chain",
            TWO_CHAINS,
            1,
            Signature::CompileError,
            4,
            "torch._inductor.exc.CppCompileError",
        ),
    ];
    for (what, log, code, signature, number, starts) in cases {
        let j = judge(log, code);
        let line = j.line.clone().expect("a decisive line");
        assert_eq!(
            (j.verdict, j.signature, line.number),
            (Verdict::Failed, Some(signature), number),
            "{what}: {}",
            j.reason
        );
        assert!(line.text.starts_with(starts), "{what}: {}", line.text);
    }
}

#[test]
fn every_chain_marker_holds_the_word_searched_first() {
    for m in MARKERS {
        assert!(
            MARKER_WORD.find(m.as_bytes()).is_some(),
            "{m:?} would never be looked for"
        );
    }
}
