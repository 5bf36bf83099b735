//! Normalisation, table-driven on real line shapes (each row says where its shape comes from),
//! and the proof that it changes no verdict the catalog and the profiles gave before: every
//! catalog example, every benign line and every profile's signature example classifies the same
//! normalised as raw.

use std::borrow::Cow;

use super::normalize;
use crate::classify::{Classifier, ClassifierSpec, ReadyLine, builtin_catalog};
use crate::profile::builtin_profiles;

/// (raw line, normalised text, rank).
const SHAPES: &[(&str, &str, Option<u32>)] = &[
    // Untouched: no prefix, a message of its own.
    ("RuntimeError: x", "RuntimeError: x", None),
    (
        "  File \"x.py\", line 3, in f",
        "  File \"x.py\", line 3, in f",
        None,
    ),
    // torch.distributed excepthook (torch/distributed/distributed_c10d.py:
    // `f"{excepthook_prefix}: {s}"` with `excepthook_prefix = f"[rank{get_rank()}]"`).
    ("[rank1]: RuntimeError: x", "RuntimeError: x", Some(1)),
    (
        "[rank1]:   File \"x.py\", line 3, in f",
        "  File \"x.py\", line 3, in f",
        Some(1),
    ),
    (
        "[rank12]: Traceback (most recent call last):",
        "Traceback (most recent call last):",
        Some(12),
    ),
    // torchrun --tee (torch/distributed/elastic/multiprocessing/tail_log.py: `f"[{name}{idx}]:"`).
    (
        "[default0]:Traceback (most recent call last):",
        "Traceback (most recent call last):",
        Some(0),
    ),
    (
        "[default1]:  File \"t.py\", line 9, in <module>",
        "  File \"t.py\", line 9, in <module>",
        Some(1),
    ),
    // c10 warning after the rank prefix: a WARNING record, kept from its header on.
    (
        "[rank0]:[W301 10:00:00.000000000 ProcessGroupNCCL.cpp:4561] Warning: x",
        "[W301 10:00:00.000000000 ProcessGroupNCCL.cpp:4561] Warning: x",
        Some(0),
    ),
    // c10 error record: its header goes.
    (
        "[rank1]:[E301 10:00:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout",
        "[Rank 1] Watchdog caught collective operation timeout",
        Some(1),
    ),
    // docker compose v2 / v1 (`docker compose logs`: service-index padded, `| `).
    ("vllm-1  | RuntimeError: x", "RuntimeError: x", None),
    (
        "sglang_1 | [2025-03-01 10:00:00 TP1] RuntimeError: x",
        "RuntimeError: x",
        Some(1),
    ),
    // kubectl logs --prefix.
    ("[pod/vllm-0/vllm] ValueError: bad", "ValueError: bad", None),
    // vLLM's process prefixes (`_add_prefix`: `f"({name} pid={pid}) "`) and Ray's.
    (
        "(EngineCore_0 pid=12) ValueError: bad",
        "ValueError: bad",
        None,
    ),
    (
        "(EngineCore_DP0 pid=12) ValueError: bad",
        "ValueError: bad",
        None,
    ),
    (
        "(VllmWorker rank=1 pid=34) ValueError: bad",
        "ValueError: bad",
        Some(1),
    ),
    (
        "(Worker_TP3 pid=34) ValueError: bad",
        "ValueError: bad",
        Some(3),
    ),
    (
        "(Worker_PP1_TP2 pid=34) ValueError: bad",
        "ValueError: bad",
        Some(2),
    ),
    // Pipeline stages alone (vllm-windows issue #72, as pasted): the stage is the rank.
    (
        "(Worker_PP1 pid=23220) ValueError: bad",
        "ValueError: bad",
        Some(1),
    ),
    (
        "(EngineCore_PP1 pid=12) ValueError: bad",
        "ValueError: bad",
        None,
    ),
    (
        "(RayWorkerWrapper pid=1, ip=10.0.0.1) ValueError: bad",
        "ValueError: bad",
        None,
    ),
    ("(pid=4321) ValueError: bad", "ValueError: bad", None),
    // vLLM's logger (`%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s`): an
    // ERROR record loses its header, keeping the traceback's indentation (NewLineFormatter
    // repeats the header on every line of a multi-line message).
    (
        "ERROR 03-01 10:00:00 [core.py:700] EngineCore failed to start.",
        "EngineCore failed to start.",
        None,
    ),
    (
        "ERROR 03-01 10:00:00 [core.py:700]   File \"x.py\", line 3, in f",
        "  File \"x.py\", line 3, in f",
        None,
    ),
    (
        "ERROR 03-01 10:00:00 api_server.py:224] RuntimeError: x",
        "RuntimeError: x",
        None,
    ),
    (
        "(EngineCore_0 pid=12) ERROR 03-01 10:00:00 [core.py:700] ValueError: bad",
        "ValueError: bad",
        None,
    ),
    // ... an INFO/WARNING record keeps its header (the level word stays at the head).
    (
        "(EngineCore_0 pid=12) INFO 03-01 10:00:00 [gpu_model_runner.py:1953] Starting to load model x",
        "INFO 03-01 10:00:00 [gpu_model_runner.py:1953] Starting to load model x",
        None,
    ),
    (
        "WARNING 03-01 10:00:00 [utils.py:10] Caught RuntimeError: retrying request",
        "WARNING 03-01 10:00:00 [utils.py:10] Caught RuntimeError: retrying request",
        None,
    ),
    // sglang (`[%(asctime)s{prefix}] `, prefix ` DP{dp} PP{pp} TP{tp} EP{ep}`): the TP rank.
    (
        "[2025-03-01 10:00:00 TP1] RuntimeError: x",
        "RuntimeError: x",
        Some(1),
    ),
    (
        "[2025-03-01 10:00:00 DP0 TP3 EP3] RuntimeError: x",
        "RuntimeError: x",
        Some(3),
    ),
    (
        "[2025-03-01 10:00:00 DP1 PP0 TP5] RuntimeError: x",
        "RuntimeError: x",
        Some(5),
    ),
    (
        "[2025-03-01 10:00:00] The server is fired up and ready to roll!",
        "The server is fired up and ready to roll!",
        None,
    ),
    // srun --label (`N: `, right-aligned to the widest task id).
    ("1: RuntimeError: x", "RuntimeError: x", Some(1)),
    ("  12: RuntimeError: x", "RuntimeError: x", Some(12)),
    ("0: [rank3]: RuntimeError: x", "RuntimeError: x", Some(3)),
    // Quoting in an issue or an e-mail.
    ("> RuntimeError: x", "RuntimeError: x", None),
    (
        ">   File \"x.py\", line 3, in f",
        "  File \"x.py\", line 3, in f",
        None,
    ),
    // syslog / journalctl short format.
    (
        "Mar 01 10:00:00 gpu1 vllm[123]: RuntimeError: x",
        "RuntimeError: x",
        None,
    ),
    (
        "Mar  1 10:00:00 gpu1 docker-vllm.service: RuntimeError: x",
        "RuntimeError: x",
        None,
    ),
    // ISO 8601 timestamps of every shape.
    (
        "2025-03-01T10:00:00Z RuntimeError: x",
        "RuntimeError: x",
        None,
    ),
    (
        "2025-03-01T10:00:00.123456789Z RuntimeError: x",
        "RuntimeError: x",
        None,
    ),
    (
        "2025-03-01 10:00:00,123 RuntimeError: x",
        "RuntimeError: x",
        None,
    ),
    (
        "2025-03-01T10:00:00+00:00 RuntimeError: x",
        "RuntimeError: x",
        None,
    ),
    (
        "2025-03-01T10:00:00.123-0700 RuntimeError: x",
        "RuntimeError: x",
        None,
    ),
    (
        "2025/03/01 10:00:00 RuntimeError: x",
        "RuntimeError: x",
        None,
    ),
    (
        "2025-03-01 10:00:00,123 ERROR RuntimeError: x",
        "RuntimeError: x",
        None,
    ),
    (
        "2025-03-01 10:00:00,123 [ERROR] RuntimeError: x",
        "RuntimeError: x",
        None,
    ),
    (
        "2025-03-01 10:00:00,123 WARNING Failed: ImportError: x",
        "2025-03-01 10:00:00,123 WARNING Failed: ImportError: x",
        None,
    ),
    // A CloudWatch / Loki line: ISO timestamp, then the container's own prefixes.
    (
        "2025-03-01T10:00:00.000Z [rank1]: RuntimeError: x",
        "RuntimeError: x",
        Some(1),
    ),
    // TGI's tracing output (compact format: span fields at the end).
    (
        "2025-03-01T10:00:00.000000Z ERROR shard-manager: text_generation_launcher: Shard complete standard error output: rank=1",
        "Shard complete standard error output:",
        Some(1),
    ),
    (
        "2025-03-01T10:00:00.000000Z ERROR text_generation_launcher: Error when initializing model",
        "Error when initializing model",
        None,
    ),
    (
        "2025-03-01T10:00:00.000000Z  INFO shard-manager: text_generation_launcher: Waiting for shard to be ready... rank=0",
        "2025-03-01T10:00:00.000000Z  INFO shard-manager: text_generation_launcher: Waiting for shard to be ready...",
        Some(0),
    ),
    (
        "2025-03-01T10:00:00.000000Z ERROR warmup{max_input_length=4095}:warmup: text_generation_router_v3::client: backends/v3/src/client/mod.rs:45: Server error: x",
        "Server error: x",
        None,
    ),
    // glog (Triton, absl): errors lose the header, info keeps it.
    (
        "E0301 10:00:00.000000 140 model_lifecycle.cc:654] failed to load 'm'",
        "failed to load 'm'",
        None,
    ),
    (
        "I0301 10:00:00.000000 1 http_server.cc:4971] Started HTTPService at 0.0.0.0:8000",
        "I0301 10:00:00.000000 1 http_server.cc:4971] Started HTTPService at 0.0.0.0:8000",
        None,
    ),
    // Python logging's default format and uvicorn's.
    ("ERROR:root:RuntimeError: x", "RuntimeError: x", None),
    (
        "ERROR:    Application startup failed. Exiting.",
        "Application startup failed. Exiting.",
        None,
    ),
    (
        "INFO:     Application startup complete.",
        "INFO:     Application startup complete.",
        None,
    ),
    // Postgres's own `FATAL:  ` is its message, not a Python level.
    (
        "FATAL:  could not create any TCP/IP sockets",
        "FATAL:  could not create any TCP/IP sockets",
        None,
    ),
    // Not prefixes.
    (
        "12345:M 01 Mar 2025 10:00:00.000 * Ready to accept connections tcp",
        "12345:M 01 Mar 2025 10:00:00.000 * Ready to accept connections tcp",
        None,
    ),
    (
        "node1:1234:1234 [0] NCCL INFO Bootstrap : Using eth0",
        "node1:1234:1234 [0] NCCL INFO Bootstrap : Using eth0",
        None,
    ),
    ("a | b", "a | b", None),
    ("[5m] of waiting", "[5m] of waiting", None),
];

#[test]
fn prefixes_come_off_with_their_rank() {
    for (raw, text, rank) in SHAPES {
        let n = normalize(raw);
        assert_eq!((n.text.as_ref(), n.rank), (*text, *rank), "{raw}");
    }
}

/// (raw line, normalised text): escape codes written out as text.
const ESCAPES: &[(&str, &str)] = &[
    // rsyslog's `#033` (vLLM's ColoredFormatter through rsyslog).
    (
        "#033[1;31mERROR#033[0m RuntimeError: x",
        "ERROR RuntimeError: x",
    ),
    (
        "#033[32mINFO#033[0m #033[2m03-01 10:00:00 [core.py:70]#033[0m Application startup complete.",
        "INFO 03-01 10:00:00 [core.py:70] Application startup complete.",
    ),
    // Caret notation (`cat -v`, less).
    (
        "^[[0;32mINFO^[[0m:     Application startup complete.",
        "INFO:     Application startup complete.",
    ),
    ("^[[1;31mRuntimeError^[[0m: x", "RuntimeError: x"),
    // The C / shell / JSON / Python-repr spellings.
    ("\\x1b[31mRuntimeError: x\\x1b[0m", "RuntimeError: x"),
    ("\\033[31mRuntimeError: x\\033[0m", "RuntimeError: x"),
    ("\\e[31mRuntimeError: x\\e[0m", "RuntimeError: x"),
    ("\\u001b[31mRuntimeError: x\\u001b[0m", "RuntimeError: x"),
    // Other CSI: erase line, cursor up (tqdm redraws).
    ("\\x1b[2K\\x1b[1ALoading", "Loading"),
    // OSC 8 hyperlink with BEL.
    (
        "see \\x1b]8;;http://x\\x07docs\\x1b]8;;\\x07 now",
        "see docs now",
    ),
    // Orphans: the ESC byte dropped, the rest left.
    ("[1;31mERROR[0m RuntimeError: x", "ERROR RuntimeError: x"),
    (
        "[32mINFO[0m Application startup complete.",
        "INFO Application startup complete.",
    ),
    // ... but not text that only looks like one.
    ("timeout [5m] reached", "timeout [5m] reached"),
];

#[test]
fn escape_text_is_flattened() {
    for (raw, text) in ESCAPES {
        assert_eq!(super::escapes::flatten(raw), *text, "{raw}");
    }
}

#[test]
fn escapes_then_prefixes() {
    let n = normalize(
        "#033[0;36m(EngineCore_0 pid=12)#033[0;0m ERROR 03-01 10:00:00 [core.py:700] ValueError: bad",
    );
    assert_eq!(n.text, "ValueError: bad");
    let n = normalize("[rank1]: #033[1;31mRuntimeError#033[0m: x");
    assert_eq!((n.text.as_ref(), n.rank), ("RuntimeError: x", Some(1)));
}

#[test]
fn nothing_is_copied_without_escape_text() {
    for (raw, _, _) in SHAPES {
        assert!(matches!(normalize(raw).text, Cow::Borrowed(_)), "{raw}");
    }
}

#[test]
fn record_headers_are_told() {
    for (raw, record) in [
        ("INFO 03-01 10:00:00 [core.py:1] x", true),
        ("[2025-03-01 10:00:00 TP0] x", true),
        ("2025-03-01T10:00:00Z x", true),
        ("vllm-1  | e is needed, which is larger", false),
        ("[rank1]: e is needed", false),
        ("e is needed", false),
    ] {
        assert_eq!(normalize(raw).record, record, "{raw}");
    }
}

/// A classifier for one profile, with the catalog: what `firedup run --profile` builds.
fn classifier_for(profile: Option<&crate::profile::Profile>) -> Classifier {
    let mut signatures = builtin_catalog().signatures;
    let mut spec = ClassifierSpec::default();
    if let Some(p) = profile {
        signatures.extend(p.signatures.iter().cloned());
        spec.ready_lines = p.ready.iter().map(|r| ReadyLine::new(r).unwrap()).collect();
        spec.noise = p.noise.clone();
        spec.phases = p
            .phases
            .iter()
            .map(|ph| (ph.name.clone(), ph.pattern.clone()))
            .collect();
    }
    spec.signatures = signatures;
    Classifier::new(&spec).unwrap()
}

/// Every line the catalog and the profiles were written against means what it meant: the same
/// failure hits, ready lines and phase, normalised or raw.
#[test]
fn normalising_changes_no_catalog_or_profile_line() {
    let catalog = builtin_catalog();
    let mut lines: Vec<String> = catalog.benign.clone();
    for s in &catalog.signatures {
        lines.extend(s.examples.iter().cloned());
    }
    let profiles = builtin_profiles();
    for p in &profiles {
        for s in &p.signatures {
            lines.extend(s.examples.iter().cloned());
        }
    }
    let mut classifiers = vec![classifier_for(None)];
    classifiers.extend(profiles.iter().map(|p| classifier_for(Some(p))));
    for c in &classifiers {
        for line in &lines {
            let raw = c.classify(line);
            let normal = c.classify(&normalize(line).text);
            assert_eq!(
                (&normal.hits, &normal.ready, normal.phase),
                (&raw.hits, &raw.ready, raw.phase),
                "{line:?} normalised to {:?}",
                normalize(line).text
            );
        }
    }
}

/// The catalog's exception-form lines, prefixed by each relay and launcher, classify as bare.
#[test]
fn prefixed_lines_classify_as_bare_ones() {
    let c = classifier_for(None);
    let bare = [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.",
        "ModuleNotFoundError: No module named 'vllm'",
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        "KeyError: 'model_type'",
        "PermissionError: [Errno 13] Permission denied: '/models'",
    ];
    let prefixes = [
        "vllm-1  | ",
        "sglang_1 | ",
        "[pod/vllm-0/vllm] ",
        "(EngineCore_0 pid=12) ",
        "(VllmWorker rank=1 pid=34) ",
        "[rank1]: ",
        "1: ",
        "  12: ",
        "> ",
        "Mar 01 10:00:00 gpu1 vllm[123]: ",
        "2025-03-01T10:00:00.123Z ",
        "[2025-03-01 10:00:00 DP0 TP3 EP3] ",
        "ERROR 03-01 10:00:00 [core.py:700] ",
        "E0301 10:00:00.000000 140 file.cc:12] ",
        "ERROR:root:",
        "2025-03-01T10:00:00.000000Z ERROR text_generation_launcher: ",
        "#033[1;31m",
        "vllm-1  | (EngineCore_0 pid=12) ERROR 03-01 10:00:00 [core.py:700] ",
    ];
    for line in bare {
        let want = c.classify(line).hits;
        assert!(!want.is_empty(), "{line}");
        for p in prefixes {
            let prefixed = format!("{p}{line}");
            let got = c.classify(&normalize(&prefixed).text).hits;
            assert_eq!(got, want, "{prefixed}");
        }
    }
    // The same lines logged as warnings stay what they were.
    for line in bare {
        for p in ["WARNING 03-01 10:00:00 [x.py:1] Caught ", "INFO:     "] {
            let prefixed = format!("{p}{line}");
            let got = c.classify(&normalize(&prefixed).text).hits;
            assert_eq!(got, c.classify(&prefixed).hits, "{prefixed}");
        }
    }
}
