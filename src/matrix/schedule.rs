//! Which cell runs next: the pure part of the matrix runner. Cells run in order; along an
//! ordered axis a cell waits for its predecessor and is skipped once that one stopped the axis;
//! after Ctrl-C or a reason to stop everything (fail-fast, a dirty machine), the pending cells are
//! skipped with that reason.

use super::Axis;
use super::table::{CellRow, CellState, RunResult};
use crate::verdict::Verdict;

/// What a slot should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Run(usize, u32),
    Wait,
    Done,
}

/// Whether `runs` stop an ordered axis with these `stop_on` conditions.
pub fn stops_axis(stop_on: &[String], runs: &[RunResult]) -> Option<String> {
    runs.iter().find_map(|r| {
        let hit = if stop_on.is_empty() {
            !matches!(r.verdict, Verdict::Ready | Verdict::Succeeded)
        } else {
            stop_on.iter().any(|s| {
                s == r.verdict.as_str() || r.signature.is_some_and(|sig| sig.as_str() == s)
            })
        };
        hit.then(|| {
            r.signature
                .map(|s| s.to_string())
                .unwrap_or_else(|| r.verdict.to_string())
        })
    })
}

/// Picks the next run for a slot, marking the cells that will not run as skipped on the way:
/// all pending ones after Ctrl-C (`cancel`) or once `stop_all` says why nothing more starts, and
/// those after a cell that stopped an ordered axis. A cell waits (`Next::Wait`) while its
/// predecessor along an ordered axis has not finished.
pub fn pick(
    axes: &[Axis],
    predecessors: &[Vec<(usize, usize)>],
    rows: &mut [CellRow],
    stop_all: Option<&str>,
    cancel: bool,
) -> Next {
    let mut waiting = false;
    for i in 0..rows.len() {
        match rows[i].state {
            CellState::Pending => {}
            CellState::Running { .. } => {
                waiting = true;
                continue;
            }
            _ => continue,
        }
        if cancel || stop_all.is_some() {
            let reason = if cancel {
                "not run: interrupted (Ctrl-C)".to_string()
            } else {
                stop_all.unwrap_or_default().to_string()
            };
            rows[i].state = CellState::Skipped { reason };
            continue;
        }
        // Along an ordered axis, a cell waits for the one before it, and is skipped if that one
        // stopped the axis (or was itself skipped by it).
        let mut blocked = false;
        let mut skip: Option<String> = None;
        for &(ai, p) in &predecessors[i] {
            let axis = &axes[ai];
            match &rows[p].state {
                CellState::Done => {
                    if let Some(cause) = stops_axis(&axis.stop_on, &rows[p].runs) {
                        skip = Some(format!(
                            "not run: {} stopped at {} ({cause})",
                            axis.name, rows[p].values[ai]
                        ));
                    }
                }
                CellState::Skipped { reason } if reason.contains(" stopped at ") => {
                    skip = Some(reason.clone());
                }
                CellState::Skipped { .. } => {}
                CellState::Pending | CellState::Running { .. } => blocked = true,
            }
        }
        if let Some(reason) = skip {
            rows[i].state = CellState::Skipped { reason };
            continue;
        }
        if blocked {
            waiting = true;
            continue;
        }
        return Next::Run(i, rows[i].runs.len() as u32);
    }
    if waiting { Next::Wait } else { Next::Done }
}

#[cfg(test)]
mod tests;
