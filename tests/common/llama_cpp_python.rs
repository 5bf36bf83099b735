//! The inputs of `tests/live_llama_cpp_python.rs`: the python of a venv that runs
//! llama-cpp-python's server (`FIREDUP_TEST_LLAMA_CPP_PYTHON`, made by
//! `tests/live_servers/install_llama_cpp_python.sh`) and the tiny GGUF (`FIREDUP_TEST_TINY_GGUF`),
//! "not run" without them unless `FIREDUP_TEST_REQUIRE_SERVERS` requires their group; and the
//! server's command line.
//! A case's directories, bounded runs, recording and what is left are `tests/common/llama.rs`'s.

use super::llama::{Case, input_files};

pub struct LlamaCppPython {
    pub python: String,
    pub gguf: String,
}

pub fn llama_cpp_python() -> Option<LlamaCppPython> {
    let [python, gguf] = input_files(
        "llama-cpp-python",
        ["FIREDUP_TEST_LLAMA_CPP_PYTHON", "FIREDUP_TEST_TINY_GGUF"],
        "tests/live_servers/install_llama_cpp_python.sh and make_tiny_gguf.py make them",
    )?;
    Some(LlamaCppPython { python, gguf })
}

/// `python -m llama_cpp.server --model MODEL` on the case's port, a small context on one thread,
/// then `extra`.
pub fn server_args(c: &Case, l: &LlamaCppPython, model: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        &l.python,
        "-m",
        "llama_cpp.server",
        "--model",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        &c.port.to_string(),
        "--n_ctx",
        "256",
        "--n_threads",
        "1",
        "--n_threads_batch",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}
