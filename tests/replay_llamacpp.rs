//! The logs of a real llama-server (`tests/fixtures/servers/llamacpp-real/`, recorded by
//! `tests/live_llamacpp.rs`) replayed through the real binary without the server: each is
//! printed by `tests/fixtures/replay.sh`, which then ends as the server did (`CASE.exit`: its
//! exit code, a signal as a shell's 128+N, or alive), and `firedup run --profile llamacpp
//! --no-probe` must name the verdict, signature, decisive line and phase that the live run named.
//!
//! Under `--no-probe` the log's ready line decides (live, the server's /health does). A kill the
//! log cannot show the cause of stays `sigkill` here: the memory cgroup's OOM counter that makes
//! the live run `oom_killed` is not in the log.

mod common;
use common::{Env, alive, fixture};

struct Case {
    /// `tests/fixtures/servers/llamacpp-real/NAME.log` and `NAME.exit`.
    name: &'static str,
    extra: &'static [&'static str],
    verdict: &'static str,
    signature: Option<&'static str>,
    /// A substring of the decisive line.
    line: &'static str,
    phase: Option<&'static str>,
    /// For ready runs: the phases of the timeline, in order.
    timeline: &'static [&'static str],
}

const READY_TIMELINE: &[&str] = &["load_model", "init_slots", "ready"];
/// Ready, then killed: the kill inside the hold is the verdict, as live.
const HOLD: &[&str] = &["--hold", "5s"];

const CASES: &[Case] = &[
    Case {
        name: "ready",
        extra: &[],
        verdict: "ready",
        signature: None,
        line: "srv  llama_server: listening on http://127.0.0.1:",
        phase: Some("ready"),
        timeline: READY_TIMELINE,
    },
    Case {
        name: "ready_request",
        extra: &[],
        verdict: "ready",
        signature: None,
        line: "srv  llama_server: listening on http://127.0.0.1:",
        phase: Some("ready"),
        timeline: READY_TIMELINE,
    },
    Case {
        name: "port_in_use",
        extra: &[],
        verdict: "failed",
        signature: Some("port_in_use"),
        line: "couldn't bind HTTP server socket, hostname: 127.0.0.1",
        phase: None,
        timeline: &[],
    },
    Case {
        name: "bad_flag",
        extra: &[],
        verdict: "failed",
        signature: Some("config_error"),
        line: "error: invalid argument: --no-such-flag",
        phase: None,
        timeline: &[],
    },
    Case {
        name: "missing_model",
        extra: &[],
        verdict: "failed",
        signature: Some("model_not_found"),
        line: "failed to open GGUF file '/work/no-such-model.gguf' (No such file or directory)",
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        name: "truncated_gguf",
        extra: &[],
        verdict: "failed",
        signature: Some("model_load_failed"),
        line: "data is not within the file bounds, model is corrupted or incomplete",
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        name: "garbage_model",
        extra: &[],
        verdict: "failed",
        signature: Some("model_load_failed"),
        line: "gguf_init_from_reader: invalid magic characters: 'not ', expected 'GGUF'",
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        name: "context_too_big",
        extra: &[],
        verdict: "failed",
        signature: Some("host_oom"),
        line: "ggml_aligned_malloc: insufficient memory (attempted to allocate 65536.00 MB)",
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        name: "cgroup_oom",
        extra: &[],
        verdict: "killed",
        signature: Some("sigkill"),
        line: "",
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        name: "sigkill_mid_load",
        extra: &[],
        verdict: "killed",
        signature: Some("sigkill"),
        line: "load_model: loading model '/work/model.gguf'",
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        name: "sigsegv_mid_load",
        extra: &[],
        verdict: "killed",
        signature: Some("segfault"),
        line: "load_model: loading model '/work/model.gguf'",
        phase: Some("load_model"),
        timeline: &[],
    },
    Case {
        name: "sigkill_after_ready",
        extra: HOLD,
        verdict: "killed",
        signature: Some("sigkill"),
        line: "",
        phase: Some("ready"),
        timeline: &[],
    },
    Case {
        name: "sigsegv_after_ready",
        extra: HOLD,
        verdict: "killed",
        signature: Some("segfault"),
        line: "",
        phase: Some("ready"),
        timeline: &[],
    },
    Case {
        name: "sigstop_mid_load",
        extra: &["--stall", "2s"],
        verdict: "stalled",
        signature: None,
        line: "load_model: loading model '/work/model.gguf'",
        phase: Some("load_model"),
        timeline: &[],
    },
];

/// `CASE.exit` as `replay.sh`'s ending: an exit code, 128+N for signal N, `hang` for alive.
fn ending(name: &str) -> String {
    let exit = std::fs::read_to_string(fixture(&format!("servers/llamacpp-real/{name}.exit")))
        .unwrap_or_else(|e| panic!("{name}.exit: {e}"));
    let exit = exit.trim();
    match exit.strip_prefix("signal ") {
        Some(n) => (128 + n.parse::<i32>().unwrap()).to_string(),
        None if exit == "running" => "hang".into(),
        None => exit.to_string(),
    }
}

fn check(env: &Env, c: &Case) -> Result<(), String> {
    let log = fixture(&format!("servers/llamacpp-real/{}.log", c.name));
    let then = ending(c.name);
    let replay = fixture("replay.sh");
    let mut args = vec![
        "run",
        "--json",
        "--profile",
        "llamacpp",
        "--no-probe",
        "--grace",
        "1s",
        "--timeout",
        "120s",
    ];
    args.extend_from_slice(c.extra);
    args.extend_from_slice(&["--", "sh", &replay, &log, &then]);
    let r = env.firedup(&args);
    if let Some(pid) = r.json["pid"].as_u64() {
        if r.verdict() == "ready" {
            let s = env.firedup(&["stop", r.run_id()]);
            if s.code != 0 {
                return Err(format!("stop failed: {}", s.explain()));
            }
        }
        if alive(pid) {
            return Err(format!("process {pid} left running: {}", r.explain()));
        }
    }
    let line = r.json["line"]["text"].as_str().unwrap_or("");
    let timeline: Vec<&str> = r.json["timeline"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p["phase"].as_str()).collect())
        .unwrap_or_default();
    let mut wrong = Vec::new();
    if (r.verdict(), r.signature()) != (c.verdict, c.signature) {
        wrong.push(format!(
            "{} / {:?} (want {} / {:?})",
            r.verdict(),
            r.signature(),
            c.verdict,
            c.signature
        ));
    }
    if !line.contains(c.line) {
        wrong.push(format!("decisive line {line:?} (want {:?} in it)", c.line));
    }
    if r.json["phase"].as_str() != c.phase {
        wrong.push(format!("phase {} (want {:?})", r.json["phase"], c.phase));
    }
    if !c.timeline.is_empty() && timeline != c.timeline {
        wrong.push(format!("timeline {timeline:?} (want {:?})", c.timeline));
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("{}\n  {}", wrong.join("\n  "), r.explain()))
    }
}

#[test]
fn real_llama_server_logs_replayed_reach_the_live_verdicts() {
    let env = Env::new();
    let env = &env;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    // A few side by side, not all at once: on a small loaded machine no hold is starved.
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while let Some(c) =
                    CASES.get(next.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
                {
                    if let Err(e) = check(env, c) {
                        failures.lock().unwrap().push(format!("{}: {e}", c.name));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

#[test]
fn every_recorded_log_has_a_case() {
    let dir = fixture("servers/llamacpp-real");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".log") {
            assert!(
                CASES.iter().any(|c| c.name == stem),
                "{dir}/{name} has no case in tests/replay_llamacpp.rs"
            );
        }
    }
}
