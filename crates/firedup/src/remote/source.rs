//! The remote agent's stream as a source for the judge loop.
//!
//! A transport thread (with its own small async runtime) connects, starts `firedup __agent` on the
//! host with the watch's spec on stdin, and forwards every message. A link that stays silent for
//! [`HEARTBEAT_TIMEOUT`] (the agent sends a heartbeat every second) or breaks is "lost contact":
//! the source says so at once (never "still starting"), stops the judge's clock (nothing can be
//! concluded about a server firedup cannot see), and the thread reconnects with backoff. A new
//! agent resumes the log at the last mark (byte offset and line number of the last line boundary)
//! and line segments carry sequence numbers, so every line is judged exactly once. If contact is
//! not regained within `reconnect_for`, the verdict is `monitor_error` with the transport's reason;
//! the server keeps running on the host. A first connection that fails (unreachable, auth, host
//! key) is a `monitor_error` at once: there is nothing to wait for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::HostSpec;
use super::session;
use crate::duration::format_duration;
use crate::judge::Observation;
use crate::source::{Seen, Source};
use crate::wire::{AgentSpec, Resume, WireEvent};

/// Silence longer than this means the link is gone.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a freshly started agent may take to say its first line. The command runs through
/// the user's login shell, whose rc files can take seconds (conda, environment modules on a
/// network home, pyenv's rehash waiting for its lock): that is not a lost link, and judging it
/// by [`HEARTBEAT_TIMEOUT`] would kill every attempt mid-rc and never reconnect.
pub const AGENT_START_TIMEOUT: Duration = Duration::from_secs(60);
/// Connect timeout while reconnecting (the first connection uses the user's).
const RECONNECT_TIMEOUT: Duration = Duration::from_secs(5);

enum Inbound {
    Connected { first: bool },
    Wire(WireEvent),
    Lost(String),
    Fatal(String),
}

#[derive(Debug, Default)]
struct Shared {
    resume: Option<Resume>,
    t0_unix: Option<f64>,
}

/// Observations from a remote agent.
pub struct RemoteSource {
    host: String,
    rx: Receiver<Inbound>,
    queue: Vec<Inbound>,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    /// The agent's last time reading and when it arrived.
    clock: Option<(f64, Instant)>,
    connected: bool,
    lost: Option<(Instant, String)>,
    reconnect_for: Duration,
    last_seq: u64,
    /// The agent's reader is behind the log ([`WireEvent::Backlog`]).
    agent_behind: bool,
    /// While behind: up to when the agent has read everything the log held.
    agent_through: Option<Duration>,
    ended: bool,
    gave_up: bool,
    resume_hint: String,
    /// See [`Source::checked_through`]: the agent's word, in its heartbeats.
    checked: Option<Duration>,
}

impl std::fmt::Debug for RemoteSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSource")
            .field("host", &self.host)
            .field("connected", &self.connected)
            .finish_non_exhaustive()
    }
}

impl RemoteSource {
    /// Starts the transport thread for `spec` on `host`. `resume_hint` is the command that
    /// re-attaches later (shown when contact is lost for good).
    /// `reached` says the host was already reached by this command (the launch went through), so
    /// a failing first connection of the stream is lost contact, not a reason to give up at once.
    pub fn start(
        host: HostSpec,
        spec: AgentSpec,
        reconnect_for: Duration,
        resume_hint: &str,
        reached: bool,
    ) -> RemoteSource {
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Mutex::new(Shared {
            resume: spec.resume,
            t0_unix: spec.t0_unix,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let name = host.destination.clone();
        {
            let shared = shared.clone();
            let stop = stop.clone();
            std::thread::spawn(move || transport(host, spec, shared, tx, stop, reached));
        }
        RemoteSource {
            host: name,
            rx,
            queue: Vec::new(),
            shared,
            stop,
            clock: None,
            connected: false,
            lost: None,
            reconnect_for,
            last_seq: 0,
            agent_behind: false,
            agent_through: None,
            ended: false,
            gave_up: false,
            resume_hint: resume_hint.to_string(),
            checked: None,
        }
    }

    /// The agent's clock read `t` (a line's time may be earlier: when the log held it, see
    /// `crate::observe::log_reader`): the clock never goes back.
    fn tick_clock(&mut self, t: f64) {
        let now = self.clock.map(|_| self.now().as_secs_f64());
        if now.is_none_or(|now| t >= now) {
            self.clock = Some((t, Instant::now()));
        }
    }
}

impl Drop for RemoteSource {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Source for RemoteSource {
    fn collect(&mut self, out: &mut Vec<Seen>) {
        while let Ok(m) = self.rx.try_recv() {
            self.queue.push(m);
        }
        for m in std::mem::take(&mut self.queue) {
            match m {
                Inbound::Connected { first } => {
                    self.connected = true;
                    if let (false, Some((since, _))) = (first, self.lost.take()) {
                        let at = self.shared.lock().map(|s| s.resume).ok().flatten();
                        out.push(Seen::Note(
                            self.now(),
                            format!(
                                "reconnected to {} after {}{}",
                                self.host,
                                format_duration(since.elapsed()),
                                at.map(|r| format!(
                                    "; resuming the log at byte {} (line {})",
                                    r.offset, r.line
                                ))
                                .unwrap_or_default()
                            ),
                        ));
                    }
                }
                Inbound::Wire(w) => match w {
                    WireEvent::Hello {
                        t0_unix, log, pid, ..
                    } => {
                        let first = {
                            let mut s = self.shared.lock().expect("shared state");
                            let first = s.t0_unix.is_none();
                            s.t0_unix.get_or_insert(t0_unix);
                            first
                        };
                        if first {
                            out.push(Seen::Note(
                                Duration::ZERO,
                                format!(
                                    "connected to {}; following {log}{}",
                                    self.host,
                                    pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
                                ),
                            ));
                        }
                    }
                    WireEvent::Obs { t, seq, obs } => {
                        if seq > 0 {
                            if seq <= self.last_seq {
                                continue; // already judged before the link dropped
                            }
                            self.last_seq = seq;
                        }
                        self.tick_clock(t);
                        out.push(Seen::Obs(Duration::from_secs_f64(t.max(0.0)), obs));
                    }
                    WireEvent::Mark(r) => {
                        if let Ok(mut s) = self.shared.lock() {
                            s.resume = Some(r);
                        }
                    }
                    WireEvent::Heartbeat { t, through } => {
                        self.tick_clock(t);
                        // Everything the agent saw by `through` came before this heartbeat.
                        if let Some(c) = through.map(|c| Duration::from_secs_f64(c.max(0.0))) {
                            self.checked = Some(self.checked.map_or(c, |p| p.max(c)));
                        }
                    }
                    WireEvent::Backlog { waiting, through } => {
                        self.agent_behind = waiting;
                        self.agent_through = through.map(|t| Duration::from_secs_f64(t.max(0.0)));
                    }
                    WireEvent::Note { t, text } => {
                        out.push(Seen::Note(Duration::from_secs_f64(t.max(0.0)), text))
                    }
                    WireEvent::Error { message } => out.push(Seen::Obs(
                        self.now(),
                        Observation::MonitorFault(format!("on {}: {message}", self.host)),
                    )),
                    WireEvent::End => self.ended = true,
                },
                Inbound::Lost(reason) => {
                    if self.connected || self.lost.is_none() {
                        out.push(Seen::Note(
                            self.now(),
                            format!(
                                "lost contact with {}: {reason}; reconnecting (for up to {})",
                                self.host,
                                format_duration(self.reconnect_for)
                            ),
                        ));
                    }
                    self.connected = false;
                    match self.lost.as_mut() {
                        Some((_, r)) => *r = reason,
                        None => self.lost = Some((Instant::now(), reason)),
                    }
                }
                Inbound::Fatal(reason) => {
                    self.gave_up = true;
                    out.push(Seen::Obs(self.now(), Observation::MonitorFault(reason)));
                }
            }
        }
        if let Some((since, reason)) = &self.lost {
            if !self.gave_up && since.elapsed() >= self.reconnect_for {
                self.gave_up = true;
                self.stop.store(true, Ordering::Relaxed);
                out.push(Seen::Obs(
                    self.now(),
                    Observation::MonitorFault(format!(
                        "lost contact with {} for {}: {reason}; the server may still be running there: {}",
                        self.host,
                        format_duration(self.reconnect_for),
                        self.resume_hint
                    )),
                ));
            }
        }
    }

    fn wait(&mut self, until: Instant) {
        let timeout = until.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(timeout) {
            Ok(m) => self.queue.push(m),
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {}
        }
    }

    fn now(&self) -> Duration {
        match self.clock {
            // While the link is down the clock stands still: nothing can be concluded.
            Some((t, at)) if self.connected => {
                Duration::from_secs_f64((t + at.elapsed().as_secs_f64()).max(0.0))
            }
            Some((t, _)) => Duration::from_secs_f64(t.max(0.0)),
            None => Duration::ZERO,
        }
    }

    fn next_wake(&self) -> Instant {
        Instant::now() + Duration::from_millis(250)
    }

    fn can_tick(&self) -> bool {
        self.connected && self.clock.is_some()
    }

    fn caught_up(&self) -> bool {
        !self.agent_behind
    }

    fn read_through(&self) -> Option<Duration> {
        self.agent_through
    }

    fn checked_through(&self) -> Option<Duration> {
        self.checked
    }
}

fn transport(
    host: HostSpec,
    spec: AgentSpec,
    shared: Arc<Mutex<Shared>>,
    tx: Sender<Inbound>,
    stop: Arc<AtomicBool>,
    reached: bool,
) {
    let rt = match session::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = tx.send(Inbound::Fatal(e));
            return;
        }
    };
    rt.block_on(async move {
        let mut first = true;
        let mut backoff = Duration::from_millis(250);
        while !stop.load(Ordering::Relaxed) {
            let mut h = host.clone();
            if !first {
                h.connect_timeout = RECONNECT_TIMEOUT;
            }
            let remote = match session::open(&h).await {
                Ok(r) => r,
                Err(e) => {
                    if first && !reached {
                        let _ = tx.send(Inbound::Fatal(e));
                        return;
                    }
                    if tx.send(Inbound::Lost(e)).is_err() {
                        return;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(4));
                    continue;
                }
            };
            let mut spec = spec.clone();
            if let Ok(s) = shared.lock() {
                spec.resume = s.resume;
                spec.t0_unix = s.t0_unix;
            }
            let outcome = stream(&remote, &spec, &tx, first, &stop).await;
            remote.close().await;
            match outcome {
                StreamEnd::Done => return,
                StreamEnd::Fatal(e) if first && !reached => {
                    let _ = tx.send(Inbound::Fatal(e));
                    return;
                }
                StreamEnd::Fatal(e) | StreamEnd::Lost(e) => {
                    if tx.send(Inbound::Lost(e)).is_err() {
                        return;
                    }
                }
            }
            first = false;
            backoff = Duration::from_millis(250);
            tokio::time::sleep(backoff).await;
        }
    });
}

enum StreamEnd {
    /// The agent said `end` (or firedup stopped listening).
    Done,
    Lost(String),
    Fatal(String),
}

async fn stream(
    remote: &session::Remote,
    spec: &AgentSpec,
    tx: &Sender<Inbound>,
    first: bool,
    stop: &AtomicBool,
) -> StreamEnd {
    let mut cmd = remote.firedup_command(&["__agent"]);
    cmd.stdin(openssh::Stdio::piped())
        .stdout(openssh::Stdio::piped())
        .stderr(openssh::Stdio::null());
    let mut child = match cmd.spawn().await {
        Ok(c) => c,
        Err(e) => {
            return StreamEnd::Lost(format!("cannot start the agent on {}: {e}", remote.host));
        }
    };
    let line = match serde_json::to_string(spec) {
        Ok(l) => l,
        Err(e) => return StreamEnd::Fatal(format!("cannot encode the agent spec: {e}")),
    };
    if let Some(mut w) = child.stdin().take() {
        if w.write_all(format!("{line}\n").as_bytes()).await.is_err() {
            return StreamEnd::Lost(format!(
                "the link to {} broke while starting the agent",
                remote.host
            ));
        }
        let _ = w.flush().await;
        // Keep stdin open: its end tells nothing, and closing it early is harmless either way.
        drop(w);
    }
    let Some(stdout) = child.stdout().take() else {
        return StreamEnd::Fatal("the agent's output is not available".into());
    };
    let mut lines = BufReader::new(stdout).lines();
    let mut announced = false;
    loop {
        if stop.load(Ordering::Relaxed) {
            return StreamEnd::Done;
        }
        let limit = if announced {
            HEARTBEAT_TIMEOUT
        } else {
            AGENT_START_TIMEOUT
        };
        match tokio::time::timeout(limit, lines.next_line()).await {
            Ok(Ok(Some(text))) => {
                let ev = match WireEvent::parse(&text) {
                    Ok(ev) => ev,
                    Err(e) => return StreamEnd::Fatal(format!("{}: {e}", remote.host)),
                };
                if !announced {
                    announced = true;
                    if tx.send(Inbound::Connected { first }).is_err() {
                        return StreamEnd::Done;
                    }
                }
                let end = matches!(ev, WireEvent::End);
                if let WireEvent::Error { message } = &ev {
                    return StreamEnd::Fatal(format!("on {}: {message}", remote.host));
                }
                if tx.send(Inbound::Wire(ev)).is_err() || end {
                    return StreamEnd::Done;
                }
            }
            Ok(Ok(None)) => {
                return StreamEnd::Lost(format!("the SSH connection to {} closed", remote.host));
            }
            Ok(Err(e)) => {
                return StreamEnd::Lost(format!("reading from {} failed: {e}", remote.host));
            }
            Err(_) if announced => {
                return StreamEnd::Lost(format!(
                    "no heartbeat from {} for {}",
                    remote.host,
                    format_duration(HEARTBEAT_TIMEOUT)
                ));
            }
            Err(_) => {
                return StreamEnd::Lost(format!(
                    "the agent on {} said nothing for {} after it was started (a login shell \
                     that hangs in its rc files?)",
                    remote.host,
                    format_duration(AGENT_START_TIMEOUT)
                ));
            }
        }
    }
}
