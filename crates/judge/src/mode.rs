//! What a watch waits for: a server's readiness or a job's exit. One type for the switch that the
//! command line spells `--until ready|exit`, a profile `until = "ready"|"exit"` and a run's
//! `meta.json` `"mode": "ready"|"exit"`; serialized as those same strings.

use serde::{Deserialize, Serialize};

/// Server mode or job mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Mode {
    /// `--until ready`: the verdict is `ready` once every readiness condition held.
    #[default]
    #[serde(rename = "ready")]
    UntilReady,
    /// `--until exit`: watch until the process ends.
    #[serde(rename = "exit")]
    UntilExit,
}

impl Mode {
    /// The name on the command line, in profiles and in `meta.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::UntilReady => "ready",
            Mode::UntilExit => "exit",
        }
    }

    /// The mode named `name` (`ready` or `exit`).
    pub fn from_name(name: &str) -> Option<Mode> {
        [Mode::UntilReady, Mode::UntilExit]
            .into_iter()
            .find(|m| m.as_str() == name)
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_as_the_strings_scripts_see() {
        for (mode, name) in [(Mode::UntilReady, "ready"), (Mode::UntilExit, "exit")] {
            assert_eq!(mode.as_str(), name);
            assert_eq!(Mode::from_name(name), Some(mode));
            let json = serde_json::to_string(&mode).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<Mode>(&json).unwrap(), mode);
        }
        assert_eq!(Mode::from_name("Ready"), None);
    }
}
