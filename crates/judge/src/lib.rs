//! firedup-judge: the sans-IO core of firedup.
//!
//! Observations in (a log line, the log file's state, a process start or exit, a probe's answer,
//! an sd_notify message, a tick with the time passed in), events and the next deadline out. It
//! classifies lines itself against the catalog and the profile, and never reads the clock, the
//! disk or the network: `clippy.toml` in this crate forbids them, and `cargo clippy -D warnings`
//! checks it. The shell (the `firedup` crate) turns what it sees into [`judge::Observation`]s.

#![warn(missing_docs, unreachable_pub)]

pub mod classify;
pub mod duration;
pub mod group;
pub mod job;
pub mod judge;
pub mod line_shape;
pub mod lines;
pub mod mode;
pub mod normalize;
pub mod notify_message;
pub mod probe_outcome;
pub mod profile;
pub mod rank_place;
pub mod verdict;

#[cfg(test)]
mod test_classifier;

// The main types, by name: what a shell needs to configure a judge, feed it and read its verdict.
pub use classify::{Classifier, ClassifierSpec, LineClass, PatternError, ReadyLine};
pub use job::{JobSnapshot, JobSummary};
pub use judge::{Event, Judge, JudgeConfig, Judgement, LogState, Observation, RecordedEnd, Status};
pub use mode::Mode;
pub use notify_message::NotifyMessage;
pub use probe_outcome::ProbeOutcome;
pub use profile::{ProbeKind, Profile};
pub use verdict::{ExitInfo, Outcome, Signature, Verdict};
