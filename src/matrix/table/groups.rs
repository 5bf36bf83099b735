//! The cells grouped by cause, in sentences: "2 cells failed with graph_capture during
//! capture_cuda_graph: all have torch.compile=on". Failures first, then ready, then skipped.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{CellRow, CellState};
use crate::verdict::{Signature, Verdict};

/// A sentence per group of cells with the same verdict, signature and phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    pub verdict: Option<Verdict>,
    pub signature: Option<Signature>,
    pub phase: Option<String>,
    /// The cells' indexes (from 0); in JSON their numbers, counting from 1 as the table does.
    #[serde(with = "super::cell_numbers")]
    pub cells: Vec<usize>,
    /// Axis values every cell of the group has and some cell outside it has not.
    pub common: Vec<String>,
    pub sentence: String,
}

/// Groups the finished cells by cause; failures first, then ready, then skipped.
pub fn groups(axes: &[String], rows: &[CellRow]) -> Vec<Group> {
    type Key = (u8, Option<Verdict>, Option<Signature>, Option<String>);
    let mut by: BTreeMap<Key, Vec<&CellRow>> = BTreeMap::new();
    for r in rows {
        let key = match &r.state {
            CellState::Done => {
                let v = r.verdict();
                let order = match v {
                    Some(Verdict::Ready | Verdict::Succeeded) => 1,
                    _ => 0,
                };
                (order, v, r.signature(), r.phase())
            }
            CellState::Skipped { .. } => (2, None, None, None),
            _ => continue,
        };
        by.entry(key).or_default().push(r);
    }
    by.into_iter()
        .map(|((_, verdict, signature, phase), members)| {
            let common = common_values(axes, rows, &members);
            let n = members.len();
            let cells = if n == 1 {
                "1 cell".to_string()
            } else {
                format!("{n} cells")
            };
            let what = match verdict {
                None => "were skipped".to_string(),
                Some(v) => describe(v, signature, phase.as_deref(), n == 1),
            };
            let what = if n == 1 && verdict.is_none() {
                "was skipped".to_string()
            } else {
                what
            };
            let tail = if common.is_empty() {
                String::new()
            } else if n == 1 {
                format!(": {}", members[0].label)
            } else {
                format!(": all have {}", common.join(" "))
            };
            Group {
                verdict,
                signature,
                phase: phase.clone(),
                cells: members.iter().map(|m| m.index).collect(),
                sentence: format!("{cells} {what}{tail}"),
                common,
            }
        })
        .collect()
}

fn describe(v: Verdict, sig: Option<Signature>, phase: Option<&str>, one: bool) -> String {
    let during = phase
        .filter(|p| *p != "ready")
        .map(|p| format!(" during {p}"))
        .unwrap_or_default();
    let with = sig.map(|s| format!(" with {s}")).unwrap_or_default();
    let were = if one { "was" } else { "were" };
    match v {
        Verdict::Ready => "became ready".into(),
        Verdict::Succeeded => "succeeded".into(),
        Verdict::Failed => format!("failed{with}{during}"),
        Verdict::Exited => format!("exited{during}"),
        Verdict::Killed => format!("{were} killed{with}{during}"),
        Verdict::NeverStarted => "never started".into(),
        Verdict::Stalled => format!("stalled{during}"),
        Verdict::TimedOut => format!("timed out{during}"),
        // Unlike `run`, which leaves such a server running, a matrix stops it: the next cell
        // needs a clean machine.
        Verdict::MonitorError => {
            "could not be watched (stopped anyway: the next cell needs a clean machine)".into()
        }
    }
}

/// The `axis=value` pairs shared by every member and not by every cell of the matrix.
fn common_values(axes: &[String], all: &[CellRow], members: &[&CellRow]) -> Vec<String> {
    let mut out = Vec::new();
    for (ai, name) in axes.iter().enumerate() {
        let Some(first) = members.first().and_then(|m| m.values.get(ai)) else {
            continue;
        };
        let shared = members.iter().all(|m| m.values.get(ai) == Some(first));
        let everywhere = all.iter().all(|c| c.values.get(ai) == Some(first));
        if shared && !everywhere {
            out.push(format!("{name}={first}"));
        }
    }
    out
}
