//! The `firedup` binary: the command line over the `firedup` library (see `firedup --help`).
//!
//! The commands, the progress display, the tables, the run history and the diagnostic matrix
//! live here; launching, observing, judging and stopping live in the library crates.

mod cli;
mod closed_pipe;
mod hidden_commands;
mod history;
mod history_cmd;
mod interrupt;
mod matrix;
mod profiles_cmd;
mod prune;
mod report;

/// The SSH host: the library's session and source, plus the commands run over it.
mod remote {
    pub(crate) use firedup::remote::*;
    pub(crate) mod commands;
}

// The library's modules under the names the commands use.
use firedup::{
    agent, duration, engine, follow, judge, launch, line_shape, lines, logpath, logstart, plan,
    probe, process, profile, rundir, secrets, stop, verdict, wire,
};

fn main() {
    std::process::exit(cli::main());
}
