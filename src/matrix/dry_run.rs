//! `matrix --dry-run`: the cells, each with the exact command, env and probe address it would
//! launch with in the slot it would first run in (cell N in slot N mod slots: each slot's own
//! port shows), and, from the history, how the same launch went last time.
//!
//! A cell's launch differs per slot (the slot's env and vars are part of it, so is its launch
//! hash in the history), and a cell runs in whichever slot is free: its last run is the newest
//! one of its launch in any slot. Looking in one slot only called the cells that last ran in
//! another "never run before" after a full run.

use std::time::Duration;

use anyhow::Result;

use super::Matrix;
use super::cell::cell_spec;
use crate::duration::format_duration;
use crate::history::{History, RunRecord};

/// The slot a cell is shown in: the one it takes when every cell takes as long.
pub(super) fn shown_slot(cell: usize, slots: usize) -> usize {
    cell % slots.max(1)
}

/// Prints the dry run of `m` run `slots` at a time.
pub(super) fn print_dry_run(m: &Matrix, slots: usize, history: Option<&History>) -> Result<()> {
    let runs = m.cells.len() * m.repeat as usize;
    println!(
        "{} cells × {} repeat{} = {runs} runs, {slots} at a time",
        m.cells.len(),
        m.repeat,
        if m.repeat == 1 { "" } else { "s" }
    );
    let mut known = 0.0;
    let mut unknown = 0;
    for c in &m.cells {
        let slot = shown_slot(c.index, slots);
        let (spec, opts, bench) = cell_spec(m, c, slot)?;
        if slots > 1 {
            println!("\n[{}] {} (slot {slot})", c.index + 1, c.label);
        } else {
            println!("\n[{}] {}", c.index + 1, c.label);
        }
        println!(
            "    command  {}",
            crate::secrets::shown_command(&spec.command)
        );
        for (k, v) in &spec.env {
            println!("    env      {k}={}", crate::secrets::shown_value(k, v));
        }
        println!("    profile  {}", spec.profile);
        if let Ok(plan) = crate::plan::resolve(&opts, &spec.command, "", true) {
            if let Some(a) = &plan.address {
                println!("    address  {}", a.base_url());
            }
            if let Some(h) = &plan.probes.http {
                println!("    http     {h}");
            }
        }
        if let Some(b) = bench {
            println!("    bench    {}", crate::secrets::redact_text(&b));
        }
        match last_run(m, c, slots, history)? {
            Some(r) => {
                known += r.outcome.elapsed_s;
                println!(
                    "    last     {} after {} ({})",
                    r.outcome.verdict,
                    format_duration(Duration::from_secs_f64(r.outcome.elapsed_s)),
                    r.run_id
                );
            }
            None => unknown += 1,
        }
    }
    if known > 0.0 {
        let est = known * m.repeat as f64 / slots as f64;
        println!(
            "\nfrom earlier runs: about {} of watching{}",
            format_duration(Duration::from_secs_f64(est)),
            if unknown > 0 {
                format!(", plus {unknown} cells never run before")
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

/// The newest run of `cell`'s launch in any of the slots.
fn last_run(
    m: &Matrix,
    cell: &super::Cell,
    slots: usize,
    history: Option<&History>,
) -> Result<Option<RunRecord>> {
    let Some(h) = history else {
        return Ok(None);
    };
    let mut newest: Option<RunRecord> = None;
    for slot in 0..slots.max(m.slots.len()).max(1) {
        let (spec, _, _) = cell_spec(m, cell, slot)?;
        let hash = crate::history::launch_hash(&spec, m.base.host.as_deref());
        if let Some(r) = h.last_of_spec(&hash).ok().flatten() {
            if newest.as_ref().is_none_or(|n| r.ended_at > n.ended_at) {
                newest = Some(r);
            }
        }
    }
    Ok(newest)
}
