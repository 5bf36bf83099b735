//! Reporting to people: a live status line on a terminal, a heartbeat line on stderr otherwise (at
//! each phase change and at least every 15 s, so a watch is never silent), and the final block.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::duration::format_duration;
use crate::engine::Progress;
use crate::judge::Status;
use crate::verdict::{Outcome, Verdict};

const HEARTBEAT: Duration = Duration::from_secs(15);

/// Chooses the terminal status line when stderr is a terminal, plain heartbeat lines otherwise.
pub fn progress_for_stderr(label: &str) -> Box<dyn Progress> {
    if std::io::stderr().is_terminal() && std::env::var_os("FIREDUP_PLAIN").is_none() {
        Box::new(TerminalProgress::new(label))
    } else {
        Box::new(HeartbeatProgress {
            label: label.to_string(),
            last: None,
        })
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

fn status_text(s: &Status, at: Duration) -> String {
    let phase = s.phase.clone().unwrap_or_else(|| {
        if s.log_missing {
            "waiting for log".into()
        } else {
            "starting".into()
        }
    });
    let progress = s
        .progress
        .map(|p| format!(" {:.0}%", p * 100.0))
        .unwrap_or_default();
    let last = s
        .last_line
        .as_deref()
        .map(|l| format!(" | {}", truncate(l, 100)))
        .unwrap_or_default();
    let alive = if s.process_alive { "" } else { " (no process)" };
    format!("{phase}{progress} {}{alive}{last}", format_duration(at))
}

/// A live status line (spinner) on the terminal.
#[derive(Debug)]
pub struct TerminalProgress {
    bar: ProgressBar,
}

impl TerminalProgress {
    pub fn new(label: &str) -> Self {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {prefix} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_prefix(label.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        TerminalProgress { bar }
    }
}

impl Progress for TerminalProgress {
    fn phase(&mut self, phase: &str, at: Duration) {
        self.bar
            .println(format!("  [{:>7}] phase {phase}", format_duration(at)));
    }
    fn ready(&mut self, at: Duration, holding: Option<Duration>) {
        if let Some(h) = holding {
            self.bar.println(format!(
                "  [{:>7}] ready; holding {} to catch a crash",
                format_duration(at),
                format_duration(h)
            ));
        }
    }
    fn status(&mut self, s: &Status, at: Duration) {
        self.bar.set_message(status_text(s, at));
    }
    fn note(&mut self, text: &str, at: Duration) {
        self.bar
            .println(format!("  [{:>7}] {text}", format_duration(at)));
    }
    fn finish(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// Plain lines on stderr: every phase change, every note, and a heartbeat at least every 15 s.
#[derive(Debug)]
pub struct HeartbeatProgress {
    label: String,
    last: Option<Duration>,
}

impl HeartbeatProgress {
    fn say(&mut self, text: &str, at: Duration) {
        let mut e = std::io::stderr().lock();
        let _ = writeln!(
            e,
            "firedup [{}] {}: {text}",
            format_duration(at),
            self.label
        );
        self.last = Some(at);
    }
}

impl Progress for HeartbeatProgress {
    fn phase(&mut self, phase: &str, at: Duration) {
        self.say(&format!("phase {phase}"), at);
    }
    fn ready(&mut self, at: Duration, holding: Option<Duration>) {
        if let Some(h) = holding {
            self.say(
                &format!("ready; holding {} to catch a crash", format_duration(h)),
                at,
            );
        }
    }
    fn status(&mut self, s: &Status, at: Duration) {
        if self.last.is_none_or(|l| at.saturating_sub(l) >= HEARTBEAT) {
            self.say(&format!("still watching: {}", status_text(s, at)), at);
        }
    }
    fn note(&mut self, text: &str, at: Duration) {
        self.say(text, at);
    }
    fn finish(&mut self) {}
}

/// The final block for people.
pub fn render_final(o: &Outcome, teardown: Option<&str>) -> String {
    let mut s = String::new();
    let sig = o.signature.map(|x| format!(" ({x})")).unwrap_or_default();
    s.push_str(&format!(
        "firedup: {}{sig} after {}\n",
        o.verdict.as_str().to_uppercase(),
        format_duration(Duration::from_secs_f64(o.elapsed_s))
    ));
    s.push_str(&format!("  reason:  {}\n", o.reason));
    if let Some(l) = &o.line {
        s.push_str(&format!(
            "  line {}: {}\n",
            l.number,
            truncate(&l.text, 300)
        ));
    }
    if !o.context.is_empty() && o.verdict != Verdict::Ready {
        s.push_str("  context:\n");
        for c in &o.context {
            s.push_str(&format!("    | {}\n", truncate(c, 200)));
        }
    }
    if let Some(e) = &o.exit {
        s.push_str(&format!("  exit:    {}\n", e.describe()));
    }
    if !o.secondary.is_empty() {
        let names: Vec<&str> = o.secondary.iter().map(|x| x.as_str()).collect();
        s.push_str(&format!("  also:    {}\n", names.join(", ")));
    }
    if !o.timeline.is_empty() {
        let t: Vec<String> = o
            .timeline
            .iter()
            .map(|p| {
                format!(
                    "{} @{}",
                    p.phase,
                    format_duration(Duration::from_secs_f64(p.at_s))
                )
            })
            .collect();
        s.push_str(&format!("  timeline: {}\n", t.join(" → ")));
    }
    if let Some(pid) = o.pid {
        s.push_str(&format!("  pid:     {pid}\n"));
    }
    s.push_str(&format!("  log:     {}\n", o.log));
    if !o.run_id.is_empty() {
        s.push_str(&format!("  run:     {}\n", o.run_id));
    }
    if let Some(t) = teardown {
        s.push_str(&format!("  teardown: {t}\n"));
    }
    let next = match (o.verdict, o.run_id.is_empty()) {
        (Verdict::Ready, false) if o.server_running => format!(
            "firedup stop {}    (logs: firedup logs {} --follow)",
            o.run_id, o.run_id
        ),
        (Verdict::Ready | Verdict::Succeeded, _) => String::new(),
        (_, false) => format!("firedup logs {} --meaningful", o.run_id),
        (_, true) => format!("less +G {}", o.log),
    };
    if !next.is_empty() {
        s.push_str(&format!("  next:    {next}\n"));
    }
    s
}
