//! `stop.json`: firedup's own stop of a run, written in the run directory before the first
//! signal (who stopped it, when, with what grace) and again after it with what the stop found.
//! A watch reads it: an exit that came after it is firedup's doing, not someone else's (see
//! [`crate::judge::Observation::FiredupStop`]).

use serde::{Deserialize, Serialize};

use super::{RunDir, now_unix, read_json, write_json};
use crate::error::Result;

/// The file's name in the run directory.
const STOP_FILE: &str = "stop.json";

/// A stop firedup made of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StopRecord {
    /// The firedup command that stopped it: `firedup stop`, `firedup run` (a verdict's
    /// teardown, or an interrupted run), `firedup __stop` (a stop over SSH), or the program
    /// that uses the library.
    pub by: String,
    /// The stopping process.
    pub pid: u32,
    /// Its user.
    pub uid: u32,
    /// When the stop began, before its first signal: Unix time in seconds.
    pub requested_at: f64,
    /// The grace between SIGTERM and SIGKILL, in seconds.
    pub grace_s: f64,
    /// What the stop found, once it is over (`None` while it runs, or when firedup died first).
    #[serde(default)]
    pub result: Option<StopResult>,
}

/// What a stop found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StopResult {
    /// Nothing of the run is left.
    pub clean: bool,
    /// SIGKILL was needed.
    pub escalated: bool,
    /// The processes still alive at the end.
    pub survivors: Vec<u32>,
    /// The stop in one phrase, as `firedup stop` says it.
    pub description: String,
}

impl StopRecord {
    /// A stop beginning now, by this process.
    pub fn begin(grace: std::time::Duration) -> StopRecord {
        StopRecord {
            by: stopper(std::env::args()),
            pid: std::process::id(),
            uid: rustix::process::getuid().as_raw(),
            requested_at: now_unix(),
            grace_s: grace.as_secs_f64(),
            result: None,
        }
    }

    /// Who stopped the run, in words: `firedup stop (pid 412, uid 1000)`.
    pub fn describe(&self) -> String {
        format!("{} (pid {}, uid {})", self.by, self.pid, self.uid)
    }

    /// Whether this stop explains an end at `ended_at` (Unix time): it began before.
    pub fn explains_end_at(&self, ended_at: f64) -> bool {
        self.requested_at <= ended_at
    }
}

/// The stopping command from its arguments: `firedup SUBCOMMAND` (the first word that is not a
/// flag; `firedup --host h stop X` names `--host`'s value, so values of the global flags are
/// skipped by name), or the program's own name when it is not firedup (the library).
fn stopper(args: impl Iterator<Item = String>) -> String {
    let args: Vec<String> = args.collect();
    let program = args
        .first()
        .map(|a| {
            std::path::Path::new(a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .unwrap_or_default();
    // Over SSH the program is the agent copied to the host (`firedup-0.1.0-<hash>`).
    let copied_agent = program
        .strip_prefix(concat!("firedup-", env!("CARGO_PKG_VERSION"), "-"))
        .is_some_and(|hash| !hash.is_empty() && hash.bytes().all(|b| b.is_ascii_hexdigit()));
    if program != "firedup" && !copied_agent {
        return format!("{program} (the firedup library)");
    }
    let mut words = args.iter().skip(1);
    while let Some(w) = words.next() {
        if w == "--host" {
            words.next();
        } else if !w.starts_with('-') {
            return format!("firedup {w}");
        }
    }
    "firedup".into()
}

impl RunDir {
    /// Reads `stop.json`; `None` when firedup never stopped the run (or it is unreadable).
    pub fn stop_record(&self) -> Option<StopRecord> {
        read_json(&self.path.join(STOP_FILE)).ok()
    }

    /// Writes `stop.json` atomically, unless it already holds a stop that explains the exit
    /// recorded (a later `firedup stop` of a run that firedup stopped before changes nothing).
    pub fn write_stop_record(&self, rec: &StopRecord) -> Result<()> {
        let explained = match (self.stop_record(), self.exit()) {
            (Some(old), Some(exit)) => {
                old.requested_at != rec.requested_at && old.explains_end_at(exit.ended_at)
            }
            _ => false,
        };
        if explained {
            return Ok(());
        }
        write_json(&self.path.join(STOP_FILE), rec)
    }
}

/// [`crate::stop::stop_run`] of `run`, recorded in its directory (`stop.json`, see
/// [`StopRecord`]): before the first signal, so that a watch learns of the stop
/// before the exit it causes, and again with what the stop found. A record that cannot be
/// written does not hold the stop up.
pub(crate) fn stop_recorded_run(
    run: &super::RunDir,
    pid: Option<u32>,
    start_ticks: Option<u64>,
    grace: std::time::Duration,
) -> crate::stop::StopReport {
    let mut record = StopRecord::begin(grace);
    let _ = run.write_stop_record(&record);
    let report = crate::stop::stop_run(pid, start_ticks, &run.id, grace);
    record.result = Some(StopResult {
        clean: report.clean(),
        escalated: report.escalated,
        survivors: report.survivors.iter().map(|(p, _)| *p).collect(),
        description: report.describe(),
    });
    let _ = run.write_stop_record(&record);
    report
}

#[cfg(test)]
mod tests {
    use super::{RunDir, StopRecord, stopper};
    use crate::rundir::ExitRecord;

    #[test]
    fn a_later_stop_keeps_the_record_of_the_stop_that_ended_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir {
            id: "r-1".into(),
            path: dir.path().to_path_buf(),
        };
        let at = |t: f64| StopRecord {
            requested_at: t,
            ..StopRecord::begin(std::time::Duration::from_secs(10))
        };
        let exit = |t: f64| ExitRecord {
            exit: None,
            spawn_error: None,
            ended_at: t,
        };
        // (stop before, the exit recorded, the stop now, the record kept)
        let cases = [
            (None, None, 100.0, 100.0),
            (Some(100.0), None, 200.0, 200.0),
            // The first stop ended the run (it began before the exit): it stays.
            (Some(100.0), Some(101.0), 200.0, 100.0),
            // The run had ended before the first stop: that stop explains nothing.
            (Some(100.0), Some(50.0), 200.0, 200.0),
            // The same stop, written again with what it found.
            (Some(100.0), Some(101.0), 100.0, 100.0),
        ];
        for (before, ended, now, kept) in cases {
            let _ = std::fs::remove_file(dir.path().join("stop.json"));
            let _ = std::fs::remove_file(dir.path().join("exit.json"));
            if let Some(t) = before {
                run.write_stop_record(&at(t)).unwrap();
            }
            if let Some(t) = ended {
                run.write_exit(&exit(t)).unwrap();
            }
            run.write_stop_record(&at(now)).unwrap();
            let got = run.stop_record().unwrap().requested_at;
            assert_eq!(got, kept, "{before:?} {ended:?} {now}");
        }
    }

    #[test]
    fn the_stopper_is_named_by_its_subcommand() {
        let cases: &[(&[&str], &str)] = &[
            (&["/usr/bin/firedup", "stop", "x-1"], "firedup stop"),
            (&["firedup", "--host", "gpu1", "stop", "x"], "firedup stop"),
            (&["firedup", "run", "--json", "--", "sh"], "firedup run"),
            (&["/tmp/firedup", "__stop", "x", "10"], "firedup __stop"),
            (
                &["/t/deps/library_api-12ab"],
                "library_api-12ab (the firedup library)",
            ),
            (
                &[
                    concat!(
                        "/tmp/fd/firedup-",
                        env!("CARGO_PKG_VERSION"),
                        "-00ab12cd34ef5678"
                    ),
                    "__stop",
                    "x",
                ],
                "firedup __stop",
            ),
            (
                &["/tmp/fd/firedup-old-build"],
                "firedup-old-build (the firedup library)",
            ),
        ];
        for (args, want) in cases {
            let got = stopper(args.iter().map(|s| s.to_string()));
            assert_eq!(got, *want, "{args:?}");
        }
    }
}
