//! The integration tests, one binary: each module is one subject, run through the real `firedup`
//! binary (`tests/common`). One binary links the library and `tests/common` once instead of once
//! per file, and the judge's catalog is built once per process (issue 28); ripgrep and just are
//! built the same way. `tests/architecture.rs` checks that every `tests/*.rs` is declared here,
//! since with `autotests = false` a file left out would silently never run.
//!
//! Three files stay their own binaries: `architecture` (reads the sources, no firedup), and
//! `library_api` and `library_over_ssh`, which set process-wide environment variables that would
//! leak into every other test's children here.
//!
//! Run one subject: `cargo test --release --test main remote::`.

mod common;

mod adversarial;
mod attach_unlaunched;
mod completions_man;
mod daemon_output;
mod faults;
mod file_opens;
mod fitted_tables;
mod frictions;
mod front_process;
mod group_settle_bench;
mod help_texts;
mod history;
mod hosts;
mod impersonation;
mod lifecycle;
mod listen_address;
mod live_display;
mod live_llama_cpp_python;
mod live_llamacpp;
mod live_ranks;
mod live_sglang;
mod live_vllm;
mod matrix;
mod matrix_real;
mod matrix_templates;
mod multinode;
mod multinode_ending;
mod multinode_runs;
mod multinode_torch;
mod normalised_logs;
mod old_glibc;
mod old_glibc_remote;
mod oom;
mod owner;
mod pasted_logs;
mod phases;
mod port_auto;
mod probes;
mod profiles;
mod quoted_records;
mod ranks;
mod real_servers;
mod reattach;
mod recorded_gpu;
mod recorded_gpu2;
mod recorded_gpu3;
mod recorded_gpu4;
mod remote;
mod remote_copy;
mod replay_llama_cpp_python;
mod replay_llamacpp;
mod replay_sglang;
mod replay_vllm;
mod rotation;
mod said_while_waiting;
mod secret_values;
mod session_ends;
mod shared_log;
mod signatures;
mod slurm;
mod slurm_login;
mod slurm_nodes;
mod small_things;
mod sshd_harness;
mod tracebacks;
mod truth_history;
mod truth_logs;
mod truth_probes;
mod truth_processes;
mod unseen_time;
mod verdicts;
mod watch_writer_profile;
