//! What the remote agent and the local firedup say to each other over SSH: one JSON object per
//! line.
//!
//! Local → agent (stdin, once): an [`AgentSpec`]: what to watch, the probes to run there, where
//! to resume the log. Agent → local (stdout): `hello`, then observations stamped with seconds
//! since the watch's time zero (by the remote clock, so the remote server's timing is judged, not
//! the link's), a `mark` after each batch of log lines (the byte offset of the last line boundary,
//! the next line number and the next line sequence number: where a new agent resumes so that no
//! line is lost or doubled), a `heartbeat` every second (a silent link is detected by its absence),
//! a `note` for what the user should hear about the watch (a batch job requeued), and `end` after
//! the process's exit (or the batch job's end) was observed.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::judge::Observation;
use crate::plan::ProbePlan;

/// Where to resume following the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    pub offset: u64,
    pub line: u64,
    /// Sequence number of the next log line segment.
    pub seq: u64,
}

/// What the agent watches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentSpec {
    /// A run id of the agent's host (its run directory gives log, pid and exit record).
    pub run_id: Option<String>,
    /// The log, when attaching by path.
    pub log: Option<PathBuf>,
    pub pid: Option<u32>,
    pub line_cap: usize,
    pub from_end: bool,
    pub resume: Option<Resume>,
    pub probes: ProbePlan,
    pub sample_every_ms: u64,
    /// Time zero of the watch as a Unix time by the agent host's clock; `None`: the run's launch
    /// time, or now when attaching by path.
    pub t0_unix: Option<f64>,
    /// A Slurm job to watch by its state as well as its log (`log` is its `StdOut=`), when
    /// attaching to one submitted some other way; a run whose record names a job is watched as
    /// one without it.
    #[serde(default)]
    pub slurm_job: Option<String>,
}

/// One message from the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub(crate) enum WireEvent {
    Hello {
        version: String,
        /// Time zero of this watch (Unix time, agent host clock).
        t0_unix: f64,
        log: String,
        pid: Option<u32>,
    },
    Obs {
        /// Seconds since time zero.
        t: f64,
        /// For log lines: the segment's sequence number (for exactly-once delivery); else 0.
        seq: u64,
        obs: Observation,
    },
    Mark(Resume),
    Heartbeat {
        t: f64,
        /// When the last look that read the log to its end and checked the processes began
        /// (seconds since time zero): everything seen by then was sent before this heartbeat.
        /// Absent from an agent older than this field.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        through: Option<f64>,
    },
    /// Whether the agent's reader is behind the log (a backlog handed over in slices): while it
    /// is, the judge is not ticked (see `crate::observe::log_reader`). Sent when it changes.
    Backlog {
        waiting: bool,
        /// While waiting: seconds since time zero by which everything the log held was read
        /// (the judge may be ticked up to then).
        #[serde(default)]
        through: Option<f64>,
    },
    /// Something the user should know about the watch itself (a Slurm job was requeued).
    Note {
        t: f64,
        text: String,
    },
    /// The agent could not start watching (the run id is unknown, ...).
    Error {
        message: String,
    },
    End,
}

impl WireEvent {
    pub(crate) fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{\"k\":\"end\"}".into())
    }
    /// Read by the SSH side ([`crate::remote::source`]) and the tests.
    #[cfg(any(feature = "ssh", test))]
    pub(crate) fn parse(line: &str) -> Result<WireEvent, String> {
        serde_json::from_str(line).map_err(|e| format!("bad message from the agent: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::LogState;
    use crate::probe::{ProbeKind, ProbeOutcome};
    use crate::verdict::ExitInfo;

    #[test]
    fn every_message_round_trips() {
        let table = vec![
            WireEvent::Hello {
                version: "0.1.0".into(),
                t0_unix: 1.5,
                log: "/l".into(),
                pid: Some(4),
            },
            WireEvent::Obs {
                t: 0.25,
                seq: 7,
                obs: Observation::Line {
                    number: 3,
                    text: "a \"quoted\" line\twith ünïcode".into(),
                },
            },
            WireEvent::Obs {
                t: 1.0,
                seq: 0,
                obs: Observation::Log(LogState::Missing { dir_exists: false }),
            },
            WireEvent::Obs {
                t: 1.0,
                seq: 0,
                obs: Observation::Exited(Some(ExitInfo::signal(9, false))),
            },
            WireEvent::Obs {
                t: 2.0,
                seq: 0,
                obs: Observation::Probe {
                    kind: ProbeKind::Http,
                    outcome: ProbeOutcome::Up {
                        detail: "HTTP 200".into(),
                        latency: std::time::Duration::from_millis(3),
                        ours: true,
                    },
                },
            },
            // The live ranks reach a firedup elsewhere the same way.
            WireEvent::Obs {
                t: 2.5,
                seq: 9,
                obs: Observation::RankEnded {
                    rank: 1,
                    pid: 4321,
                    exit: Some(ExitInfo::signal(9, false)),
                },
            },
            WireEvent::Obs {
                t: 2.75,
                seq: 10,
                obs: Observation::RankOutsideCollective {
                    rank: 1,
                    evidence:
                        "rank 1 sleeps in hrtimer_nanosleep while rank 0 waits in futex_do_wait"
                            .into(),
                },
            },
            // Where each rank was: a group compares them across its nodes.
            WireEvent::Obs {
                t: 2.8,
                seq: 0,
                obs: Observation::RankPlaces {
                    ranks: vec![
                        firedup_judge::rank_place::RankPlace {
                            rank: 1,
                            place: firedup_judge::rank_place::Place::Outside(
                                "sleeps in hrtimer_nanosleep".into(),
                            ),
                        },
                        firedup_judge::rank_place::RankPlace {
                            rank: 2,
                            place: firedup_judge::rank_place::Place::Unknown,
                        },
                    ],
                },
            },
            // A batch job's state reaches a firedup elsewhere (`run --slurm --host`).
            WireEvent::Obs {
                t: 2.9,
                seq: 0,
                obs: Observation::Job(firedup_judge::job::JobSnapshot {
                    scheduler: "slurm".into(),
                    id: "42".into(),
                    state: "RUNNING".into(),
                    nodes: vec!["node1".into()],
                    ..Default::default()
                }),
            },
            WireEvent::Mark(Resume {
                offset: 10,
                line: 2,
                seq: 8,
            }),
            WireEvent::Heartbeat {
                t: 3.0,
                through: None,
            },
            WireEvent::Heartbeat {
                t: 3.0,
                through: Some(2.75),
            },
            WireEvent::Backlog {
                waiting: true,
                through: Some(2.5),
            },
            WireEvent::Note {
                t: 3.5,
                text: "job 7 was requeued (Restarts=1): its log continues".into(),
            },
            WireEvent::Error {
                message: "no run x".into(),
            },
            WireEvent::End,
        ];
        for e in table {
            let line = e.to_line();
            assert!(!line.contains('\n'), "{line}");
            assert_eq!(WireEvent::parse(&line).unwrap(), e, "{line}");
        }
        assert!(WireEvent::parse("{\"k\":\"nope\"}").is_err());
        // An older agent's heartbeat has no `through`.
        assert_eq!(
            WireEvent::parse("{\"k\":\"heartbeat\",\"t\":1.5}").unwrap(),
            WireEvent::Heartbeat {
                t: 1.5,
                through: None
            }
        );
    }
}
