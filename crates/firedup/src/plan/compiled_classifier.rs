//! The classifier a plan needs, compiled once per process for one set of patterns.
//!
//! Compiling the catalog (its literal automaton and regex sets) is most of the CPU a launch
//! spends before its command starts. A run resolves its plan twice (before the launch, so that
//! a usage mistake launches nothing, and again against the launched log), and a matrix once per
//! cell: each time for the same patterns. So the last classifier compiled is kept, keyed by
//! everything it was compiled from, and cloned for the next plan that asks for the same
//! patterns (a clone shares the compiled regexes and automaton).

use std::sync::Mutex;

use crate::classify::{Classifier, ClassifierSpec, PatternError};

/// The last classifier compiled, with the [`key`] of the spec it was compiled from.
static LAST: Mutex<Option<(String, Classifier)>> = Mutex::new(None);

/// The classifier for `spec`: the last one compiled when it was compiled from the same spec.
pub(super) fn compiled(spec: &ClassifierSpec) -> Result<Classifier, PatternError> {
    let key = key(spec);
    if let Ok(last) = LAST.lock() {
        if let Some((k, c)) = last.as_ref().filter(|(k, _)| *k == key) {
            debug_assert_eq!(k, &key);
            return Ok(c.clone());
        }
    }
    let classifier = Classifier::new(spec)?;
    if let Ok(mut last) = LAST.lock() {
        *last = Some((key, classifier.clone()));
    }
    Ok(classifier)
}

/// What `spec` compiles to, in words: every rule's name, strength and patterns in order, and the
/// other patterns. Not the rules' examples, which only the tests read: with them (the spec's
/// whole `Debug` text) the key was 112 KB, held for the life of the process (issue 28, peak
/// RSS).
fn key(spec: &ClassifierSpec) -> String {
    use std::fmt::Write;
    let mut key = String::new();
    for s in &spec.signatures {
        let _ = write!(key, "{:?} {:?} {:?};", s.name, s.strength, s.patterns);
    }
    let _ = write!(
        key,
        "{:?} {:?} {:?} {:?}",
        spec.fail_lines, spec.ready_lines, spec.noise, spec.phases
    );
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::ReadyLine;

    fn spec(ready: &str, fail: &[&str]) -> ClassifierSpec {
        ClassifierSpec {
            signatures: Vec::new(),
            fail_lines: fail.iter().map(|s| s.to_string()).collect(),
            ready_lines: vec![ReadyLine::new(ready).unwrap()],
            noise: Vec::new(),
            phases: Vec::new(),
        }
    }

    #[test]
    fn a_classifier_comes_from_its_own_patterns_whatever_was_compiled_before() {
        // (ready line, fail lines, a line, whether it is the ready line, whether it is fatal)
        let cases: &[(&str, &[&str], &str, bool, bool)] = &[
            ("^serving$", &[], "serving", true, false),
            ("^serving$", &["boom"], "boom", false, true),
            ("^listening$", &["boom"], "serving", false, false),
            ("^listening$", &["boom"], "listening", true, false),
            ("^listening$", &[], "boom", false, false),
            ("^serving$", &[], "serving", true, false),
        ];
        for (ready, fail, line, is_ready, is_fatal) in cases {
            let c = compiled(&spec(ready, fail)).unwrap();
            let got = c.classify(line);
            assert_eq!(
                (!got.ready.is_empty(), !got.hits.is_empty()),
                (*is_ready, *is_fatal),
                "{ready} {fail:?} on {line:?}: {got:?}"
            );
        }
    }

    #[test]
    fn the_key_tells_apart_what_compiles_differently_and_only_that() {
        use crate::classify::{SignatureSpec, Strength};
        let rule = |name: &str, strength, pattern: &str, example: &str| SignatureSpec {
            name: name.into(),
            strength,
            patterns: vec![pattern.into()],
            examples: vec![example.into()],
        };
        let with = |r: SignatureSpec| ClassifierSpec {
            signatures: vec![r],
            ..spec("^ready$", &[])
        };
        let base = with(rule(
            "cuda_oom",
            Strength::Fatal,
            "out of memory",
            "an example",
        ));
        // (what changed, the spec, whether its key is the base's)
        let cases = [
            (
                "nothing",
                with(rule(
                    "cuda_oom",
                    Strength::Fatal,
                    "out of memory",
                    "an example",
                )),
                true,
            ),
            (
                "an example only",
                with(rule("cuda_oom", Strength::Fatal, "out of memory", "other")),
                true,
            ),
            (
                "a pattern",
                with(rule(
                    "cuda_oom",
                    Strength::Fatal,
                    "out of mem",
                    "an example",
                )),
                false,
            ),
            (
                "the strength",
                with(rule(
                    "cuda_oom",
                    Strength::Evidence,
                    "out of memory",
                    "an example",
                )),
                false,
            ),
            (
                "the name",
                with(rule("nccl", Strength::Fatal, "out of memory", "an example")),
                false,
            ),
            (
                "a fail line",
                ClassifierSpec {
                    fail_lines: vec!["boom".into()],
                    ..base.clone()
                },
                false,
            ),
        ];
        for (what, s, same) in cases {
            assert_eq!(key(&s) == key(&base), same, "{what}");
        }
    }
}
