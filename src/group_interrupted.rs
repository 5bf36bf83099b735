//! What a multi-node `firedup run` says and records when SIGINT (Ctrl-C), SIGTERM or SIGHUP ends
//! it: one line per node on stderr, the group recorded in the history as interrupted (its
//! `nodes` as far as they were launched), and its record (`groups/GROUP_ID.json`) given that
//! verdict, `over` when every node's stop was clean. The ending itself (each node stopped, or
//! left running under `--keep`) is the library's one handler (`firedup::session::interrupts`).
//!
//! Each node's stop ends that node's watch with the node's own verdict (`killed`, firedup run
//! stopped it), which the watch records in the node's run directory on its host; the process
//! does not exit before every node's is recorded, for at most [`NODE_RECORD_WAIT`], so that a
//! later `watch --host NODE RUN_ID` or `ps --host NODE` tells how the node ended.
//!
//! This runs on the handler's thread while the process is about to exit: a write to a stderr
//! whose reader is gone fails quietly, and the history is written after the lines.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::launch::LaunchSpec;
use crate::verdict::{NodeReport, NodeTeardown, Outcome, Verdict};
use firedup::group::record::GroupRecord;
use firedup::group::watch::Recorded;
use firedup::session::interrupts::{Heard, InterruptedRun, RunEnded, signal_name};

/// What the handler needs to say and record an interrupted group.
#[derive(Debug)]
pub struct GroupContext {
    /// The group's record, its nodes filled in once every node is launched.
    pub record: GroupRecord,
    /// The hosts as given, in node-rank order.
    pub names: Vec<String>,
    /// The launch as the history records it (the group's name).
    pub spec: LaunchSpec,
    pub spec_hash: String,
    /// When the launch began: the times reported count from it.
    pub launched_at: Instant,
    /// The nodes whose own verdict is recorded on their host.
    pub recorded: Recorded,
}

/// How long the process waits, once every node is stopped, for each node's watch to record its
/// verdict on its host (the watch learns of the end, then one SSH command).
pub const NODE_RECORD_WAIT: Duration = Duration::from_secs(15);

/// How long the whole report may take ([`firedup::session::interrupts::Interrupts::allow_report`]).
pub const REPORT_WAIT: Duration = Duration::from_secs(20);

/// Says and records what a signal ended (the handler's callback). The runs were registered in
/// node-rank order, so the n-th run is node n.
pub fn report(context: &Arc<Mutex<GroupContext>>, heard: &Heard) {
    let Heard::Ended(ended) = heard else {
        return;
    };
    let Ok(c) = context.lock() else { return };
    let signal = signal_name(ended.signal);
    let after = crate::duration::format_duration(c.launched_at.elapsed());
    let mut teardown = Vec::new();
    let mut nodes = Vec::new();
    let mut clean = true;
    for (i, run) in ended.runs.iter().enumerate() {
        let name = c.names.get(i).map_or("?", String::as_str);
        let (said, ok) = ended_in_words(run);
        clean &= ok;
        let _ = writeln!(
            std::io::stderr(),
            "firedup: interrupted ({signal}): node {i} ({name}) {}: {said}",
            run.target.run_id
        );
        teardown.push(format!("node {i} ({name}): {said}"));
        nodes.push(NodeReport {
            node_rank: i as u32,
            node: name.to_string(),
            pid: run.target.pid,
            exit: None,
            phase: None,
            log: run.target.log.display().to_string(),
            timeline: Vec::new(),
            teardown: node_teardown(run),
        });
    }
    let Some(first) = nodes.first() else {
        let _ = writeln!(
            std::io::stderr(),
            "firedup: interrupted ({signal}) after {after}, before the launch: nothing was started"
        );
        return;
    };
    let mut outcome = Outcome::without_watch(
        Verdict::MonitorError,
        format!("interrupted ({signal}) after {after}, before a verdict"),
        &c.record.id,
        &first.log,
        first.pid,
    );
    outcome.elapsed_s = (c.launched_at.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
    outcome.name = c.record.name.clone();
    outcome.server_running = !clean;
    outcome.nodes = Some(nodes);
    let mut record = c.record.clone();
    record.outcome = Some(outcome.clone());
    record.over = clean;
    if let Err(e) = record.write() {
        let _ = writeln!(std::io::stderr(), "firedup: {e}");
    }
    crate::history::record_interrupted(&c.spec, &c.spec_hash, &outcome, &teardown.join("; "));
    // Only the nodes stopped here end their watch; one left running (--keep) has no verdict.
    let stopped = ended
        .runs
        .iter()
        .filter(|r| matches!(r.ended, RunEnded::Stopped(Ok(_))))
        .count();
    let got = c.recorded.wait_for(stopped, NODE_RECORD_WAIT);
    if got < stopped {
        let _ = writeln!(
            std::io::stderr(),
            "firedup: {} of {stopped} stopped node(s) have their verdict recorded on their host after {}; `firedup ps --host NODE --all` tells how the others ended",
            got,
            crate::duration::format_duration(NODE_RECORD_WAIT)
        );
    }
}

/// A node's stop as the JSON's `nodes[].teardown` says it (none for a node left running).
fn node_teardown(run: &InterruptedRun) -> Option<NodeTeardown> {
    match &run.ended {
        RunEnded::Kept | RunEnded::Cancelled => None,
        RunEnded::Stopped(Ok(stop)) => Some(NodeTeardown {
            clean: Some(stop.clean()),
            description: stop.describe(),
        }),
        RunEnded::Stopped(Err(e)) => Some(NodeTeardown {
            clean: None,
            description: format!("stopping failed: {e}"),
        }),
    }
}

/// A node's ending in words, and whether nothing of it is left.
fn ended_in_words(run: &InterruptedRun) -> (String, bool) {
    match &run.ended {
        RunEnded::Kept | RunEnded::Cancelled => ("left running (--keep)".to_string(), false),
        RunEnded::Stopped(Ok(stop)) => (stop.describe(), stop.clean()),
        RunEnded::Stopped(Err(e)) => (format!("stopping failed: {e}"), false),
    }
}
