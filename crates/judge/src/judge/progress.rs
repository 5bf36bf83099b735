//! Progress and phases: what counts as a sign of life (a line of a new shape or a moving counter,
//! see `line`; CPU use or reads of the process tree; GPU memory growing; an sd_notify status), the
//! phase the server is in and since when, and the timeline of phases.

use std::time::Duration;

use super::output::Event;
use super::{Judge, round_ms};
use crate::verdict::{GpuReport, PhaseAt};

/// CPU use that counts as progress: 2% of one core over the sampling window.
const CPU_PROGRESS_FRACTION: f64 = 0.02;
/// Bytes read that count as progress in one sampling window (weights being loaded).
const READ_PROGRESS_BYTES: u64 = 1 << 20;

impl Judge {
    /// The stall window: it only applies while starting (or in job mode); after ready, a quiet
    /// server is healthy.
    pub(super) fn stall_window(&self) -> Option<Duration> {
        if self.stage.ready_at().is_some() {
            return None;
        }
        self.cfg.stall
    }

    /// The budget of the current phase, if it has one.
    pub(super) fn phase_budget(&self) -> Option<Duration> {
        let phase = self.phase.as_deref()?;
        self.cfg
            .phase_budgets
            .iter()
            .find(|(name, _)| name == phase)
            .map(|(_, b)| *b)
    }

    pub(super) fn enter_phase(&mut self, at: Duration, name: String, events: &mut Vec<Event>) {
        self.phase = Some(name.clone());
        // A phase line stamped before the watch began (a re-attach reads what the log held,
        // stamped with when it was written): its budget counts from the watch, as the stall
        // window does, though the timeline says when it began.
        self.phase_since = at.max(self.watch_from);
        // A fraction belongs to the phase that printed it.
        self.progress = None;
        self.progressed(at);
        // The timeline says when each phase first began. A phase entered again (a draft model
        // loading after the target, or a log whose startup repeats) moves the current phase but
        // adds nothing: the timeline, and memory, stay bounded by the number of phases.
        if self.timeline.iter().any(|p| p.phase == name) {
            return;
        }
        self.timeline.push(PhaseAt {
            phase: name.clone(),
            at_s: round_ms(at.as_secs_f64()),
        });
        events.push(Event::Phase { phase: name, at });
    }

    pub(super) fn on_usage(&mut self, at: Duration, cpu: u64, read: u64) {
        if let Some((cpu0, read0, t0)) = self.last_usage {
            let window = at.saturating_sub(t0).as_secs_f64();
            // Clock ticks are 1/100 s on Linux.
            let cpu_s = cpu.saturating_sub(cpu0) as f64 / 100.0;
            if (window > 0.0 && cpu_s >= window * CPU_PROGRESS_FRACTION)
                || read.saturating_sub(read0) >= READ_PROGRESS_BYTES
            {
                self.progressed(at);
            }
        }
        self.last_usage = Some((cpu, read, at));
    }

    pub(super) fn on_gpu_memory(&mut self, at: Duration, mib: u64) {
        // Growing GPU memory is a server loading weights or capturing graphs: progress.
        if mib > self.gpu.as_ref().map_or(0, |g| g.last_mib) {
            self.progressed(at);
        }
        let g = self.gpu.get_or_insert_with(GpuReport::default);
        g.last_mib = mib;
        g.peak_mib = g.peak_mib.max(mib);
    }
}
