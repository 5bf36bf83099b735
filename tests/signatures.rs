//! Every failure signature of the README through the real binary: each line-level signature from a
//! fake server that prints a real example line from the catalog and exits 1, and the signal-level
//! ones from real signals.

use crate::common;
use common::Env;
use firedup::verdict::Signature;

#[test]
fn every_line_signature_is_reported_through_the_binary() {
    let catalog: toml::Value =
        toml::from_str(include_str!("../crates/judge/src/catalog/signatures.toml")).unwrap();
    let env = Env::new();
    let mut checked = std::collections::BTreeSet::new();
    let mut failures = Vec::new();
    for entry in catalog["signature"].as_array().unwrap() {
        let name = entry["name"].as_str().unwrap();
        if entry["strength"].as_str() != Some("fatal") || checked.contains(name) {
            continue;
        }
        let example = entry["examples"][0].as_str().unwrap();
        let r = env.cmd_json(
            &[
                "run",
                "--json",
                "--ready-line",
                "NEVER-PRINTED",
                "--",
                "sh",
                "-c",
                "printf '%s\\n' \"$LINE\"; exit 1",
            ],
            &[("LINE", example)],
        );
        if (r.verdict(), r.signature()) != ("failed", Some(name))
            || r.json["line"]["text"] != example
        {
            failures.push(format!(
                "{name}: {example:?} -> {} {:?}",
                r.verdict(),
                r.signature()
            ));
        }
        checked.insert(name.to_string());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every signature that a log line can name (the signal ones come from how a process ended).
    for sig in Signature::ALL
        .iter()
        .filter(|s| !s.is_signal_class() && **s != Signature::RankExited)
        .map(|s| s.as_str())
    {
        assert!(
            checked.contains(sig),
            "no fatal catalog entry exercised for {sig}"
        );
    }
}

#[test]
fn evidence_lines_name_the_cause_only_when_the_process_dies() {
    let env = Env::new();
    // A bare Python exception followed by a crash: python_exception.
    let r = env
        .run()
        .json()
        .until("exit")
        .shell("echo 'Traceback (most recent call last):'; echo 'KeyError: 0'; exit 1")
        .output();
    assert_eq!(
        (r.verdict(), r.signature()),
        ("failed", Some("python_exception")),
        "{}",
        r.explain()
    );
    // The same lines in a job that then succeeds: a handled exception, not a failure.
    let r = env
        .run()
        .json()
        .until("exit")
        .shell("echo 'Traceback (most recent call last):'; echo 'KeyError: 0'; echo recovered")
        .output();
    assert_eq!(r.verdict(), "succeeded", "{}", r.explain());
}

#[test]
fn precedence_picks_the_root_cause_over_the_whole_failure() {
    let env = Env::new();
    let r = env.run().json().ready_line("NEVER-PRINTED").shell("echo 'Traceback (most recent call last):'; \
         echo 'RuntimeError: CUDA error: operation not permitted when stream is capturing'; \
         echo 'Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 1.00 GiB'; exit 1").output();
    assert_eq!(
        (r.verdict(), r.signature()),
        ("failed", Some("cuda_oom")),
        "{}",
        r.explain()
    );
    let secondary: Vec<&str> = r.json["secondary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(secondary.contains(&"graph_capture"), "{secondary:?}");
}

#[test]
fn user_fail_lines_end_the_watch() {
    let env = Env::new();
    let r = env
        .run()
        .json()
        .opt("fail-line", "^FATAL-MINE")
        .ready_line("READY")
        .shell("echo 'FATAL-MINE disk array offline'; sleep 300")
        .output();
    assert_eq!(
        (r.code, r.verdict(), r.signature()),
        (1, "failed", None),
        "{}",
        r.explain()
    );
    assert!(r.json["reason"].as_str().unwrap().contains("--fail-line"));
}

/// The catalog's benign lines (real lines from healthy servers that look dangerous: pinned-memory
/// fallbacks, "MemoryError, retrying", help texts naming CUDA OOM, Ollama logging a runner that
/// failed while it keeps serving) carry no cause through the whole pipeline: a job that prints all
/// of them and exits 1 has exited with no signature; one that exits 0 succeeded.
#[test]
fn benign_lines_name_no_cause_through_the_binary() {
    let catalog: toml::Value =
        toml::from_str(include_str!("../crates/judge/src/catalog/signatures.toml")).unwrap();
    let benign: Vec<&str> = catalog["benign"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let env = Env::new();
    let log = env.path("benign.log");
    std::fs::write(&log, benign.join("\n") + "\n").unwrap();
    for (exit, want) in [("1", "exited"), ("0", "succeeded")] {
        let r = env.replay(log.to_str().unwrap(), exit);
        assert_eq!(
            (r.verdict(), r.signature()),
            (want, None),
            "{}",
            r.explain()
        );
    }
}

/// Evidence lines of the families the catalog grew (a ggml GPU buffer that does not fit, a failed
/// fork, a Triton model that did not load, a Go panic) name the cause when the process then
/// fails, and the decisive line is the one that shows it, not the fatal summary after it.
#[test]
fn evidence_families_name_their_cause_when_the_process_fails() {
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &[
                "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 8485076992",
                "llama_init_from_model: failed to initialize the context: failed to allocate compute pp buffers",
                "common_init_from_params: failed to create context with model '/models/big.gguf'",
                "srv    load_model: failed to load model, '/models/big.gguf'",
            ],
            "cuda_oom",
            "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 8485076992",
        ),
        (
            &[
                "E0301 10:00:02.500000 1 model_lifecycle.cc:641] failed to load 'densenet_onnx' version 1: Invalid argument: model 'densenet_onnx', tensor 'data_0': the model expects 4 dimensions (shape [1,3,224,224]) but the model configuration specifies 3 dimensions (shape [3,224,224])",
                "error: creating server: Internal - failed to load all models",
            ],
            "model_load_failed",
            "E0301 10:00:02.500000 1 model_lifecycle.cc:641] failed to load 'densenet_onnx' version 1: Invalid argument: model 'densenet_onnx', tensor 'data_0': the model expects 4 dimensions (shape [1,3,224,224]) but the model configuration specifies 3 dimensions (shape [3,224,224])",
        ),
        (
            &[
                "WARNING 03-01 10:00:00 [utils.py:40] fork failed: [Errno 12] Cannot allocate memory",
            ],
            "host_oom",
            "WARNING 03-01 10:00:00 [utils.py:40] fork failed: [Errno 12] Cannot allocate memory",
        ),
        (
            &[
                "panic: runtime error: invalid memory address or nil pointer dereference",
                "goroutine 1 [running]:",
            ],
            "python_exception",
            "panic: runtime error: invalid memory address or nil pointer dereference",
        ),
    ];
    let env = Env::new();
    let mut failures = Vec::new();
    for (i, (lines, want, decisive)) in cases.iter().enumerate() {
        let log = env.path(&format!("evidence-{i}.log"));
        std::fs::write(&log, lines.join("\n") + "\n").unwrap();
        let r = env.replay(log.to_str().unwrap(), "2");
        if (r.verdict(), r.signature()) != ("failed", Some(*want))
            || r.json["line"]["text"] != *decisive
        {
            failures.push(format!("{want}: {}", r.explain()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A cause whose message needs other advice than its signature's usual hint gets it in the reason:
/// a KV cache too small for the context length is `cuda_oom`, but lowering the memory fraction
/// makes it worse; sglang's OOM while capturing CUDA graphs names its own two knobs.
#[test]
fn the_reason_gives_the_advice_the_message_needs() {
    let env = Env::new();
    let cases = [
        (
            "ValueError: The model's max seq len (131072) is larger than the maximum number of tokens that can be stored in KV cache (20464). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
            "raise the memory fraction (--gpu-memory-utilization) or lower the context length (--max-model-len)",
        ),
        (
            "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 1024.00 MiB. GPU 0 has a total capacity of 79.11 GiB of which 356.62 MiB is free.",
            "lower --mem-fraction-static or --cuda-graph-max-bs",
        ),
    ];
    for (line, advice) in cases {
        let r = env.cmd_json(
            &[
                "run",
                "--json",
                "--ready-line",
                "NEVER-PRINTED",
                "--",
                "sh",
                "-c",
                "printf '%s\\n' \"$LINE\"; exit 1",
            ],
            &[("LINE", line)],
        );
        assert_eq!((r.verdict(), r.signature()), ("failed", Some("cuda_oom")));
        let reason = r.json["reason"].as_str().unwrap();
        assert!(reason.contains(advice), "{line:?}: {reason}");
        assert!(!reason.contains("lower the memory fraction"), "{reason}");
    }
}
