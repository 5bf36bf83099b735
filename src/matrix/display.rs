//! What the matrix shows on stderr while it runs: the live rows (one per finished run) and, on a
//! terminal, one progress line per running cell under them; plain lines otherwise.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use super::Matrix;
use super::table::RunResult;
use crate::duration::format_duration;
use crate::engine::Progress;
use crate::judge::Status;
use crate::report::{HeartbeatProgress, LastTime, status_text};

/// Progress on stderr: on a terminal, one line per running cell under the finished rows;
/// otherwise plain lines.
pub struct Display {
    multi: Option<MultiProgress>,
}

impl Display {
    pub fn new() -> Display {
        let tty = std::io::stderr().is_terminal() && std::env::var_os("FIREDUP_PLAIN").is_none();
        Display {
            multi: tty.then(MultiProgress::new),
        }
    }

    pub fn say(&self, text: &str) {
        match &self.multi {
            Some(m) => {
                let _ = m.println(text);
            }
            // A reader that went away must not end a cell before its teardown: the write fails
            // quietly.
            None => {
                let _ = writeln!(std::io::stderr(), "firedup: {text}");
            }
        }
    }

    /// The live table: one row per finished run.
    pub fn finished(&self, m: &Matrix, cell: usize, repeat: u32, r: &RunResult) {
        let mut text = format!("[{}/{}] {}", cell + 1, m.cells.len(), m.cells[cell].label);
        if m.repeat > 1 {
            text.push_str(&format!(" (run {}/{})", repeat + 1, m.repeat));
        }
        text.push_str(&format!(" → {}", r.verdict));
        if let Some(s) = r.signature {
            text.push_str(&format!(" ({s})"));
        }
        if let Some(p) = r.phase.as_ref().filter(|p| *p != "ready") {
            text.push_str(&format!(" during {p}"));
        }
        let at = r.ready_s.unwrap_or(r.elapsed_s);
        text.push_str(&format!(
            " after {}",
            format_duration(Duration::from_secs_f64(at))
        ));
        for (k, v) in &r.metrics {
            text.push_str(&format!(" | {k}={v}"));
        }
        if let Some(b) = &r.bench_problem {
            text.push_str(&format!(" | {b}"));
        }
        text.push_str(&format!(" | teardown {}", r.teardown));
        self.say(&text);
    }

    pub fn progress(&self, label: &str, last_time: Option<LastTime>) -> Box<dyn Progress> {
        match &self.multi {
            Some(multi) => {
                let bar = multi.add(ProgressBar::new_spinner());
                bar.set_style(
                    ProgressStyle::with_template("{spinner} {prefix:.bold} {wide_msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                bar.set_prefix(label.to_string());
                bar.enable_steady_tick(Duration::from_millis(200));
                Box::new(CellBar {
                    bar,
                    multi: multi.clone(),
                    label: label.to_string(),
                    phase: None,
                    last_time,
                })
            }
            None => Box::new(HeartbeatProgress::new(label, last_time)),
        }
    }

    pub fn finish(&self) {
        if let Some(m) = &self.multi {
            let _ = m.clear();
        }
    }
}

/// One running cell's line on the terminal.
struct CellBar {
    bar: ProgressBar,
    multi: MultiProgress,
    label: String,
    phase: Option<(String, Duration)>,
    last_time: Option<LastTime>,
}

impl Progress for CellBar {
    fn phase(&mut self, phase: &str, at: Duration) {
        self.phase = Some((phase.to_string(), at));
    }
    fn ready(&mut self, _: Duration, _: Option<Duration>) {}
    fn status(&mut self, s: &Status, at: Duration) {
        let mut msg = status_text(s, at);
        if let Some(h) = self
            .last_time
            .as_ref()
            .and_then(|lt| lt.hint_at(self.phase.as_ref(), at))
        {
            msg = format!("{msg} | {h}");
        }
        self.bar.set_message(msg);
    }
    fn note(&mut self, text: &str, _: Duration) {
        let _ = self.multi.println(format!("{}: {text}", self.label));
    }
    fn finish(&mut self) {
        self.bar.finish_and_clear();
        self.multi.remove(&self.bar);
    }
}
