//! The matrix's results as people and scripts read them: one row per cell (its axis values,
//! verdict, signature, phase reached, time to ready, metrics; medians and spread over repeats),
//! the cells grouped by cause in sentences ("2 cells failed with graph_capture during
//! capture_cuda_graph: all have torch.compile=on"), rendered as a terminal table, Markdown, CSV
//! or JSON. Pure: it formats what the runner found. The grouping by cause is `table/groups.rs`.

use std::collections::BTreeMap;

use comfy_table::Table;
use comfy_table::presets::ASCII_MARKDOWN;

use serde::{Deserialize, Serialize};

use crate::duration::format_duration;
use crate::fitted_table::{Fit, fitted, table_width};
use crate::verdict::{Signature, Verdict};

mod groups;
pub use groups::groups;

/// One run of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub run_id: String,
    pub verdict: Verdict,
    pub signature: Option<Signature>,
    pub phase: Option<String>,
    pub ready_s: Option<f64>,
    pub elapsed_s: f64,
    /// The decisive log line.
    pub line: Option<String>,
    pub metrics: BTreeMap<String, f64>,
    /// What went wrong with the bench, if anything.
    pub bench_problem: Option<String>,
    /// The teardown in words.
    pub teardown: String,
    /// Teardown was proven clean.
    pub clean: bool,
    /// Taken from the history by `--resume`, not run now.
    #[serde(default)]
    pub resumed: bool,
    /// The batch job the run was (`matrix --slurm`): its id.
    #[serde(default)]
    pub job: Option<String>,
}

/// Where a cell stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum CellState {
    /// Waiting to run (or to run its next repeat).
    Pending,
    Running {
        phase: Option<String>,
    },
    /// Every repeat of the cell reached a verdict.
    Done,
    /// Not run (or not every repeat), and why: an ordered axis stopped, `--fail-fast`, a dirty
    /// machine, Ctrl-C.
    Skipped {
        reason: String,
    },
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRow {
    /// Counts from 0 here; shown (table, CSV, JSON `cell`) counting from 1.
    #[serde(rename = "cell", with = "cell_number")]
    pub index: usize,
    pub label: String,
    pub values: Vec<String>,
    #[serde(flatten)]
    pub state: CellState,
    /// The runs that reached a verdict, in order.
    pub runs: Vec<RunResult>,
}

impl CellRow {
    pub fn runs(&self) -> &[RunResult] {
        &self.runs
    }

    /// The cell's verdict: the most frequent one over its runs (ties: the worse, by exit code).
    pub fn verdict(&self) -> Option<Verdict> {
        most_frequent(self.runs().iter().map(|r| r.verdict))
    }

    fn signature(&self) -> Option<Signature> {
        let v = self.verdict()?;
        most_frequent(
            self.runs()
                .iter()
                .filter(|r| r.verdict == v)
                .filter_map(|r| r.signature),
        )
    }

    fn phase(&self) -> Option<String> {
        let v = self.verdict()?;
        most_frequent(
            self.runs()
                .iter()
                .filter(|r| r.verdict == v)
                .filter_map(|r| r.phase.clone()),
        )
    }

    fn verdict_text(&self) -> String {
        let runs = self.runs();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for r in runs {
            *counts.entry(r.verdict.as_str()).or_default() += 1;
        }
        let base = match counts.len() {
            0 => String::new(),
            1 if runs.len() == 1 => runs[0].verdict.as_str().to_string(),
            1 => format!("{} {}/{}", runs[0].verdict, runs.len(), runs.len()),
            _ => counts
                .iter()
                .map(|(v, n)| format!("{v} {n}/{}", runs.len()))
                .collect::<Vec<_>>()
                .join(", "),
        };
        match &self.state {
            CellState::Pending => "pending".into(),
            CellState::Running { phase } => {
                format!("running {}", phase.clone().unwrap_or_default())
            }
            CellState::Skipped { .. } if runs.is_empty() => "skipped".into(),
            CellState::Skipped { .. } => format!("{base} (cut short)"),
            CellState::Done => base,
        }
    }

    /// The batch jobs of the cell's runs, in order (`matrix --slurm`).
    fn jobs(&self) -> String {
        let ids: Vec<&str> = self
            .runs()
            .iter()
            .filter_map(|r| r.job.as_deref())
            .collect();
        ids.join(",")
    }

    fn notes(&self) -> String {
        let mut notes: Vec<String> = Vec::new();
        if let CellState::Skipped { reason, .. } = &self.state {
            notes.push(reason.clone());
        }
        for r in self.runs() {
            for n in r
                .bench_problem
                .iter()
                .chain((!r.clean).then_some(&r.teardown))
            {
                if !notes.contains(n) {
                    notes.push(n.clone());
                }
            }
            if r.teardown.contains("SIGKILL") && r.clean {
                let n = "needed SIGKILL".to_string();
                if !notes.contains(&n) {
                    notes.push(n);
                }
            }
        }
        if !self.runs().is_empty() && self.runs().iter().all(|r| r.resumed) {
            notes.push("from history".into());
        }
        notes.join("; ")
    }
}

fn most_frequent<T: Ord + Clone>(items: impl Iterator<Item = T>) -> Option<T> {
    let mut counts: BTreeMap<T, usize> = BTreeMap::new();
    for i in items {
        *counts.entry(i).or_default() += 1;
    }
    // Ties go to the later key in order: for verdicts and signatures, the more severe.
    counts
        .into_iter()
        .fold(None, |best: Option<(T, usize)>, (k, n)| match best {
            Some((_, bn)) if bn > n => best,
            _ => Some((k, n)),
        })
        .map(|(k, _)| k)
}

/// Median, min and max.
pub fn spread(values: &[f64]) -> Option<(f64, f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some((median, v[0], v[n - 1]))
}

fn number(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn secs(s: f64) -> String {
    format_duration(std::time::Duration::from_secs_f64(s.max(0.0)))
}

fn spread_text(values: &[f64], fmt: fn(f64) -> String) -> String {
    match spread(values) {
        None => String::new(),
        Some((m, _, _)) if values.len() == 1 => fmt(m),
        Some((m, lo, hi)) => format!("{} ({}–{})", fmt(m), fmt(lo), fmt(hi)),
    }
}

/// The metric names over all rows, in order.
fn metric_names(rows: &[CellRow]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in rows {
        for run in r.runs() {
            for k in run.metrics.keys() {
                if !names.contains(k) {
                    names.push(k.clone());
                }
            }
        }
    }
    names
}

/// Whether any run was a batch job: the table then has a `job` column.
fn has_jobs(rows: &[CellRow]) -> bool {
    rows.iter()
        .any(|r| r.runs().iter().any(|x| x.job.is_some()))
}

/// The header and cells of the table, as text.
pub fn text_rows(axes: &[String], rows: &[CellRow]) -> (Vec<String>, Vec<Vec<String>>) {
    let metrics = metric_names(rows);
    let jobs = has_jobs(rows);
    let mut header: Vec<String> = vec!["#".into()];
    header.extend(axes.iter().cloned());
    if jobs {
        header.push("job".into());
    }
    header.extend(
        ["verdict", "signature", "phase", "ready"]
            .iter()
            .map(|s| s.to_string()),
    );
    header.extend(metrics.iter().cloned());
    header.push("notes".into());
    let body = rows
        .iter()
        .map(|r| {
            let mut row = vec![(r.index + 1).to_string()];
            row.extend(r.values.iter().cloned());
            if jobs {
                row.push(r.jobs());
            }
            row.push(r.verdict_text());
            row.push(r.signature().map(|s| s.to_string()).unwrap_or_default());
            row.push(r.phase().unwrap_or_default());
            let ready: Vec<f64> = r.runs().iter().filter_map(|x| x.ready_s).collect();
            row.push(spread_text(&ready, secs));
            for m in &metrics {
                let vals: Vec<f64> = r
                    .runs()
                    .iter()
                    .filter_map(|x| x.metrics.get(m).copied())
                    .collect();
                row.push(spread_text(&vals, number));
            }
            row.push(r.notes());
            row
        })
        .collect();
    (header, body)
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Md,
    Csv,
    Json,
}

/// The final report in `format`.
pub fn render(
    format: Format,
    matrix_id: &str,
    state: &str,
    axes: &[String],
    rows: &[CellRow],
) -> String {
    let gs = groups(axes, rows);
    match format {
        Format::Table | Format::Md => {
            let (header, body) = text_rows(axes, rows);
            let t = if format == Format::Md {
                let mut t = Table::new();
                t.load_style(ASCII_MARKDOWN).set_header(header);
                for r in body {
                    t.add_row(r);
                }
                t
            } else {
                // The notes (last) give way; the cell number and verdict are short.
                let fit = Fit {
                    elastic: Some(header.len() - 1),
                    ..Fit::default()
                };
                fitted(header, body, &fit, table_width())
            };
            let mut out = format!("{t}\n");
            if format == Format::Md {
                out.push('\n');
            }
            for g in &gs {
                let bullet = if format == Format::Md { "- " } else { "" };
                out.push_str(&format!("{bullet}{}\n", g.sentence));
            }
            out.push_str(&format!(
                "\nmatrix {matrix_id}: {state}; details: firedup history --matrix {matrix_id}\n"
            ));
            out
        }
        Format::Csv => csv_text(axes, rows),
        Format::Json => serde_json::to_string_pretty(&serde_json::json!({
            "matrix_id": matrix_id,
            "state": state,
            "axes": axes,
            "cells": rows,
            "groups": gs,
        }))
        .unwrap_or_default(),
    }
}

/// CSV with raw numbers: per metric its median, min and max over repeats.
fn csv_text(axes: &[String], rows: &[CellRow]) -> String {
    let metrics = metric_names(rows);
    let jobs = has_jobs(rows);
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = vec!["cell".into()];
    header.extend(axes.iter().cloned());
    if jobs {
        header.push("job".into());
    }
    for h in [
        "verdict",
        "signature",
        "phase",
        "runs",
        "ready_s",
        "ready_s_min",
        "ready_s_max",
    ] {
        header.push(h.into());
    }
    for m in &metrics {
        header.push(m.clone());
        header.push(format!("{m}_min"));
        header.push(format!("{m}_max"));
    }
    header.push("notes".into());
    let _ = w.write_record(&header);
    let opt = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or_default();
    for r in rows {
        let mut rec: Vec<String> = vec![(r.index + 1).to_string()];
        rec.extend(r.values.iter().cloned());
        if jobs {
            rec.push(r.jobs());
        }
        rec.push(r.verdict().map(|v| v.to_string()).unwrap_or_default());
        rec.push(r.signature().map(|s| s.to_string()).unwrap_or_default());
        rec.push(r.phase().unwrap_or_default());
        rec.push(r.runs().len().to_string());
        let ready: Vec<f64> = r.runs().iter().filter_map(|x| x.ready_s).collect();
        let s = spread(&ready);
        rec.push(opt(s.map(|x| x.0)));
        rec.push(opt(s.map(|x| x.1)));
        rec.push(opt(s.map(|x| x.2)));
        for m in &metrics {
            let vals: Vec<f64> = r
                .runs()
                .iter()
                .filter_map(|x| x.metrics.get(m).copied())
                .collect();
            let s = spread(&vals);
            rec.push(opt(s.map(|x| x.0)));
            rec.push(opt(s.map(|x| x.1)));
            rec.push(opt(s.map(|x| x.2)));
        }
        rec.push(r.notes());
        let _ = w.write_record(&rec);
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

/// A cell's index (from 0) as the number people see (from 1), in JSON as in the table.
mod cell_number {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(index: &usize, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(*index as u64 + 1)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
        let n = u64::deserialize(d)?;
        n.checked_sub(1)
            .map(|i| i as usize)
            .ok_or_else(|| D::Error::custom("cell numbers count from 1"))
    }
}

/// `cell_number` for a list of cells.
mod cell_numbers {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(indexes: &[usize], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(indexes.iter().map(|i| *i as u64 + 1))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<usize>, D::Error> {
        Vec::<u64>::deserialize(d)?
            .into_iter()
            .map(|n| {
                n.checked_sub(1)
                    .map(|i| i as usize)
                    .ok_or_else(|| D::Error::custom("cell numbers count from 1"))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
