//! firedup-judge: the sans-IO core of firedup.
//!
//! Observations in (a log line, the log file's state, a process start or exit, a probe's answer,
//! an sd_notify message, a tick with the time passed in), events and the next deadline out. It
//! classifies lines itself against the catalog and the profile, and never reads the clock, the
//! disk or the network: `clippy.toml` in this crate forbids them, and `cargo clippy -D warnings`
//! checks it. The shell (the `firedup` crate) turns what it sees into [`judge::Observation`]s.

pub mod classify;
pub mod duration;
pub mod judge;
pub mod line_shape;
pub mod lines;
pub mod mode;
pub mod notify_message;
pub mod probe_outcome;
pub mod profile;
pub mod verdict;
