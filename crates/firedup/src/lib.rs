//! firedup: launch (or attach to) a slow-starting server or job, follow its log, inspect its process,
//! and end with one verdict that cannot be mistaken.
//!
//! The pipeline, one module per stage: [`plan`] (flags and profile → one resolved plan) →
//! [`launch`] (supervised, detached start) → [`follow`] and [`process`] (observations) →
//! [`judge`] (the pure verdict engine) → an [`Outcome`]. [`engine`] is the event loop that ties
//! them; the command line (the `firedup` binary) displays and records the outcome.
//!
//! A Rust test starts a server and waits for its verdict with [`Launch`] (see [`launcher`]): a
//! ready server is a [`Running`], which stops the run and checks that nothing of it is left
//! when dropped; a server that failed is a [`StartError::NotReady`] carrying the [`Outcome`]
//! (verdict, signature, decisive line); firedup's own failures are typed ([`Error`]).
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
//! Underneath, the same stages the command line uses are public: [`plan::resolve`],
//! [`launch::launch_with`], [`target::Target::from_launch`] and [`engine::watch`].

pub mod agent;
pub mod dirwatch;
pub mod engine;
pub mod error;
pub mod follow;
pub mod host;
pub mod launch;
pub mod launched_log;
pub mod launcher;
pub mod logpath;
pub mod logstart;
pub mod observe;
pub mod plan;
pub mod probe;
pub mod prober;
pub mod process;
pub mod profile_files;
pub mod remote;
pub mod rundir;
pub mod secrets;
pub mod stop;
pub mod target;
pub mod wire;

pub use error::Error;
pub use launcher::{Launch, Running, StartError};
pub use verdict::Outcome;

// The pure core, re-exported under the names the shell uses.
pub use firedup_judge::{classify, duration, judge, line_shape, lines, verdict};

/// Profiles: the judge crate's data and parsing, plus the files this crate reads.
pub mod profile {
    pub use crate::profile_files::{load_file, load_profile_set, user_profile_dir};
    pub use firedup_judge::profile::*;
}
