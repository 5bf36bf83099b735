//! What a run's directory records about how the run went, read in one piece: what `firedup
//! watch RUN_ID` of a run that has ended reports (over SSH, `__meta` sends it along).

use serde::{Deserialize, Serialize};

/// What a run's directory records about how the run went: the verdict its launching firedup
/// reached, the exit the supervisor recorded, firedup's own stop. A re-attach to a run that has
/// ended reports them as recorded (see [`crate::reattach`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunRecords {
    /// `verdict.json`.
    #[serde(default)]
    pub verdict: Option<crate::verdict::Outcome>,
    /// `exit.json`.
    #[serde(default)]
    pub exit: Option<super::ExitRecord>,
    /// `stop.json`.
    #[serde(default)]
    pub stop: Option<super::StopRecord>,
}

impl RunRecords {
    /// The records of `run`.
    pub fn of(run: &super::RunDir) -> RunRecords {
        RunRecords {
            verdict: run.verdict(),
            exit: run.exit(),
            stop: run.stop_record(),
        }
    }
}
