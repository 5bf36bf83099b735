//! Issue 24 item 5: an INFO or WARNING record that quotes an exception (vLLM's request log of a
//! prompt, a warning naming what a client sent) does not fail a healthy server; an ERROR record,
//! a traceback or an unquoted fatal line still does. Through the real binary: a script prints
//! such lines inside the `--hold` window after ready and keeps serving.

use crate::common;

use common::Env;

/// vLLM's request log line (vllm/entrypoints/logger.py: `Received request %s: prompt: %r, ...`).
const PROMPT_LOG: &str = "INFO 03-01 10:00:01 [logger.py:39] Received request cmpl-abc-0: prompt: 'Why does torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB happen?', params: SamplingParams(n=1, temperature=0.7), prompt_token_ids: [1, 2, 3], lora_request: None.";
const WARNING_QUOTE: &str = "WARNING 03-01 10:00:02 [serving.py:10] Client sent \"OSError: [Errno 98] Address already in use\" in its message";

/// `firedup run --json --ready-line READY --no-probe --hold 3s` of a server that prints READY,
/// then `lines`, then keeps serving; the server is stopped afterwards.
fn serve_then_print(env: &Env, lines: &[&str]) -> common::Run {
    let mut body = String::from("echo READY\n");
    for l in lines {
        body.push_str(&format!("printf '%s\\n' '{}'\n", l.replace('\'', "'\\''")));
    }
    body.push_str("exec sleep 60\n");
    let script = env.script("server", &body);
    let r = env
        .run()
        .json()
        .ready_line("READY")
        .flag("no-probe")
        .opt("hold", "3s")
        .command(&[&script])
        .output();
    if !r.run_id().is_empty() {
        env.fd("stop").opt("grace", "1s").arg(r.run_id()).output();
    }
    r
}

#[test]
fn calm_records_quoting_exceptions_leave_a_healthy_server_ready() {
    let env = Env::new();
    let r = serve_then_print(&env, &[PROMPT_LOG, WARNING_QUOTE]);
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    assert_eq!(r.code, 0, "{}", r.explain());
}

#[test]
fn an_error_record_or_a_traceback_is_still_fatal() {
    let env = Env::new();
    let r = serve_then_print(
        &env,
        &[
            PROMPT_LOG,
            "ERROR 03-01 10:00:03 [core.py:700] EngineCore failed",
            "Traceback (most recent call last):",
            "  File \"/x/worker.py\", line 3, in run",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.",
        ],
    );
    assert_eq!(r.verdict(), "failed", "{}", r.explain());
    assert_eq!(r.signature(), Some("cuda_oom"), "{}", r.explain());
    // The decisive line is the traceback's, not the logged prompt.
    let line = r.json["line"]["text"].as_str().unwrap_or("");
    assert!(line.starts_with("torch.OutOfMemoryError"), "{line}");

    let env = Env::new();
    let r = serve_then_print(
        &env,
        &["WARNING 03-01 10:00:02 [api.py:5] OSError: [Errno 98] Address already in use"],
    );
    assert_eq!(r.verdict(), "failed", "{}", r.explain());
    assert_eq!(r.signature(), Some("port_in_use"), "{}", r.explain());
}
