//! Readiness probes as the judge tracks them: each one's latest outcome (up, not yet, someone
//! else's answer, an answer refusing the probe, firedup's own fault), when it first came up, and
//! its faults in a row (this many end the watch as `monitor_error`, unless a fatal line settles:
//! then that failure is the verdict). A refusing answer (404, 401, a redirect) counts as a fault
//! only once every ready line was seen (at once when readiness is the probes alone): before that,
//! the log still says what the server is doing, and the answer may be another server's (vLLM
//! whose port is taken prints its bind failure seconds after the other server's 404s). sd_notify is a probe too (`READY=1`), and its `STATUS=` and
//! `EXTEND_TIMEOUT_USEC=` are progress and a later start deadline.

use std::time::Duration;

use super::decide::Decision;
use super::output::Event;
use super::{Judge, JudgeConfig, round_ms};
use crate::notify_message::NotifyMessage;
use crate::probe_outcome::ProbeOutcome;
use crate::profile::ProbeKind;
use crate::verdict::{ProbeReport, Verdict};

/// One readiness probe as the judge tracks it.
#[derive(Debug, Clone)]
pub(super) struct ProbeTrack {
    pub(super) kind: ProbeKind,
    pub(super) target: String,
    pub(super) up: bool,
    /// The latest `Up` came from a listener seen to be the run's own (`ProbeOutcome::Up::ours`).
    pub(super) ours: bool,
    first_up: Option<Duration>,
    pub(super) last: String,
    latency: Option<Duration>,
    faults_in_a_row: u32,
}

impl ProbeTrack {
    /// The probes `cfg` waits for, none probed yet.
    pub(super) fn for_config(cfg: &JudgeConfig) -> Vec<ProbeTrack> {
        cfg.ready_probes
            .iter()
            .map(|(kind, target)| ProbeTrack {
                kind: *kind,
                target: target.clone(),
                up: false,
                ours: false,
                first_up: None,
                last: "not probed yet".into(),
                latency: None,
                faults_in_a_row: 0,
            })
            .collect()
    }
}

impl Judge {
    /// What each probe saw, for the report.
    pub(super) fn probe_reports(&self) -> Vec<ProbeReport> {
        self.probes
            .iter()
            .map(|p| ProbeReport {
                kind: p.kind.as_str().to_string(),
                target: p.target.clone(),
                from: self.cfg.probe_origin.clone(),
                ready_s: p.first_up.map(|d| round_ms(d.as_secs_f64())),
                last: p.last.clone(),
                latency_ms: p
                    .latency
                    .map(|l| (l.as_secs_f64() * 10_000.0).round() / 10.0),
            })
            .collect()
    }

    pub(super) fn on_probe(
        &mut self,
        at: Duration,
        kind: ProbeKind,
        outcome: ProbeOutcome,
        events: &mut Vec<Event>,
    ) {
        let Some(i) = self.probes.iter().position(|p| p.kind == kind) else {
            return;
        };
        let limit = self.cfg.probe_fault_limit;
        let ready = self.stage.ready_at().is_some();
        let settling = self.stage.settling().is_some();
        let lines_all_seen = self.ready_seen.iter().all(|s| *s);
        let p = &mut self.probes[i];
        p.last = outcome.detail().to_string();
        match outcome {
            ProbeOutcome::Up { latency, ours, .. } => {
                p.up = true;
                p.ours = ours;
                p.latency = Some(latency);
                p.first_up.get_or_insert(at);
                p.faults_in_a_row = 0;
            }
            ProbeOutcome::NotYet { .. } | ProbeOutcome::Foreign { .. } => {
                // Once ready, a probe's later answers do not take readiness back: the verdict
                // (or the hold) is about the process, and the probe thread stops at the verdict.
                if !ready {
                    p.up = false;
                    p.ours = false;
                }
                p.faults_in_a_row = 0;
            }
            ProbeOutcome::Rejected { .. } if !ready && !lines_all_seen => {
                // An HTTP answer that refuses the probe, before the log says ready: the log still
                // tells what the server is doing (a server that could not bind prints so, and the
                // answer was someone else's); not a fault of firedup's yet.
                p.up = false;
                p.ours = false;
                p.faults_in_a_row = 0;
            }
            ProbeOutcome::Fault { ref detail } | ProbeOutcome::Rejected { ref detail } => {
                p.faults_in_a_row += 1;
                if !ready {
                    p.up = false;
                    p.ours = false;
                }
                // A fatal line that settles decides: the failure it names is the verdict, and a
                // probe of a failing server (or of whoever took its port) says nothing more.
                if p.faults_in_a_row >= limit && !settling {
                    let what = if matches!(outcome, ProbeOutcome::Rejected { .. }) {
                        "was refused"
                    } else {
                        "failed"
                    };
                    let reason = format!(
                        "firedup's {} probe of {} {what} {} times in a row: {detail}",
                        kind.as_str(),
                        p.target,
                        p.faults_in_a_row
                    );
                    self.decide(at, Decision::new(Verdict::MonitorError, reason), events);
                    return;
                }
            }
        }
        self.check_ready(at, events);
        self.end_window_on_evidence(events);
    }

    pub(super) fn on_notify(&mut self, at: Duration, msg: NotifyMessage, events: &mut Vec<Event>) {
        if let Some(s) = msg.status {
            // A new status is a sign of progress, like a new log line.
            if self.notify_status.as_deref() != Some(s.as_str()) {
                self.progressed(at);
            }
            self.notify_status = Some(s);
        }
        if let Some(ext) = msg.extend_timeout {
            // systemd: "extend the start timeout to now + this"; also a sign of life.
            let until = at + ext;
            if let Some(t) = self.timeout_at.as_mut() {
                *t = (*t).max(until);
            }
            self.progressed(at);
        }
        if msg.ready {
            if let Some(p) = self.probes.iter_mut().find(|p| p.kind == ProbeKind::Notify) {
                p.up = true;
                p.first_up.get_or_insert(at);
                p.last = "READY=1".into();
            }
            self.check_ready(at, events);
        }
    }
}
