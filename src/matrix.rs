//! A diagnostic matrix: one base launch under a grid of env vars, flags and argument values.
//!
//! This module is the pure part: the definition (a TOML file and/or `--axis` flags), checked
//! with errors that name what is wrong, and its expansion into cells (the Cartesian product of
//! the axes, minus `[[exclude]]` rules, plus `[[include]]` cells), each with the exact command and
//! env it launches. Running the cells is `matrix::runner`; the tables are `matrix::table`. Beside this file:
//! `axis.rs` (one axis checked, `--axis` parsed), `template.rs` (`{name}` templates) and
//! `cells.rs` (the expansion into cells).
//!
//! Templates: `{name}` in the command, env values, cwd, `http`, `port`, `ready_request` and the
//! bench command is replaced by a variable: an axis value (by axis name), a `vars` entry of the
//! base or of the cell's slot, `{slot}` (the slot number) and `{cell}` (the cell number). Only
//! `{identifier}` is a template, so JSON in an argument is left alone, and so is the shell's
//! `${VAR}`; an unknown name, or a `{name}` in a field that is not templated, is an error before
//! anything launches (`templated_base.rs`).

pub mod args;
mod axis;
mod cell;
mod cells;
mod context;
mod display;
mod dry_run;
pub mod host_side;
pub mod one_host;
pub mod ports;
pub mod runner;
pub mod schedule;
pub mod table;
mod template;
mod templated_base;

use crate::judge::Mode;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use regex::Regex;
use serde::{Deserialize, Serialize};

pub use axis::parse_axis_flag;
use axis::secret_axis;
use cells::expand_cells;
pub use template::expand;
pub use templated_base::{CellProbes, PortField};

/// The matrix file, as written.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MatrixFile {
    #[serde(default)]
    pub base: Base,
    #[serde(default)]
    pub axis: Vec<AxisDef>,
    #[serde(default)]
    pub exclude: Vec<BTreeMap<String, toml::Value>>,
    #[serde(default)]
    pub include: Vec<BTreeMap<String, toml::Value>>,
    #[serde(default)]
    pub bench: Option<BenchDef>,
    #[serde(default)]
    pub slot: Vec<SlotDef>,
    /// Run each cell this many times (`--repeat` overrides).
    #[serde(default)]
    pub repeat: Option<u32>,
}

/// The launch every cell starts from.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Base {
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
    pub profile: Option<String>,
    #[serde(default)]
    pub profile_files: Vec<PathBuf>,
    /// `ready` (default) or `exit`.
    pub until: Option<String>,
    #[serde(default)]
    pub ready_lines: Vec<String>,
    #[serde(default)]
    pub fail_lines: Vec<String>,
    pub timeout: Option<String>,
    pub stall: Option<String>,
    pub hold: Option<String>,
    pub http: Option<String>,
    /// A number, or a template (`"{port}"`).
    pub port: Option<PortField>,
    pub ready_request: Option<String>,
    #[serde(default)]
    pub no_probe: bool,
    #[serde(default)]
    pub phase_timeouts: Vec<String>,
    /// Grace between SIGTERM and SIGKILL at teardown.
    pub grace: Option<String>,
    /// Run every cell on this SSH host (as for `firedup run --host`); one host (`one_host`).
    #[serde(default, deserialize_with = "one_host::deserialize")]
    pub host: Option<String>,
    /// Submit every cell as a Slurm batch job (as `firedup run --slurm`; with `host`, through
    /// that login node).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub slurm: bool,
    /// Arguments for sbatch, for every cell (as `--sbatch-arg`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sbatch_args: Vec<String>,
    /// Template variables.
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
}

/// One axis as written: exactly one of `env`, `flag`, `arg`, `var`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AxisDef {
    pub name: Option<String>,
    pub env: Option<String>,
    pub flag: Option<String>,
    pub arg: Option<String>,
    pub var: Option<String>,
    #[serde(default)]
    pub values: Vec<toml::Value>,
    /// The values are in order: after a cell stops (see `stop_on`), the cells with later values
    /// of this axis (the other axes equal) are skipped.
    #[serde(default)]
    pub ordered: bool,
    /// Verdicts or signatures that stop an ordered axis (default: any verdict but ready and
    /// succeeded).
    #[serde(default)]
    pub stop_on: Vec<String>,
}

/// The bench run on every ready cell.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BenchDef {
    /// Run with `sh -c`, with FIREDUP_HOST/PORT/URL/PID/LOG/RUN_ID and the cell's env.
    pub command: String,
    /// Default 10m.
    pub timeout: Option<String>,
    /// Metric name → regex whose first group is the number (the last match in the output wins).
    #[serde(default)]
    pub metrics: BTreeMap<String, String>,
}

/// A parallel slot: what one lane of `--parallel` adds to each cell it runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlotDef {
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
}

/// What an axis changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum AxisKind {
    /// Sets this env var to the value.
    Env(String),
    /// Appends this flag when the value is `on`.
    Flag(String),
    /// Appends this argument and the value.
    Arg(String),
    /// Sets a template variable.
    Var(String),
}

/// A checked axis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Axis {
    pub name: String,
    pub kind: AxisKind,
    pub values: Vec<String>,
    pub ordered: bool,
    pub stop_on: Vec<String>,
}

/// One cell: a value for every axis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    /// 0-based, in run order.
    pub index: usize,
    /// One value per axis, in axis order.
    pub values: Vec<String>,
    /// The values as shown (tables, history, JSON): a secret-looking axis (`HF_TOKEN`,
    /// `--api-key`) shows `<redacted #N>`, N numbering its distinct values.
    pub shown: Vec<String>,
    /// Stable identity within the definition (`name=value;...`, shown values), for `--resume`.
    pub key: String,
    /// The values in words (`FLASHMLA=1 torch.compile=on`).
    pub label: String,
}

/// A checked matrix.
#[derive(Debug, Clone, Serialize)]
pub struct Matrix {
    pub base: Base,
    pub axes: Vec<Axis>,
    pub cells: Vec<Cell>,
    pub bench: Option<BenchDef>,
    #[serde(skip)]
    pub metrics: Vec<(String, Regex)>,
    pub slots: Vec<SlotDef>,
    pub repeat: u32,
    /// Where the definition came from (a file, `--axis` flags).
    pub source: String,
}

/// What a cell launches.
#[derive(Debug, Clone, PartialEq)]
pub struct CellLaunch {
    pub command: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    pub bench: Option<String>,
    /// Every template variable, for the record.
    pub vars: BTreeMap<String, String>,
    /// Where its readiness is asked (`http`, `port`, `ready_request`), templated.
    pub probes: CellProbes,
}

/// Reads a matrix file; errors name the file, and the line for TOML mistakes.
pub fn read_file(path: &Path) -> Result<MatrixFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the matrix file {}", path.display()))?;
    toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        let at = line.map(|l| format!(":{l}")).unwrap_or_default();
        anyhow::anyhow!("{}{at}: {}", path.display(), e.message())
    })
}

impl Matrix {
    /// Checks `file` (plus `extra` axes from the command line, and a command given after `--`)
    /// and expands its cells.
    pub fn build(
        mut file: MatrixFile,
        extra: Vec<AxisDef>,
        command: Vec<String>,
        source: String,
    ) -> Result<Matrix> {
        if !command.is_empty() {
            file.base.command = command;
        }
        if file.base.command.is_empty() {
            bail!("the matrix has no command: set base.command in the file or give it after --");
        }
        if let Some(u) = &file.base.until {
            if Mode::from_name(u).is_none() {
                bail!("base.until: ready or exit, not {u:?}");
            }
        }
        file.axis.extend(extra);
        if file.axis.is_empty() {
            bail!("the matrix has no axis: add [[axis]] to the file or give --axis");
        }
        let axes = file
            .axis
            .iter()
            .enumerate()
            .map(|(i, a)| a.check(i))
            .collect::<Result<Vec<_>>>()?;
        let mut names = std::collections::HashSet::new();
        for a in &axes {
            if !names.insert(a.name.as_str()) {
                bail!(
                    "two axes are named {:?}: give one a `name`",
                    a.name.as_str()
                );
            }
        }
        let mut metrics = Vec::new();
        if let Some(b) = &file.bench {
            if b.command.trim().is_empty() {
                bail!("bench.command is empty");
            }
            for (name, re) in &b.metrics {
                let r = Regex::new(re).map_err(|e| anyhow::anyhow!("bench.metrics.{name}: {e}"))?;
                if r.captures_len() < 2 {
                    bail!("bench.metrics.{name}: the regex needs a group around the number");
                }
                metrics.push((name.clone(), r));
            }
            if let Some(t) = &b.timeout {
                crate::duration::parse_duration(t)
                    .map_err(|e| anyhow::anyhow!("bench.timeout: {e}"))?;
            }
        }
        templated_base::refuse_untemplated(&file.base)?;
        if let Some(g) = &file.base.grace {
            crate::duration::parse_duration(g).map_err(|e| anyhow::anyhow!("base.grace: {e}"))?;
        }
        let cells = expand_cells(&axes, &file.exclude, &file.include)?;
        if cells.is_empty() {
            bail!("every cell is excluded: nothing to run");
        }
        let m = Matrix {
            repeat: file.repeat.unwrap_or(1).max(1),
            base: file.base,
            axes,
            cells,
            bench: file.bench,
            metrics,
            slots: file.slot,
            source,
        };
        // Every template must resolve, for every cell and slot, before anything launches.
        let slots = m.slots.len().max(1);
        for cell in &m.cells {
            for slot in 0..slots {
                m.launch_of(cell, slot)?;
            }
        }
        Ok(m)
    }

    /// The hash that identifies this definition for `--resume` (slots and repeat are how it runs,
    /// not what it is).
    pub fn def_hash(&self) -> String {
        let mut def = self.redacted_definition();
        // How it runs is not what it is.
        if let Some(o) = def.as_object_mut() {
            o.remove("slots");
            o.remove("repeat");
            o.remove("source");
        }
        crate::history::spec_hash(&[], &[], None, None, &def)
    }

    /// The definition as it may be stored and shown: secret-looking env values, flag values and
    /// bench credentials redacted, secret axes' values replaced by their shown form.
    pub fn redacted_definition(&self) -> serde_json::Value {
        use crate::secrets::{redact_args, redact_text, shown_value};
        let env = |e: &BTreeMap<String, String>| -> BTreeMap<String, String> {
            e.iter()
                .map(|(k, v)| (k.clone(), shown_value(k, v).to_string()))
                .collect()
        };
        let mut base = self.base.clone();
        base.env = env(&base.env);
        base.command = redact_args(&base.command);
        let slots: Vec<SlotDef> = self
            .slots
            .iter()
            .map(|s| SlotDef {
                env: env(&s.env),
                vars: s.vars.clone(),
            })
            .collect();
        let bench = self.bench.clone().map(|mut b| {
            b.command = redact_text(&b.command);
            b
        });
        let axes: Vec<serde_json::Value> = self
            .axes
            .iter()
            .map(|a| {
                let mut v = serde_json::to_value(a).unwrap_or_default();
                if secret_axis(a) {
                    v["values"] = serde_json::json!(
                        (1..=a.values.len())
                            .map(|i| format!("<redacted #{i}>"))
                            .collect::<Vec<_>>()
                    );
                }
                v
            })
            .collect();
        serde_json::json!({
            "base": base,
            "axes": axes,
            "cells": self.cells.iter().map(|c| &c.key).collect::<Vec<_>>(),
            "bench": bench,
            "slots": slots,
            "repeat": self.repeat,
            "source": self.source,
        })
    }

    /// The exact launch of `cell` in slot `slot`.
    pub fn launch_of(&self, cell: &Cell, slot: usize) -> Result<CellLaunch> {
        let mut vars = self.base.vars.clone();
        let slot_def = self.slots.get(slot);
        if let Some(s) = slot_def {
            vars.extend(s.vars.clone());
        }
        vars.insert("slot".into(), slot.to_string());
        vars.insert("cell".into(), cell.index.to_string());
        for (a, v) in self.axes.iter().zip(&cell.values) {
            vars.insert(a.name.clone(), v.clone());
        }
        let mut command = self
            .base
            .command
            .iter()
            .map(|c| expand(c, &vars, "base.command"))
            .collect::<Result<Vec<_>>>()?;
        let mut env: Vec<(String, String)> = Vec::new();
        let mut set_env = |k: &str, v: String| {
            env.retain(|(e, _)| e != k);
            env.push((k.to_string(), v));
        };
        for (k, v) in &self.base.env {
            set_env(k, expand(v, &vars, &format!("base.env.{k}"))?);
        }
        if let Some(s) = slot_def {
            for (k, v) in &s.env {
                set_env(k, expand(v, &vars, &format!("slot.env.{k}"))?);
            }
        }
        for (a, v) in self.axes.iter().zip(&cell.values) {
            match &a.kind {
                AxisKind::Env(n) => set_env(n, v.clone()),
                AxisKind::Flag(f) if v == "on" => command.push(f.clone()),
                AxisKind::Flag(_) => {}
                AxisKind::Arg(arg) => {
                    command.push(arg.clone());
                    command.push(v.clone());
                }
                AxisKind::Var(_) => {}
            }
        }
        let cwd = match &self.base.cwd {
            Some(c) => Some(PathBuf::from(expand(
                &c.display().to_string(),
                &vars,
                "base.cwd",
            )?)),
            None => None,
        };
        let bench = match &self.bench {
            Some(b) => Some(expand(&b.command, &vars, "bench.command")?),
            None => None,
        };
        let probes = templated_base::probes_of(&self.base, &vars)?;
        Ok(CellLaunch {
            command,
            env,
            cwd,
            bench,
            vars,
            probes,
        })
    }

    /// For each cell, the cells it waits for: its predecessor along every ordered axis (the
    /// nearest lower value with the other axes equal).
    pub fn predecessors(&self) -> Vec<Vec<(usize, usize)>> {
        let index_of: HashMap<&[String], usize> = self
            .cells
            .iter()
            .map(|c| (c.values.as_slice(), c.index))
            .collect();
        self.cells
            .iter()
            .map(|c| {
                let mut pre = Vec::new();
                for (ai, a) in self.axes.iter().enumerate() {
                    if !a.ordered {
                        continue;
                    }
                    let Some(pos) = a.values.iter().position(|v| *v == c.values[ai]) else {
                        continue;
                    };
                    for lower in (0..pos).rev() {
                        let mut vals = c.values.clone();
                        vals[ai] = a.values[lower].clone();
                        if let Some(&p) = index_of.get(vals.as_slice()) {
                            pre.push((ai, p));
                            break;
                        }
                    }
                }
                pre
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
