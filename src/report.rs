//! Reporting to people: on a terminal, one progress bar per startup phase (with the server's own
//! fraction where it prints one) and a status line; otherwise a plain line on stderr at each phase
//! change and a heartbeat at least every 15 s, so a watch is never silent; and the final block.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::duration::format_duration;
use crate::engine::Progress;
use crate::judge::Status;
use crate::verdict::{Outcome, Verdict};

const HEARTBEAT: Duration = Duration::from_secs(15);

/// Chooses the terminal status line when stderr is a terminal, plain heartbeat lines otherwise.
/// `last_time` is how the previous run of the same launch went, for the ETA.
pub fn progress_for_stderr(label: &str, last_time: Option<LastTime>) -> Box<dyn Progress> {
    if std::io::stderr().is_terminal() && std::env::var_os("FIREDUP_PLAIN").is_none() {
        let mut t = TerminalProgress::new(label);
        t.last_time = last_time;
        Box::new(t)
    } else {
        Box::new(HeartbeatProgress::new(label, last_time))
    }
}

// The data is the history's (`history::last_time` reads it); its words are the display's.
pub use crate::history::LastTime;

impl LastTime {
    /// The ETA words at `at`, in `phase` (its name and when it began), or before any phase.
    pub fn hint_at(&self, phase: Option<&(String, Duration)>, at: Duration) -> Option<String> {
        match phase {
            Some((p, since)) => self.hint(Some(p), at.saturating_sub(*since)),
            None => self.hint(None, at),
        }
    }

    /// How long `phase` (its name and when it began; before any phase: the whole start) took
    /// last time, in short words for the terminal's status line.
    pub fn took(&self, phase: Option<&(String, Duration)>) -> Option<String> {
        let took = match phase {
            Some((p, _)) => self.phases.iter().find(|(q, _)| q == p).map(|(_, s)| *s)?,
            None => self.ready_s?,
        };
        Some(format_duration(Duration::from_secs_f64(took)))
    }

    /// The ETA words for `phase` (or the start, before any phase), `so_far` into it.
    pub fn hint(&self, phase: Option<&str>, so_far: Duration) -> Option<String> {
        let took = match phase {
            Some(p) => self.phases.iter().find(|(q, _)| q == p).map(|(_, s)| *s)?,
            None => self.ready_s?,
        };
        let what = phase.unwrap_or("ready");
        Some(format!(
            "{what} took {} last time; {} so far",
            format_duration(Duration::from_secs_f64(took)),
            format_duration(so_far)
        ))
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

/// The status in one line: phase, fraction, time, liveness, GPU memory, the last line.
pub fn status_text(s: &Status, at: Duration) -> String {
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
    let last = match (&s.notify_status, &s.last_line) {
        (Some(st), _) => format!(" | status: {}", truncate(st, 100)),
        (None, Some(l)) => format!(" | {}", truncate(l, 100)),
        (None, None) => String::new(),
    };
    let alive = if s.process_alive { "" } else { " (no process)" };
    let gpu = s
        .gpu_mib
        .map(|m| format!(" gpu {}", format_mib(m)))
        .unwrap_or_default();
    format!(
        "{phase}{progress} {}{alive}{gpu}{last}",
        format_duration(at)
    )
}

fn format_mib(m: u64) -> String {
    if m >= 1024 {
        format!("{:.1} GiB", m as f64 / 1024.0)
    } else {
        format!("{m} MiB")
    }
}

/// On the terminal: one bar per phase, kept on screen as the phases pass, each filled with the
/// server's own fraction when it prints one (`Loading safetensors checkpoint shards: 45%`,
/// `Capturing batches 12/36`), otherwise a spinner; the current one carries the status.
#[derive(Debug)]
pub struct TerminalProgress {
    multi: MultiProgress,
    bar: ProgressBar,
    phase: Option<(String, Duration)>,
    fraction_shown: bool,
    last_time: Option<LastTime>,
}

fn spinner_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {prefix:.bold} {wide_msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
}

fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {prefix:.bold} [{bar:24}] {pos:>3}% {wide_msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl TerminalProgress {
    pub fn new(label: &str) -> Self {
        let multi = MultiProgress::new();
        let bar = multi.add(ProgressBar::new(100));
        bar.set_style(spinner_style());
        bar.set_prefix(label.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        multi.println(format!("firedup: watching {label}")).ok();
        TerminalProgress {
            multi,
            bar,
            phase: None,
            fraction_shown: false,
            last_time: None,
        }
    }
}

impl Progress for TerminalProgress {
    fn phase(&mut self, phase: &str, at: Duration) {
        // The finished phase keeps its line, with how long it took: printed above the bar as a
        // note is. A finished bar left in the MultiProgress was erased by the next note (indicatif
        // cleared the lines it had drawn, the finished one among them, and drew it no more).
        if let Some((name, since)) = self.phase.take() {
            self.multi
                .println(format!(
                    "  {name:<20} done in {} (from {})",
                    format_duration(at.saturating_sub(since)),
                    format_duration(since)
                ))
                .ok();
            self.bar.reset();
        }
        self.bar.set_style(spinner_style());
        self.bar.set_prefix(format!("{phase:<20}"));
        self.fraction_shown = false;
        self.phase = Some((phase.to_string(), at));
    }
    fn ready(&mut self, at: Duration, holding: Option<Duration>) {
        if let Some(h) = holding {
            self.bar.set_message(format!(
                "ready at {}; holding {} to catch a crash",
                format_duration(at),
                format_duration(h)
            ));
        }
    }
    fn status(&mut self, s: &Status, at: Duration) {
        if let Some(p) = s.progress.filter(|_| self.phase.is_some()) {
            if !self.fraction_shown {
                self.bar.set_style(bar_style());
                self.fraction_shown = true;
            }
            self.bar.set_position((p * 100.0).round() as u64);
        }
        // The bar already names the phase and shows the fraction.
        let mut msg = if self.phase.is_some() {
            let s = Status {
                phase: Some(String::new()),
                progress: None,
                ..s.clone()
            };
            status_text(&s, at).trim_start().to_string()
        } else {
            status_text(s, at)
        };
        if let Some(w) = s.waiting_for.first().filter(|_| s.waiting_for.len() == 1) {
            msg = format!("{msg} | waiting for {}", truncate(w, 80));
        }
        // The ETA comes first: the line is cut at the terminal's edge, and at 80 columns the
        // last log line alone fills it. The bar's prefix names the phase already.
        if let Some(took) = self
            .last_time
            .as_ref()
            .and_then(|lt| lt.took(self.phase.as_ref()))
        {
            msg = format!("took {took} last time | {msg}");
        }
        self.bar.set_message(msg);
    }
    fn note(&mut self, text: &str, at: Duration) {
        self.multi
            .println(format!("  [{:>7}] {text}", format_duration(at)))
            .ok();
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
    /// The last `--notify` STATUS= said, so each new one gets its line.
    said_status: Option<String>,
    phase_since: Duration,
    last_time: Option<LastTime>,
}

impl HeartbeatProgress {
    pub fn new(label: &str, last_time: Option<LastTime>) -> Self {
        HeartbeatProgress {
            label: label.to_string(),
            last: None,
            said_status: None,
            phase_since: Duration::ZERO,
            last_time,
        }
    }

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
        self.phase_since = at;
        let hint = self
            .last_time
            .as_ref()
            .and_then(|lt| lt.phases.iter().find(|(p, _)| p == phase))
            .map(|(_, s)| {
                format!(
                    " (took {} last time)",
                    format_duration(Duration::from_secs_f64(*s))
                )
            })
            .unwrap_or_default();
        self.say(&format!("phase {phase}{hint}"), at);
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
        // A server's own words about what it is doing (sd_notify STATUS=) are said when they
        // change, as a phase is, not only at the next heartbeat.
        if s.notify_status.is_some() && s.notify_status != self.said_status {
            self.said_status = s.notify_status.clone();
            let text = s.notify_status.as_deref().unwrap_or_default();
            self.say(&format!("status: {}", truncate(text, 200)), at);
            return;
        }
        if self.last.is_none_or(|l| at.saturating_sub(l) >= HEARTBEAT) {
            let since = if s.phase.is_some() {
                self.phase_since
            } else {
                Duration::ZERO
            };
            let hint = self
                .last_time
                .as_ref()
                .and_then(|lt| lt.hint(s.phase.as_deref(), at.saturating_sub(since)))
                .map(|h| format!(" | {h}"))
                .unwrap_or_default();
            self.say(&format!("still watching: {}{hint}", status_text(s, at)), at);
        }
    }
    fn note(&mut self, text: &str, at: Duration) {
        self.say(text, at);
    }
    fn finish(&mut self) {}
}

pub fn render_final(o: &Outcome, teardown: Option<&str>) -> String {
    let mut s = String::new();
    // The signature and, in a multi-process launch, the node and rank where the root cause
    // happened.
    let about: Vec<String> = o
        .signature
        .map(|x| x.to_string())
        .into_iter()
        .chain(o.node.as_ref().map(|n| format!("node {n}")))
        .chain(o.rank.map(|r| format!("rank {r}")))
        .collect();
    let sig = if about.is_empty() {
        String::new()
    } else {
        format!(" ({})", about.join(", "))
    };
    s.push_str(&format!(
        "firedup: {}{sig} after {}\n",
        printed_verdict::verdict_word(o.verdict),
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
    for p in &o.probes {
        let when = match p.ready_s {
            Some(r) => format!("ready at {}", format_duration(Duration::from_secs_f64(r))),
            None => "never ready".to_string(),
        };
        let gap = match (p.kind.as_str(), o.request_gap_s) {
            ("request", Some(g)) => format!(
                ", {} after health",
                format_duration(Duration::from_secs_f64(g.max(0.0)))
            ),
            _ => String::new(),
        };
        s.push_str(&format!(
            "  probe:   {} {} {when}{gap}: {}\n",
            p.kind,
            p.target,
            truncate(&p.last, 160)
        ));
    }
    if let Some(g) = &o.gpu {
        let mut line = format!(
            "  gpu:     peak {}, last {}",
            format_mib(g.peak_mib),
            format_mib(g.last_mib)
        );
        if let Some(a) = g.after_teardown_mib {
            line.push_str(&format!(", {} still held after teardown", format_mib(a)));
        }
        if let Some(e) = &g.error {
            line.push_str(&format!(" (nvidia-smi failed: {e})"));
        }
        s.push_str(&line);
        s.push('\n');
    }
    if let Some(pid) = o.pid {
        s.push_str(&format!("  pid:     {pid}\n"));
    }
    // A field firedup never got (the log of a run on a host it could not reach) is left out.
    match o.log_from_line {
        _ if o.log.is_empty() => {}
        Some(n) => s.push_str(&format!(
            "  log:     {} (appended to: this run starts at line {n}; earlier lines were not judged)\n",
            o.log
        )),
        None => s.push_str(&format!("  log:     {}\n", o.log)),
    }
    // A remote server's URL names its host: say that it is that host's address, not this one's.
    if let (Some(url), Some(host)) = (&o.url, &o.host) {
        s.push_str(&format!(
            "  url:     {url} (on {host}, as given to --host)\n"
        ));
    }
    if !o.run_id.is_empty() {
        s.push_str(&format!("  run:     {}\n", o.run_id));
    }
    if let Some(t) = teardown {
        s.push_str(&format!("  teardown: {t}\n"));
    }
    // Only a log on this machine can be looked at here; one on a host is the host's to open.
    let log_readable = o.host.is_some()
        || std::fs::File::open(&o.log).is_ok_and(|f| f.metadata().is_ok_and(|m| m.is_file()));
    if let Some(next) = next_command(o, log_readable) {
        s.push_str(&format!("  next:    {next}\n"));
    }
    s
}

/// What to type next, if anything: for a run on a host, with `--host HOST` (the run lives there).
/// A log that was never written or cannot be read (`log_readable` false) gets no `less` that
/// would fail: the line says so, and where the log was expected.
fn next_command(o: &Outcome, log_readable: bool) -> Option<String> {
    let host = o
        .host
        .as_deref()
        .map(|h| format!("--host {h} "))
        .unwrap_or_default();
    // An attach by log has an id for the history only: `logs`/`stop` could not open it.
    let id = if o.attached { "" } else { o.run_id.as_str() };
    match (o.verdict, id.is_empty()) {
        (Verdict::Ready, false) if o.server_running => Some(format!(
            "firedup stop {host}{id}    (logs: firedup logs {host}{id} --follow)"
        )),
        (Verdict::MonitorError, false) if o.server_running => Some(format!(
            "firedup watch {host}{id}    (or stop it: firedup stop {host}{id})"
        )),
        (Verdict::Ready | Verdict::Succeeded, _) => None,
        (_, false) => Some(format!("firedup logs {host}{id} --meaningful")),
        (_, true) if o.log.is_empty() => None,
        (_, true) if !log_readable => Some(format!(
            "no log to read: nothing readable was written at {} (check the path, and that the server writes its log there)",
            o.log
        )),
        (_, true) => Some(match &o.host {
            Some(h) => format!("ssh {h} less +G {}", o.log),
            None => format!("less +G {}", o.log),
        }),
    }
}

#[cfg(test)]
mod tests;

/// A verdict reached before any watch could start: firedup could not reach or use the host.
pub fn transport_verdict(json: bool, host: Option<&str>, reason: String) -> i32 {
    let mut o = Outcome::without_watch(Verdict::MonitorError, reason, "", "", None);
    o.host = host.map(String::from);
    print_outcome(json, &o, None, None);
    o.verdict.exit_code()
}

mod printed_verdict;
pub use printed_verdict::print_outcome;
