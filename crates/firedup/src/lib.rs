//! firedup: launch (or attach to) a slow-starting server or job, follow its log, inspect its process,
//! and end with one verdict that cannot be mistaken: `ready`, `succeeded`, `failed` (with a named
//! signature and the decisive line), `exited`, `killed`, `never_started`, `stalled`, `timed_out`
//! or `monitor_error` ([`verdict::Verdict`]).
//!
//! # Starting a server from Rust: [`Launch`]
//!
//! A test starts what it tests with the [`Launch`] builder (the flags of `firedup run`) and
//! waits for its verdict with [`Launch::start`]:
//!
//! - the verdict asked for (`ready`; `succeeded` with [`Launch::until_exit`]) gives a
//!   [`Running`]: its run id, pid, log, URL and port, the [`Outcome`], [`Running::wait`] for the
//!   final outcome and [`Running::stop`]; dropping it stops the run and checks that nothing of it
//!   is left (unless [`Running::keep`] left it running);
//! - any other verdict is [`StartError::NotReady`], carrying the [`Outcome`] (verdict,
//!   signature, decisive line) and the [`StopReport`] of the stop that followed: the run was
//!   stopped before `start` returned;
//! - firedup's own failure is [`StartError::Firedup`] with an [`Error`].
//!
//! The command runs under firedup's supervisor, a firedup binary (`firedup __supervise`) run, not
//! linked, so that the server outlives the caller and `firedup ps`, `logs` and `stop` see the run
//! as any other. It is, in order: [`Launch::firedup_bin`]; `$FIREDUP_BIN`; this program, when it
//! is `firedup`; `firedup` beside this program or one folder up (cargo puts a test in
//! `target/PROFILE/deps`, the workspace's binaries in `target/PROFILE`); `firedup` on `PATH`.
//! Runs are recorded in the state directory (`$FIREDUP_STATE_DIR`, else
//! `~/.local/state/firedup`; see [`rundir`]).
//!
//! ```
//! use std::time::Duration;
//! use firedup::{Launch, verdict::Verdict};
//! # // This example runs in the firedup repository, whose target directory holds the firedup
//! # // binary that supervises the run (build it first: `cargo build`); a project of yours puts
//! # // firedup on PATH or sets FIREDUP_BIN instead, and leaves the state directory alone.
//! # let state = tempfile::tempdir()?;
//! # // SAFETY: nothing else runs yet in this single-threaded example.
//! # unsafe { std::env::set_var("FIREDUP_STATE_DIR", state.path()) };
//! # let target = option_env!("CARGO_TARGET_DIR").map(std::path::PathBuf::from)
//! #     .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
//! # let firedup_bin = std::env::var_os("FIREDUP_BIN").map(std::path::PathBuf::from).or_else(|| {
//! #     ["release", "debug"].iter().map(|p| target.join(p).join("firedup")).filter(|p| p.is_file())
//! #         .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
//! # }).expect("a firedup binary: run `cargo build` first");
//!
//! let server = Launch::new(["sh", "-c", "echo listening; sleep 30"])
//!     .ready_line("listening")
//!     .timeout(Duration::from_secs(60))
//! #   .firedup_bin(firedup_bin)
//!     .start()?;
//! assert_eq!(server.outcome().verdict, Verdict::Ready);
//! println!("run {} (pid {:?}) logs to {}", server.run_id(), server.pid(), server.log().display());
//!
//! // Stops the run (dropping `server` would too) and checks that none of it is left.
//! let teardown = server.stop();
//! assert!(teardown.survivors.is_empty(), "{}", teardown.describe());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The pipeline
//!
//! Underneath, the stages the command line uses are public, one module each:
//!
//! 1. [`plan`]: flags and a profile ([`plan::WatchOptions`], [`profile`]) resolved into one
//!    [`plan::Plan`] by [`plan::resolve`]; every usage mistake is an [`Error`] here, before
//!    anything runs.
//! 2. [`launch`]: the supervised, detached start ([`launch::launch_with`] a
//!    [`launch::LaunchSpec`]): the command's output goes straight to its log, every process
//!    carries `FIREDUP_RUN_ID`, and the run directory ([`rundir`]) records the pid and the exit.
//! 3. [`target::Target`]: what one watch is about (the log, the process, the run), built by
//!    [`target::Target::from_launch`] or when attaching.
//! 4. Observations: [`follow`] (the log, through truncation and rotation), [`process`] (liveness,
//!    CPU time, exit), [`probe`] (port, HTTP, real request, sd_notify, GPU).
//! 5. [`judge`]: the pure verdict engine (observations in, events and a verdict out), with
//!    [`classify`] for what each line means.
//! 6. [`engine`]: the loop that feeds the judge and sleeps until the next observation or
//!    deadline; [`engine::watch`] watches a local target to an [`Outcome`].
//!
//! # The seams
//!
//! - [`source::Source`]: where observations come from. This machine's is
//!   [`host::local::LocalSource`] (inotify, pidfd, the probes); over SSH it is
//!   [`remote::source::RemoteSource`], fed by a `firedup __agent` on the other machine.
//!   [`engine::judge_loop`] judges any source the same way.
//! - [`host::Host`]: where a server runs (launch, observe, find a run again, stop it and prove it
//!   gone, a matrix cell's bench and teardown). [`host::LocalHost`] is this machine,
//!   [`host::SshHost`] another one over SSH running the same code; the commands are written
//!   once against `&dyn Host`.
//!
//! # Errors
//!
//! A failure of the watched server is a verdict in an [`Outcome`], never an `Err`. `Err` is
//! firedup's own failure: [`Error`] (a usage mistake, a file it could not read or write, its
//! supervisor, its state directory), each displaying as one sentence that says what failed and
//! what to do; [`host::HostError`] tells a host that cannot be reached (`Unreachable`) from
//! firedup's failure on it (`Failed`). The library prints nothing: what it finds is returned as
//! data.

#![warn(missing_docs, unreachable_pub)]

pub mod agent;
pub mod auto_port;
#[cfg(test)]
mod bounded_wait;
mod dirwatch;
pub mod engine;
pub mod error;
mod firedup_bin;
pub mod follow;
pub mod group;
pub mod host;
pub mod launch;
mod launched_log;
mod launcher;
mod logpath;
mod logstart;
mod observe;
pub mod oom_score;
mod owner_watch;
pub mod plan;
pub mod probe;
mod prober;
pub mod process;
mod profile_files;
mod rank_processes;
mod rank_stacks;
pub mod reattach;
#[cfg(feature = "ssh")]
pub mod remote;
pub mod rundir;
pub mod secrets;
pub mod session;
pub mod slurm;
pub mod source;
mod state_dir;
mod stop;
pub mod target;
mod wire;
pub mod writable_file;

pub use error::Error;
pub use launcher::{Launch, Running, StartError};
pub use logstart::LogStart;
pub use stop::{JobStop, StopReport, SweepNote};
pub use verdict::Outcome;

// The pure core, re-exported under the names the shell uses.
pub use firedup_judge::{classify, duration, judge, line_shape, lines, normalize, verdict};

/// Profiles: the judge crate's data and parsing, plus the files this crate reads.
pub mod profile {
    pub use crate::profile_files::{load_file, load_profile_set, user_profile_dir};
    pub use firedup_judge::profile::*;
}
