//! A log line that means ready (`--ready-line REGEX`, a profile's `ready = [...]`): one typed value
//! from the flags to the judge. It is compiled when it is made (so holding one means the regex is
//! valid), it is matched by the classifier's pattern set, and reports name it by its text
//! (`ready line /REGEX/`). The judge tracks the ready lines in the order the classifier holds them,
//! so no index or string has to agree between two places.

use regex::Regex;

use super::{PatternError, compile};

/// A compiled ready line.
#[derive(Debug, Clone)]
pub struct ReadyLine {
    regex: Regex,
}

/// Why `pattern` cannot tell one line from another, when it cannot: it matches the empty line,
/// so it matches every line (`.*`, `x*`, `""`). The one rule for `--ready-line`, `--fail-line`
/// and a profile file's `ready` patterns: such a pattern would give a false verdict at once.
/// `None` for a pattern that can miss (an invalid one is the regex parser's to report).
pub fn matches_every_line(pattern: &str) -> Option<&'static str> {
    Regex::new(pattern)
        .is_ok_and(|re| re.is_match(""))
        .then_some("matches every line (it matches an empty one): give a pattern that only the meant line matches")
}

impl ReadyLine {
    /// Compiles `pattern`; an invalid one is a usage error naming `--ready-line`.
    pub fn new(pattern: &str) -> Result<ReadyLine, PatternError> {
        Ok(ReadyLine {
            regex: compile("--ready-line", pattern)?,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        self.regex.as_str()
    }

    /// The compiled pattern.
    pub fn regex(&self) -> &Regex {
        &self.regex
    }

    /// How reports name this readiness condition: `ready line /REGEX/`.
    pub fn condition(&self) -> String {
        format!("ready line /{}/", self.as_str())
    }
}

impl PartialEq for ReadyLine {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for ReadyLine {}

impl std::fmt::Display for ReadyLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ready_line_keeps_its_text_and_names_a_bad_pattern() {
        let r = ReadyLine::new(r"Uvicorn running on \S+").unwrap();
        assert_eq!(r.as_str(), r"Uvicorn running on \S+");
        assert_eq!(r.condition(), r"ready line /Uvicorn running on \S+/");
        assert!(r.regex().is_match("Uvicorn running on http://0.0.0.0:8000"));
        let err = ReadyLine::new("(unclosed").unwrap_err().to_string();
        assert!(
            err.starts_with("invalid regex in --ready-line '(unclosed'"),
            "{err}"
        );
    }
}
