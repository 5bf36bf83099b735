//! firedup: launch (or attach to) a slow-starting server or job, follow its log, inspect its process,
//! and end with one verdict that cannot be mistaken.
//!
//! The pipeline, one module per stage: [`plan`] (flags and profile → one resolved plan) →
//! [`launch`] (supervised, detached start) → [`follow`] and [`process`] (observations) →
//! [`judge`] (the pure verdict engine) → [`report`]. [`engine`] is the event loop that ties them.
//!
//! A Rust test can start a server and wait for its verdict the same way the CLI does:
//!
//! ```no_run
//! use firedup::{plan, launch, engine};
//! let opts = plan::WatchOptions { ready_lines: vec!["listening".into()], ..Default::default() };
//! let spec = launch::LaunchSpec {
//!     command: vec!["./server".into()], cwd: None, env: vec![], log: None,
//!     profile: "generic".into(), mode: "ready".into(), judging: opts.clone(), name: None,
//! };
//! let launched = launch::launch(&spec).unwrap();
//! let plan = plan::resolve(&opts, &spec.command, &launched.log.display().to_string(), true).unwrap();
//! let target = target::Target::from_launch(&launched);
//! let outcome = engine::watch(&plan, &target, &mut engine::NoProgress, None).unwrap();
//! assert_eq!(outcome.verdict, firedup::verdict::Verdict::Ready);
//! ```

pub mod agent;
pub mod dirwatch;
pub mod engine;
pub mod follow;
pub mod host;
pub mod launch;
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

// The pure core, re-exported under the names the shell uses.
pub use firedup_judge::{classify, duration, judge, line_shape, lines, verdict};

/// Profiles: the judge crate's data and parsing, plus the files this crate reads.
pub mod profile {
    pub use crate::profile_files::{load_file, load_profile_set, user_profile_dir};
    pub use firedup_judge::profile::*;
}
