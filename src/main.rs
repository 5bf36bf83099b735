//! The `firedup` binary: the command line over the `firedup` library (see `firedup --help`).
//!
//! The commands, the progress display, the tables, the run history and the diagnostic matrix
//! live here; launching, observing, judging and stopping live in the library crates.

mod cli;
mod closed_pipe;
mod detach;
mod fitted_table;
mod front;
mod generated_docs;
mod group_args;
mod group_cmd;
mod group_interrupted;
mod group_names;
mod group_ps;
mod group_stop;
mod hidden_commands;
mod history;
mod history_cmd;
mod interrupted;
mod judge_args;
mod matrix;
mod pending;
mod process_title;
mod profiles_cmd;
mod prune;
mod remote_args;
mod report;
mod run_cmd;
mod run_elsewhere;
mod runs_cmd;
mod said_while_waiting;
mod stop_json;
mod watch_cmd;

// The library's modules under the names the commands use.
use firedup::{
    duration, engine, follow, judge, launch, line_shape, lines, plan, probe, process, profile,
    remote, rundir, secrets, verdict,
};

fn main() {
    // First, before any thread exists: `run` and `watch` become a front and a watcher.
    front::split(&std::env::args_os().collect::<Vec<_>>());
    std::process::exit(cli::main());
}
