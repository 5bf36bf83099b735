//! The flags of `firedup matrix` and the definition they make with the matrix file: the file's
//! `[base]` overridden by the flags, the extra `--axis`es, then checked and expanded
//! ([`Matrix::build`]).

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;

use super::table::Format;
use super::{Matrix, MatrixFile, parse_axis_flag, read_file};
use crate::plan;

#[derive(Debug, Args)]
pub struct MatrixArgs {
    /// The matrix file (TOML: [base], [[axis]], [[exclude]], [[include]], [bench], [[slot]]; see
    /// docs/matrix.md).
    pub file: Option<PathBuf>,
    /// An axis: env:NAME=V1,V2 | flag:--FLAG | arg:--ARG=V1,V2 | var:NAME=V1,V2, with +ordered
    /// for an ordered axis (repeatable; added to the file's).
    #[arg(long, value_name = "AXIS")]
    pub axis: Vec<String>,
    /// Run each cell N times: the table shows medians and spread.
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
    /// Print the cells and what each launches, then stop.
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// Continue the newest matrix of this definition: cells already done are taken from the
    /// history.
    #[arg(long)]
    pub resume: bool,
    /// Run N cells at once, one per slot (the file's [[slot]]s, or slots 0..N as {slot}).
    #[arg(long, value_name = "N")]
    pub parallel: Option<usize>,
    /// Stop starting cells after the first run that is not ready.
    #[arg(long = "fail-fast")]
    pub fail_fast: bool,
    /// Start the next cell even when a teardown could not be verified clean.
    #[arg(long = "allow-dirty")]
    pub allow_dirty: bool,
    /// The final table's format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Bench command run on every ready cell (sh -c; overrides the file's).
    #[arg(long, value_name = "CMD")]
    pub bench: Option<String>,
    /// A metric the bench prints: NAME=REGEX with a group around the number (repeatable).
    #[arg(long, value_name = "NAME=REGEX")]
    pub metric: Vec<String>,
    /// Server profile of every cell (overrides the file's).
    #[arg(long)]
    pub profile: Option<String>,
    /// Deadline of every cell.
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Stall window of every cell.
    #[arg(long, value_name = "DURATION")]
    pub stall: Option<String>,
    /// A ready line for every cell (repeatable).
    #[arg(long = "ready-line", value_name = "REGEX")]
    pub ready_line: Vec<String>,
    /// Env of every cell (repeatable; `KEY` alone: its value from firedup's own environment).
    #[arg(long = "env", value_name = "KEY[=VALUE]")]
    pub env: Vec<String>,
    /// Judge by the log alone (no port/HTTP probes).
    #[arg(long = "no-probe")]
    pub no_probe: bool,
    /// Grace between SIGTERM and SIGKILL at teardown.
    #[arg(long, value_name = "DURATION")]
    pub grace: Option<String>,
    /// Run every cell on this SSH host (an alias of ~/.ssh/config, user@host); the bench and
    /// the teardown checks run there too. One host: a multi-node group as a cell is refused.
    #[arg(long, value_name = "HOST")]
    pub host: Vec<String>,
    /// Submit every cell as a Slurm batch job (sbatch), up to --parallel at once; each is
    /// judged as `run --slurm` and cancelled (scancel, verified) at teardown. With --host,
    /// through that login node.
    #[arg(long)]
    pub slurm: bool,
    /// An argument for sbatch, for every cell (repeatable), e.g. --sbatch-arg=--mem=4G.
    #[arg(
        long = "sbatch-arg",
        value_name = "ARG",
        requires = "slurm",
        allow_hyphen_values = true
    )]
    pub sbatch_arg: Vec<String>,
    /// The base command (instead of the file's base.command).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Reads the definition from the file and flags.
pub(super) fn definition(a: &MatrixArgs) -> Result<Matrix> {
    let (mut file, source) = match &a.file {
        Some(p) => (read_file(p)?, p.display().to_string()),
        None => (MatrixFile::default(), "--axis flags".to_string()),
    };
    let extra = a
        .axis
        .iter()
        .map(|s| parse_axis_flag(s))
        .collect::<Result<Vec<_>>>()?;
    let b = &mut file.base;
    if a.profile.is_some() {
        b.profile = a.profile.clone();
    }
    if a.timeout.is_some() {
        b.timeout = a.timeout.clone();
    }
    if a.stall.is_some() {
        b.stall = a.stall.clone();
    }
    if !a.ready_line.is_empty() {
        b.ready_lines = a.ready_line.clone();
    }
    if a.no_probe {
        b.no_probe = true;
    }
    if a.grace.is_some() {
        b.grace = a.grace.clone();
    }
    if let Some(h) = super::one_host::from_flags(&a.host)? {
        b.host = Some(h);
    }
    if a.slurm {
        b.slurm = true;
    }
    if !a.sbatch_arg.is_empty() {
        b.sbatch_args = a.sbatch_arg.clone();
    }
    for e in &a.env {
        let (k, v) = plan::parse_env(e)?;
        b.env.insert(k, v);
    }
    if let Some(cmd) = &a.bench {
        let bench = file.bench.get_or_insert_with(Default::default);
        bench.command = cmd.clone();
    }
    for m in &a.metric {
        let Some((name, re)) = m.split_once('=') else {
            bail!("--metric {m:?}: write NAME=REGEX");
        };
        let Some(bench) = file.bench.as_mut() else {
            bail!("--metric needs a bench command (--bench CMD or [bench] in the file)");
        };
        bench.metrics.insert(name.to_string(), re.to_string());
    }
    if let Some(r) = a.repeat {
        file.repeat = Some(r);
    }
    Matrix::build(file, extra, a.command.clone(), source)
}
