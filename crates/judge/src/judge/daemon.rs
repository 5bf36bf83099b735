//! A launcher that exited 0 leaving a daemon (server mode): the run goes on in the daemon, named in
//! every verdict's reason. A daemon whose output goes elsewhere than the log (`redis-server
//! --daemonize yes` sends it to `/dev/null`) can never print its ready line there: waiting for it
//! would end `stalled` and stop a working server. So its readiness is the probes' alone (a
//! listener owned by the run), and with no probe the watch ends at once, `monitor_error`, saying
//! why the log cannot tell and what would.

use std::time::Duration;

use super::Judge;
use super::decide::Decision;
use super::output::Event;
use crate::verdict::Verdict;

impl Judge {
    /// The launcher exited 0 at `at` and the run goes on in `pid`, whose output goes to `output`
    /// when not to the log.
    pub(super) fn on_launcher_left(
        &mut self,
        at: Duration,
        pid: u32,
        command: String,
        output: Option<String>,
        events: &mut Vec<Event>,
    ) {
        self.pid = Some(pid);
        self.alive = true;
        self.gone_at = None;
        self.progressed(at);
        let followed = format!("the launcher exited 0; followed the daemon pid {pid} ({command})");
        let waiting_for_lines = self.ready_seen.iter().any(|seen| !seen);
        let Some(output) = output.filter(|_| waiting_for_lines) else {
            self.followed = Some(followed);
            return;
        };
        if self.probes.is_empty() {
            self.followed = Some(followed);
            let reason = format!(
                "the daemon's output goes to {output}, not to the log, so its ready line can never be seen there, and no probe was planned: give --port N or --http URL to judge it by a probe"
            );
            self.decide(at, Decision::new(Verdict::MonitorError, reason), events);
            return;
        }
        self.followed = Some(format!(
            "{followed}; its output goes to {output}, not to the log: the probes decide"
        ));
        self.lines_unseeable = Some(output);
        self.check_ready(at, events);
    }
}
