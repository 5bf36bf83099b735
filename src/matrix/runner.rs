//! Running a matrix: `firedup matrix FILE.toml [--axis ...] [-- COMMAND]`.
//!
//! Each cell (and each repeat of it) is launched like `firedup run`, watched to its verdict,
//! benchmarked when ready, torn down with verification, and recorded in the history with its
//! metrics. Cells run one at a time, or `--parallel N` at once in slots (each slot adds its own
//! env and vars, e.g. one `CUDA_VISIBLE_DEVICES` per slot). A cell's failure is a result, never
//! an abort. What stops the matrix early: `--fail-fast` after a cell that is not ready; a cell
//! whose teardown cannot be verified (unless `--allow-dirty`); Ctrl-C, which tears down the
//! running cells and keeps what is done. Along an ordered axis, the cells after one that stopped
//! it are skipped. One run of a cell, on the matrix's host, is `matrix/cell.rs`; the flags are
//! `matrix/args.rs`.
//!
//! Exit code: 0 when every run became ready (or succeeded), 1 when some did not, 7 when the matrix
//! stopped on a dirty machine or firedup itself failed on a cell, 128 + the signal after Ctrl-C
//! (130), SIGTERM (143) or SIGHUP (129); 2 for usage.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use anyhow::{Result, bail};

use super::Matrix;
use super::args::{MatrixArgs, definition};
use super::cell::{CellRun, cell_spec, run_cell};
use super::context::Ctx;
use super::display::Display;
use super::schedule::{Next, pick};
use super::table::{CellRow, CellState, Format, RunResult, render};
use crate::duration::parse_duration;
use crate::history::{History, MatrixRecord, RunRecord};
use crate::plan;
use crate::verdict::Verdict;
use firedup::host::SshHost;
use firedup::session::interrupts::{AfterSignal, Heard, Interrupts, exit_code, signal_name};

const DEFAULT_GRACE: Duration = Duration::from_secs(10);
/// How long connecting to the matrix's host may take.
const REMOTE_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long to keep reconnecting to the host during a cell before `monitor_error`.
const REMOTE_RECONNECT_FOR: Duration = Duration::from_secs(120);

/// Refuses slots whose cells would use the same port at the same time (`matrix/ports.rs`).
fn refuse_shared_ports(m: &Matrix, slots: usize) -> Result<()> {
    let mut runs = Vec::new();
    for slot in 0..slots {
        for (position, c) in m.cells.iter().enumerate() {
            let (spec, opts, _) = cell_spec(m, c, slot)?;
            let plan = plan::resolve(&opts, &spec.command, "", true)?;
            runs.push(super::ports::CellPorts {
                slot,
                cell: position,
                ports: super::ports::ports_of(&plan),
            });
        }
    }
    if let Some((i, j, port)) = super::ports::clash(&runs, m.repeat > 1) {
        let (a, b) = (&runs[i], &runs[j]);
        bail!(
            "{slots} slots run at once, and cell {} ({}) in slot {} and cell {} ({}) in slot {} \
             would both use port {port}: give each slot its own port (a [[slot]] var, e.g. \
             vars = {{ port = \"8001\" }}, used as --port {{port}} in the command) or run the \
             cells one at a time (--parallel 1)",
            m.cells[a.cell].index + 1,
            m.cells[a.cell].label,
            a.slot,
            m.cells[b.cell].index + 1,
            m.cells[b.cell].label,
            b.slot
        );
    }
    Ok(())
}

/// `firedup matrix`.
pub fn matrix(a: &MatrixArgs) -> Result<i32> {
    let m = definition(a)?;
    let slots = match (a.parallel, m.slots.len()) {
        (Some(0), _) => bail!("--parallel must be at least 1"),
        (Some(n), s) if s > 0 && n > s => {
            bail!("--parallel {n}: the file defines only {s} [[slot]]s")
        }
        (Some(n), _) => n,
        (None, 0) => 1,
        (None, s) => s,
    };
    // Check every cell's launch (profile, readiness, templates) in every slot it may run in
    // before anything runs.
    for c in &m.cells {
        for slot in 0..slots {
            cell_spec(&m, c, slot).map_err(|e| {
                let in_slot = if slots > 1 {
                    format!(" in slot {slot}")
                } else {
                    String::new()
                };
                anyhow::anyhow!("cell {} ({}){in_slot}: {e:#}", c.index + 1, c.label)
            })?;
        }
    }
    if slots > 1 {
        refuse_shared_ports(&m, slots)?;
    }
    let history = match History::open_default() {
        Ok(h) => h,
        Err(e) if !a.resume => {
            eprintln!("firedup: the matrix will not be recorded in the history: {e:#}");
            None
        }
        Err(e) => return Err(e),
    };
    if a.dry_run {
        super::dry_run::print_dry_run(&m, slots, history.as_ref())?;
        return Ok(0);
    }
    let def_hash = m.def_hash();
    let mut done: HashMap<String, Vec<RunResult>> = HashMap::new();
    let matrix_id = if a.resume {
        let h = history
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("--resume needs the history, which is off"))?;
        let Some(prev) = h.latest_matrix(&def_hash)? else {
            bail!(
                "--resume: no earlier matrix of this definition in the history; run it without --resume"
            );
        };
        for r in h.list(&crate::history::Filter {
            matrix: Some(prev.id.clone()),
            ..Default::default()
        })? {
            if let Some(c) = &r.cell {
                let mut rr = result_of(&r);
                rr.resumed = true;
                done.entry(c.key.clone()).or_default().push(rr);
            }
        }
        eprintln!(
            "firedup: resuming matrix {} ({} runs already done)",
            prev.id,
            done.values().map(Vec::len).sum::<usize>()
        );
        prev.id
    } else {
        new_matrix_id()
    };
    let mut history = history;
    if let Some(h) = history.as_mut() {
        let begun = h.begin_matrix(&MatrixRecord {
            id: matrix_id.clone(),
            def_hash: def_hash.clone(),
            source: Some(m.source.clone()),
            started_at: crate::rundir::now_unix(),
            ended_at: None,
            state: "running".into(),
            cells: m.cells.len() as u32,
            definition: m.redacted_definition(),
        });
        // A busy or failing history never stops the matrix; its runs are kept aside if need be.
        if let Err(e) = begun {
            eprintln!("firedup: the matrix itself is not in the history: {e:#}");
        }
    }
    drop(history);

    let grace = match &m.base.grace {
        Some(g) => parse_duration(g).map_err(|e| anyhow::anyhow!("base.grace: {e}"))?,
        None => DEFAULT_GRACE,
    };
    let rows: Vec<CellRow> = m
        .cells
        .iter()
        .map(|c| {
            let mut runs = done.remove(&c.key).unwrap_or_default();
            runs.truncate(m.repeat as usize);
            CellRow {
                index: c.index,
                label: c.label.clone(),
                values: c.shown.clone(),
                state: if runs.len() >= m.repeat as usize {
                    CellState::Done
                } else {
                    CellState::Pending
                },
                runs,
            }
        })
        .collect();
    let shared = Arc::new(Shared {
        board: Mutex::new(Board {
            rows,
            stop_all: None,
            dirty: false,
            firedup_error: false,
        }),
        changed: Condvar::new(),
        cancel: AtomicBool::new(false),
        signal: AtomicI32::new(0),
    });

    let display = Display::new();
    let ssh = m.base.host.as_deref().map(|h| {
        SshHost::new(
            crate::remote::HostSpec::new(h, REMOTE_CONNECT_TIMEOUT),
            REMOTE_RECONNECT_FOR,
        )
    });
    let sbatch_args = m.base.sbatch_args.clone();
    let host = firedup::host::choose(ssh, m.base.slurm.then_some(sbatch_args));
    // Ctrl-C, SIGTERM or SIGHUP (a closed terminal): start nothing new, stop the running cells
    // (so that their watches end at once; each cell's own teardown then verifies), keep what is
    // done and print the table.
    let interrupts = {
        let shared = Arc::clone(&shared);
        Interrupts::install(AfterSignal::CarryOn, move |heard| {
            if let Heard::Signal(sig) = heard {
                shared.signal.store(sig, Ordering::SeqCst);
                shared.cancel.store(true, Ordering::SeqCst);
                shared.changed.notify_all();
                let _ = writeln!(
                    std::io::stderr(),
                    "firedup: interrupted ({}): tearing down the running cells; finished cells are kept",
                    signal_name(sig)
                );
            }
        })?
    };
    let ctx = Ctx {
        m: &m,
        matrix_id: &matrix_id,
        grace,
        fail_fast: a.fail_fast,
        allow_dirty: a.allow_dirty,
        display: &display,
        predecessors: m.predecessors(),
        host,
        interrupts: &interrupts,
    };
    std::thread::scope(|s| {
        for slot in 0..slots {
            let shared = Arc::clone(&shared);
            let ctx = &ctx;
            s.spawn(move || slot_loop(ctx, &shared, slot));
        }
    });
    interrupts.finish();
    display.finish();

    let b = shared.board.lock().expect("board");
    let interrupted = shared.cancel.load(Ordering::SeqCst);
    let state = match (interrupted, b.stop_all.is_some(), b.dirty) {
        (true, _, true) => "interrupted; a cell left the machine DIRTY",
        (true, _, false) => "interrupted",
        (false, true, _) => "stopped",
        (false, false, _) => "done",
    };
    if let Ok(Some(mut h)) = History::open_default() {
        let _ = h.end_matrix(&matrix_id, state);
    }
    let axes: Vec<String> = m.axes.iter().map(|a| a.name.clone()).collect();
    print!("{}", render(a.format, &matrix_id, state, &axes, &b.rows));
    if a.format == Format::Json {
        println!();
    }
    let all_ready = b.rows.iter().all(|r| {
        matches!(r.state, CellState::Done)
            && r.runs()
                .iter()
                .all(|x| matches!(x.verdict, Verdict::Ready | Verdict::Succeeded))
    });
    Ok(if interrupted {
        exit_code(shared.signal.load(Ordering::SeqCst))
    } else if b.dirty || b.firedup_error {
        Verdict::MonitorError.exit_code()
    } else if all_ready {
        0
    } else {
        1
    })
}

fn new_matrix_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mix = (nanos ^ ((std::process::id() as u64) << 24)).wrapping_mul(0x2545_f491_4f6c_dd1d);
    format!("mx-{:06x}", (mix >> 40) & 0xff_ffff)
}

/// A history record as a table row.
fn result_of(r: &RunRecord) -> RunResult {
    let o = &r.outcome;
    let teardown = r.teardown.clone().unwrap_or_default();
    RunResult {
        run_id: r.run_id.clone(),
        verdict: o.verdict,
        signature: o.signature,
        phase: o.phase.clone(),
        ready_s: o.ready_s,
        elapsed_s: o.elapsed_s,
        line: o.line.as_ref().map(|l| l.text.clone()),
        metrics: r.metrics.clone(),
        bench_problem: None,
        clean: teardown.starts_with("clean"),
        teardown,
        resumed: false,
        job: o.job.as_ref().map(|j| j.id.clone()),
    }
}

/// What the slots share: the table being filled, Ctrl-C's cancel flag and its signal.
struct Shared {
    board: Mutex<Board>,
    changed: Condvar,
    cancel: AtomicBool,
    /// The signal that cancelled the matrix (its exit code is 128 + it).
    signal: AtomicI32,
}

struct Board {
    rows: Vec<CellRow>,
    /// Why no further cell starts.
    stop_all: Option<String>,
    dirty: bool,
    firedup_error: bool,
}

fn slot_loop(ctx: &Ctx<'_>, shared: &Shared, slot: usize) {
    loop {
        let (cell, repeat_index) = {
            let mut b = shared.board.lock().expect("board");
            loop {
                let cancel = shared.cancel.load(Ordering::SeqCst);
                let board = &mut *b;
                let stop_all = board.stop_all.clone();
                match pick(
                    &ctx.m.axes,
                    &ctx.predecessors,
                    &mut board.rows,
                    stop_all.as_deref(),
                    cancel,
                ) {
                    Next::Run(i, r) => {
                        b.rows[i].state = CellState::Running { phase: None };
                        break (i, r);
                    }
                    Next::Wait => {
                        b = shared
                            .changed
                            .wait_timeout(b, Duration::from_millis(500))
                            .expect("board")
                            .0;
                    }
                    Next::Done => {
                        shared.changed.notify_all();
                        return;
                    }
                }
            }
        };
        let outcome = run_cell(ctx, &shared.cancel, cell, slot, repeat_index);
        let mut b = shared.board.lock().expect("board");
        let cancelled = shared.cancel.load(Ordering::SeqCst);
        match outcome {
            Ok(CellRun::Done(r)) => {
                ctx.display.finished(ctx.m, cell, repeat_index, &r);
                if !r.clean && !ctx.allow_dirty {
                    b.dirty = true;
                    b.stop_all.get_or_insert_with(|| {
                        format!(
                            "not run: cell {} left the machine dirty ({})",
                            cell + 1,
                            r.teardown
                        )
                    });
                }
                if ctx.fail_fast && !matches!(r.verdict, Verdict::Ready | Verdict::Succeeded) {
                    b.stop_all.get_or_insert_with(|| {
                        format!(
                            "not run: --fail-fast after cell {} ({})",
                            cell + 1,
                            r.verdict
                        )
                    });
                }
                b.rows[cell].runs.push(r);
                b.rows[cell].state = if cancelled {
                    CellState::Skipped {
                        reason: "interrupted (Ctrl-C)".into(),
                    }
                } else if b.rows[cell].runs.len() >= ctx.m.repeat as usize {
                    CellState::Done
                } else {
                    CellState::Pending
                };
            }
            Ok(CellRun::Interrupted(check)) => {
                let mut reason = "interrupted (Ctrl-C): torn down, not recorded".to_string();
                if let Some(c) = check.filter(|c| !c.clean) {
                    // What teardown found still matters: the machine is not clean.
                    b.dirty = true;
                    reason = format!("{reason}; {}", c.summary());
                    ctx.display.say(&format!(
                        "cell {}: teardown after Ctrl-C: {}",
                        cell + 1,
                        c.summary()
                    ));
                }
                b.rows[cell].state = CellState::Skipped { reason };
            }
            Err(e) => {
                ctx.display
                    .say(&format!("cell {}: firedup failed: {e:#}", cell + 1));
                b.firedup_error = true;
                b.rows[cell].state = CellState::Skipped {
                    reason: format!("firedup failed: {e:#}"),
                };
            }
        }
        shared.changed.notify_all();
    }
}
