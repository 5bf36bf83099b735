//! The nodes of a group watched together to one verdict, and ended together.
//!
//! Each node's run is watched on a thread of its own, to its own verdict (its own judge, its
//! own agent: a link to one node that drops is that node's lost contact, and reconnects as a
//! single run's does). The group decides by [`firedup_judge::group`]'s rule once:
//! - every node has its verdict; or
//! - in server mode, node 0 is ready and no other node has ended (with `ready_on_all`: every
//!   node is ready); or
//! - a node's verdict fails the group, and [`firedup_judge::group::settle`] says the others can
//!   no longer change the verdict (each has read its log and checked its processes past the
//!   cause with no earlier cause of its own: each node's watch says how far it has looked), or
//!   its bound passed (the node that failed first is often not the first to say so: its peers'
//!   collectives time out while its own launcher is still reporting). The nodes still running
//!   are then stopped, and their verdicts, the stop's echoes, never decide. How it was decided
//!   is the verdict's `settled`.
//!
//! A failed group is stopped on every node (each stop verified there) unless `keep`; a ready
//! one is left serving; a group that succeeded has nothing left, which each node's end checks.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::NodeSession;
use crate::host::{Host, RunStop};
use crate::session::{EndPolicy, Session, Watched, stop_in_words};
use crate::verdict::{NodeTeardown, Outcome, Verdict};
use firedup_judge::group::settle::{NodeProgress, Running, Settle, settle};
use firedup_judge::group::{NodeEnd, fails_the_group, group_verdict};
use firedup_judge::verdict::GroupSettled;

/// How much further a node's watch must have looked before it tells the group again (the
/// group re-decides at each word; a chatty log would otherwise wake it at every line).
const CHECKED_STEP: Duration = Duration::from_millis(100);

/// How long a node stopped by the group has to end its watch with the stop's verdict.
const STOPPED_WATCH_WAIT: Duration = Duration::from_secs(60);

/// How many nodes' watches have recorded their verdict in the node's own run directory (over
/// SSH: `__record-verdict`), shared with whoever must not end the process before they have (a
/// signal's handler: the stop it made ends each node's watch, whose verdict is the node's
/// record for a later `watch --host NODE RUN_ID` or `ps --host NODE`).
#[derive(Debug, Clone, Default)]
pub struct Recorded(Arc<(std::sync::Mutex<usize>, std::sync::Condvar)>);

impl Recorded {
    fn note(&self) {
        let (count, changed) = &*self.0;
        if let Ok(mut c) = count.lock() {
            *c += 1;
        }
        changed.notify_all();
    }

    /// Waits until `n` verdicts are recorded, at most `bound`; how many are.
    pub fn wait_for(&self, n: usize, bound: Duration) -> usize {
        let (count, changed) = &*self.0;
        let Ok(c) = count.lock() else { return 0 };
        match changed.wait_timeout_while(c, bound, |c| *c < n) {
            Ok((c, _)) => *c,
            Err(_) => 0,
        }
    }
}

/// How the group ended.
#[derive(Debug, Clone)]
pub struct GroupEnding {
    /// The group's one verdict (`node`, `nodes` filled in).
    pub outcome: Outcome,
    /// Each node's teardown in words, when something was done.
    pub teardown: Option<String>,
}

/// What the group keeps of a node while its watch runs elsewhere.
struct Watching {
    node_rank: u32,
    name: String,
    host: Arc<dyn Host>,
    run_id: String,
    log: String,
    pid: Option<u32>,
    launched_at: Duration,
    /// Its verdict and its session, once the watch ended.
    ended: Option<(Box<Session>, Outcome)>,
    /// How far its watch has looked, while it runs.
    progress: NodeProgress,
    stopped: Option<String>,
    /// What its stop found (the group's, or its own end's), for the verdict's `nodes`.
    teardown: Option<NodeTeardown>,
}

/// What the group hears of its nodes while they are watched.
#[derive(Debug)]
pub enum NodeNews<'a> {
    /// A note about one node's watch (`lost contact with HOST: ...`, `reconnected to HOST`).
    Note {
        /// The node's rank.
        node_rank: u32,
        /// The host as given.
        node: &'a str,
        /// The note.
        text: &'a str,
    },
    /// A node's own verdict.
    Verdict(&'a NodeEnd),
}

/// A node's watch thread's messages.
enum Message {
    Note(usize, String),
    Checked(usize, NodeProgress),
    Ended(usize, Box<Session>, Box<Outcome>),
}

/// A node's progress: only its notes and how far it has looked go on, to the group.
struct Notes {
    node: usize,
    tx: mpsc::Sender<Message>,
    told: NodeProgress,
}

impl crate::engine::Progress for Notes {
    fn phase(&mut self, _: &str, _: Duration) {}
    fn ready(&mut self, _: Duration, _: Option<Duration>) {}
    fn status(&mut self, _: &crate::judge::Status, _: Duration) {}
    fn note(&mut self, text: &str, _: Duration) {
        let _ = self.tx.send(Message::Note(self.node, text.to_string()));
    }
    fn finish(&mut self) {}
    fn checked(&mut self, through: Duration, judge: &crate::judge::Judge) {
        let step = self
            .told
            .checked_through
            .is_none_or(|t| through >= t + CHECKED_STEP);
        let pending_cause = judge.pending_cause();
        let placed = judge.places_now();
        if step || pending_cause != self.told.pending_cause || placed != self.told.placed {
            self.told = NodeProgress {
                checked_through: Some(through),
                pending_cause,
                placed,
                last_progress: Some(judge.last_progress_at()),
            };
            let _ = self.tx.send(Message::Checked(self.node, self.told.clone()));
        }
    }
}

/// Watches `nodes` to the group's one verdict and ends them (see the module doc). `heard` is
/// told of each node's notes and own verdict as they come; `recorded` counts the nodes whose
/// verdict is recorded on their host.
pub fn watch(
    group_id: &str,
    nodes: Vec<NodeSession>,
    (server, ready_on_all, keep): (bool, bool, bool),
    recorded: &Recorded,
    heard: &mut dyn FnMut(NodeNews<'_>),
) -> GroupEnding {
    let (tx, rx) = mpsc::channel::<Message>();
    let mut watching: Vec<Watching> = Vec::new();
    for (i, n) in nodes.into_iter().enumerate() {
        let t = n.session.target();
        watching.push(Watching {
            node_rank: n.node_rank,
            name: n.name.clone(),
            host: Arc::clone(n.session.host()),
            run_id: t.run_id.clone(),
            log: t.log.display().to_string(),
            pid: t.pid,
            launched_at: n.launched_at,
            ended: None,
            progress: NodeProgress::default(),
            stopped: None,
            teardown: None,
        });
        let tx = tx.clone();
        let mut session = Box::new(n.session);
        let recorded = recorded.clone();
        std::thread::spawn(move || {
            let mut notes = Notes {
                node: i,
                tx: tx.clone(),
                told: NodeProgress::default(),
            };
            let watched = session.watch(&mut notes, None, None);
            let Watched::Verdict(outcome) = watched else {
                return;
            };
            session.record_verdict(&outcome);
            recorded.note();
            let _ = tx.send(Message::Ended(i, session, outcome));
        });
    }
    drop(tx);
    // The clock `settle` is asked on: `failed_at` and now, from here.
    let t0 = Instant::now();
    let mut failed_at: Option<Duration> = None;
    let mut settled: Option<GroupSettled> = None;
    loop {
        let all_ended = watching.iter().all(|w| w.ended.is_some());
        let ready = server && {
            let ready = |w: &Watching| {
                w.ended
                    .as_ref()
                    .is_some_and(|(_, o)| o.verdict == Verdict::Ready)
            };
            match ready_on_all {
                true => watching.iter().all(ready),
                false => ready(&watching[0]) && watching[1..].iter().all(|w| w.ended.is_none()),
            }
        };
        if all_ended || (ready && failed_at.is_none()) {
            break;
        }
        let got = match failed_at {
            Some(at) => match settle_now(&watching, server, at, t0.elapsed()) {
                Settle::Decide(s) => {
                    settled = Some(s);
                    break;
                }
                Settle::WaitUntil(until) => {
                    match rx.recv_timeout(until.saturating_sub(t0.elapsed())) {
                        Ok(m) => Some(m),
                        Err(mpsc::RecvTimeoutError::Timeout) => continue,
                        // Every watch thread is gone: nothing more will come; the nodes
                        // without a verdict are stopped.
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
            },
            None => rx.recv().ok(),
        };
        let (i, session, outcome) = match got {
            Some(Message::Ended(i, session, outcome)) => (i, session, *outcome),
            Some(Message::Checked(i, progress)) => {
                watching[i].progress = progress;
                continue;
            }
            Some(Message::Note(i, text)) => {
                let w = &watching[i];
                heard(NodeNews::Note {
                    node_rank: w.node_rank,
                    node: &w.name,
                    text: &text,
                });
                continue;
            }
            // Every watch thread is gone without a verdict: nothing more will come.
            None => break,
        };
        let end = node_end(&watching[i], outcome.clone(), false);
        heard(NodeNews::Verdict(&end));
        if fails_the_group(&end, server) && failed_at.is_none() {
            failed_at = Some(t0.elapsed());
        }
        watching[i].ended = Some((session, outcome));
    }
    if let (Some(at), None) = (failed_at, &settled) {
        // Every node had its verdict (or every watch was gone) before `settle` was asked again.
        if let Settle::Decide(s) = settle_now(&watching, server, at, t0.elapsed()) {
            settled = Some(s);
        }
    }
    let mut ending = finish(group_id, watching, rx, server, keep, failed_at.is_some());
    if failed_at.is_some() {
        ending.outcome.settled = settled;
    }
    ending
}

/// What [`settle`] says of the nodes now: those with a verdict, and how far the others looked.
fn settle_now(watching: &[Watching], server: bool, failed_at: Duration, now: Duration) -> Settle {
    let ended: Vec<NodeEnd> = watching
        .iter()
        .filter_map(|w| w.ended.as_ref().map(|(_, o)| node_end(w, o.clone(), false)))
        .collect();
    let running: Vec<Running> = watching
        .iter()
        .filter(|w| w.ended.is_none())
        .map(|w| Running {
            node_rank: w.node_rank,
            node: w.name.clone(),
            launched_at: w.launched_at,
            progress: w.progress.clone(),
        })
        .collect();
    settle(&ended, &running, server, failed_at, now)
}

/// The group's verdict from what each node said (the nodes still running stopped first when
/// the group failed), and each node ended as the verdict says.
fn finish(
    group_id: &str,
    mut watching: Vec<Watching>,
    rx: mpsc::Receiver<Message>,
    server: bool,
    keep: bool,
    failed: bool,
) -> GroupEnding {
    if failed && !keep {
        let grace_of = |w: &Watching| w.ended.as_ref().map(|(s, _)| s.grace());
        let grace = watching
            .iter()
            .find_map(grace_of)
            .unwrap_or(crate::session::DEFAULT_GRACE);
        std::thread::scope(|scope| {
            for w in watching.iter_mut().filter(|w| w.ended.is_none()) {
                scope.spawn(move || {
                    let (said, stop) = stop_in_words(w.host.as_ref(), &w.run_id, grace);
                    w.teardown = Some(node_teardown(stop.as_ref(), &said));
                    w.stopped = Some(said);
                });
            }
        });
        let deadline = Instant::now() + STOPPED_WATCH_WAIT;
        while watching
            .iter()
            .any(|w| w.stopped.is_some() && w.ended.is_none())
        {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                break;
            };
            match rx.recv_timeout(left) {
                Ok(Message::Ended(i, session, outcome)) => {
                    watching[i].ended = Some((session, *outcome))
                }
                Ok(Message::Note(..)) | Ok(Message::Checked(..)) => {}
                Err(_) => break,
            }
        }
    }
    let mut ends = Vec::new();
    let mut teardown = Vec::new();
    for w in &mut watching {
        let stopped_by_group = w.stopped.is_some();
        let mut outcome = match w.ended.as_mut() {
            Some((session, outcome)) => {
                let policy = match (failed, keep, stopped_by_group) {
                    (true, false, false) => EndPolicy::Stop,
                    _ => EndPolicy::Run { keep },
                };
                let ending = session.end(outcome, policy);
                // The group's own stop of the node, when it made one, says most.
                match (&w.teardown, &ending.stop, &ending.teardown, policy) {
                    (Some(_), ..) => {}
                    (None, Some(stop), ..) => w.teardown = Some(node_teardown(Some(stop), "")),
                    (None, None, Some(said), EndPolicy::Stop) => {
                        w.teardown = Some(node_teardown(None, said))
                    }
                    _ => {}
                }
                if let Some(said) = ending.teardown.or(w.stopped.clone()) {
                    teardown.push(format!("node {} ({}): {said}", w.node_rank, w.name));
                }
                outcome.clone()
            }
            None => {
                if let Some(said) = &w.stopped {
                    teardown.push(format!("node {} ({}): {said}", w.node_rank, w.name));
                }
                still_running(w, stopped_by_group)
            }
        };
        if stopped_by_group {
            // Where its ranks were when the group decided, looked at while it was silent: not
            // what its watch saw after the stop (the stop's own lines are progress).
            outcome.placed = w.progress.placed.clone();
        }
        ends.push(node_end(w, outcome, stopped_by_group));
    }
    let mut outcome = group_verdict(group_id, &ends, server);
    if let Some(nodes) = outcome.nodes.as_mut() {
        for (n, w) in nodes.iter_mut().zip(&watching) {
            n.teardown = w.teardown.clone();
        }
    }
    if failed {
        outcome.server_running = ends.iter().any(|e| e.outcome.server_running);
    }
    GroupEnding {
        outcome,
        teardown: (!teardown.is_empty()).then(|| teardown.join("; ")),
    }
}

/// A node with no verdict of its own: serving while the group is ready (or kept, `--keep`), or
/// stopped by the group with its watch not over.
fn still_running(w: &Watching, stopped: bool) -> Outcome {
    let (verdict, reason) = match stopped {
        false => (Verdict::Ready, "its processes live".to_string()),
        true => (
            Verdict::MonitorError,
            "stopped by the group; its watch did not end".to_string(),
        ),
    };
    let mut o = Outcome::without_watch(verdict, reason, &w.run_id, &w.log, w.pid);
    o.server_running = !stopped;
    o.host = w.host.name().map(String::from);
    o
}

/// A node's teardown for the verdict's `nodes`: what its stop found, verified on that node, or
/// `said` when the stop could not be made there.
fn node_teardown(stop: Option<&RunStop>, said: &str) -> NodeTeardown {
    match stop {
        Some(s) => NodeTeardown {
            clean: Some(s.clean()),
            description: s.describe(),
        },
        None => NodeTeardown {
            clean: None,
            description: said.to_string(),
        },
    }
}

fn node_end(w: &Watching, outcome: Outcome, stopped_by_group: bool) -> NodeEnd {
    NodeEnd {
        node_rank: w.node_rank,
        node: w.name.clone(),
        outcome,
        launched_at: w.launched_at,
        stopped_by_group,
    }
}
