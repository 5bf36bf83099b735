//! Turning one cleaned log line into what it means: failure signatures it shows, readiness conditions
//! it satisfies, the startup phase it begins, a progress fraction, or noise.
//!
//! Pure and per line: no state, no I/O. All patterns are compiled into one `RegexSet`, so a line is
//! scanned once whatever the size of the catalog.

use regex::{Regex, RegexSet};
use serde::Deserialize;

use crate::verdict::Signature;

/// How much a matching line says on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strength {
    /// The line alone means the server is failing.
    Fatal,
    /// Names the cause only if the process then ends badly.
    Evidence,
}

/// One signature rule as written in a catalog or profile file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureSpec {
    pub name: String,
    pub strength: Strength,
    pub patterns: Vec<String>,
    #[serde(default)]
    pub examples: Vec<String>,
}

/// The built-in catalog file's shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogFile {
    #[serde(default, rename = "signature")]
    pub signatures: Vec<SignatureSpec>,
    #[serde(default)]
    pub benign: Vec<String>,
}

/// The built-in signature catalog (TOML, embedded).
pub const BUILTIN_CATALOG: &str = include_str!("catalog/signatures.toml");

/// Parses the built-in catalog.
pub fn builtin_catalog() -> CatalogFile {
    toml::from_str(BUILTIN_CATALOG).expect("the embedded signature catalog is valid TOML")
}

/// A failure hit on a line: the signature (None for a user `--fail-line`) and its strength.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub signature: Option<Signature>,
    pub strength: Strength,
}

/// What one line means.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LineClass {
    /// Failure hits, most specific first (precedence order, user rules after catalog rules).
    pub hits: Vec<Hit>,
    /// Indices of the readiness conditions this line satisfies.
    pub ready: Vec<usize>,
    /// Index of the phase this line begins, if any (the last matching phase wins).
    pub phase: Option<usize>,
    /// A progress fraction in 0..=1 printed on this line (`45%`, `12/36`).
    pub progress: Option<f64>,
    pub noise: bool,
}

impl LineClass {
    pub fn strongest(&self) -> Option<Hit> {
        self.hits.first().copied()
    }
    pub fn is_fatal(&self) -> bool {
        self.hits.iter().any(|h| h.strength == Strength::Fatal)
    }
}

#[derive(Debug, Clone, Copy)]
enum Slot {
    Failure(Hit),
    Ready(usize),
    Noise,
    Phase(usize),
}

/// What a classifier is built from.
#[derive(Debug, Clone, Default)]
pub struct ClassifierSpec {
    pub signatures: Vec<SignatureSpec>,
    /// User `--fail-line` patterns (fatal, no named signature).
    pub fail_lines: Vec<String>,
    /// One regex per readiness condition.
    pub ready_lines: Vec<String>,
    pub noise: Vec<String>,
    /// (phase name, regex) in startup order.
    pub phases: Vec<(String, String)>,
}

/// A compiled classifier.
#[derive(Debug, Clone)]
pub struct Classifier {
    set: RegexSet,
    slots: Vec<Slot>,
    phase_names: Vec<String>,
    ready_count: usize,
    percent: Regex,
    counter: Regex,
}

/// A pattern that does not compile, named by where it came from.
#[derive(Debug, thiserror::Error)]
#[error("invalid regex in {origin} '{pattern}': {message}")]
pub struct PatternError {
    pub origin: String,
    pub pattern: String,
    pub message: String,
}

fn check(origin: &str, pattern: &str) -> Result<(), PatternError> {
    regex::Regex::new(pattern)
        .map(|_| ())
        .map_err(|e| PatternError {
            origin: origin.to_string(),
            pattern: pattern.to_string(),
            message: e
                .to_string()
                .lines()
                .last()
                .unwrap_or("")
                .trim()
                .to_string(),
        })
}

impl Classifier {
    pub fn new(spec: &ClassifierSpec) -> Result<Self, PatternError> {
        let mut patterns = Vec::new();
        let mut slots = Vec::new();
        for s in &spec.signatures {
            let signature = Signature::from_name(&s.name).ok_or_else(|| PatternError {
                origin: "signature".into(),
                pattern: s.name.clone(),
                message: "unknown signature name".into(),
            })?;
            for p in &s.patterns {
                check(&format!("signature {}", s.name), p)?;
                patterns.push(p.clone());
                slots.push(Slot::Failure(Hit {
                    signature: Some(signature),
                    strength: s.strength,
                }));
            }
        }
        for p in &spec.fail_lines {
            check("--fail-line", p)?;
            patterns.push(p.clone());
            slots.push(Slot::Failure(Hit {
                signature: None,
                strength: Strength::Fatal,
            }));
        }
        for (i, p) in spec.ready_lines.iter().enumerate() {
            check("--ready-line", p)?;
            patterns.push(p.clone());
            slots.push(Slot::Ready(i));
        }
        for p in &spec.noise {
            check("noise", p)?;
            patterns.push(p.clone());
            slots.push(Slot::Noise);
        }
        for (i, (name, p)) in spec.phases.iter().enumerate() {
            check(&format!("phase {name}"), p)?;
            patterns.push(p.clone());
            slots.push(Slot::Phase(i));
        }
        let set = regex::RegexSetBuilder::new(&patterns)
            .dfa_size_limit(64 << 20)
            .build()
            .map_err(|e| PatternError {
                origin: "pattern set".into(),
                pattern: String::new(),
                message: e.to_string(),
            })?;
        Ok(Classifier {
            set,
            slots,
            phase_names: spec.phases.iter().map(|(n, _)| n.clone()).collect(),
            ready_count: spec.ready_lines.len(),
            percent: Regex::new(r"(\d{1,3}(?:\.\d+)?)%").expect("static regex"),
            counter: Regex::new(r"(?:^|[\s|(\[])(\d+)/(\d+)(?:$|[\s\]|),])").expect("static regex"),
        })
    }

    pub fn phase_names(&self) -> &[String] {
        &self.phase_names
    }

    pub fn ready_count(&self) -> usize {
        self.ready_count
    }

    pub fn classify(&self, text: &str) -> LineClass {
        let mut class = LineClass::default();
        for i in self.set.matches(text).iter() {
            match self.slots[i] {
                Slot::Failure(hit) => {
                    if !class.hits.contains(&hit) {
                        class.hits.push(hit);
                    }
                }
                Slot::Ready(r) => {
                    if !class.ready.contains(&r) {
                        class.ready.push(r);
                    }
                }
                Slot::Noise => class.noise = true,
                Slot::Phase(p) => class.phase = Some(p),
            }
        }
        class.hits.sort_by_key(|h| {
            (
                h.signature.is_none(),
                h.signature,
                h.strength == Strength::Evidence,
            )
        });
        class.progress = self.progress(text);
        class
    }

    fn progress(&self, text: &str) -> Option<f64> {
        if !text.contains('%') && !text.contains('/') {
            return None;
        }
        if let Some(c) = self.percent.captures(text) {
            let v: f64 = c[1].parse().ok()?;
            if (0.0..=100.0).contains(&v) {
                return Some(v / 100.0);
            }
        }
        let c = self.counter.captures(text)?;
        let n: f64 = c[1].parse().ok()?;
        let total: f64 = c[2].parse().ok()?;
        (total > 0.0 && n <= total).then(|| n / total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> (CatalogFile, Classifier) {
        let cat = builtin_catalog();
        let c = Classifier::new(&ClassifierSpec {
            signatures: cat.signatures.clone(),
            ..Default::default()
        })
        .expect("catalog compiles");
        (cat, c)
    }

    #[test]
    fn every_catalog_example_resolves_to_its_signature() {
        let (cat, c) = builtin();
        let mut failures = Vec::new();
        let mut count = 0;
        for s in &cat.signatures {
            assert!(
                !s.examples.is_empty(),
                "signature entry {} has no example",
                s.name
            );
            for e in &s.examples {
                count += 1;
                let got = c
                    .classify(e)
                    .strongest()
                    .and_then(|h| h.signature)
                    .map(|s| s.as_str());
                if got != Some(s.name.as_str()) {
                    failures.push(format!("{:?} -> {:?}, want {}", e, got, s.name));
                }
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {count} examples misclassified:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    #[test]
    fn every_catalog_pattern_matches_one_of_its_examples() {
        let cat = builtin_catalog();
        for s in &cat.signatures {
            for p in &s.patterns {
                let re = Regex::new(p).unwrap();
                assert!(
                    s.examples.iter().any(|e| re.is_match(e)),
                    "pattern {p} of {} has no example",
                    s.name
                );
            }
        }
    }

    #[test]
    fn benign_lines_match_nothing() {
        let (cat, c) = builtin();
        assert!(cat.benign.len() >= 10);
        for b in &cat.benign {
            assert!(
                c.classify(b).hits.is_empty(),
                "benign line matched: {b:?} -> {:?}",
                c.classify(b).hits
            );
        }
    }

    #[test]
    fn catalog_covers_every_log_level_signature() {
        let cat = builtin_catalog();
        for sig in Signature::ALL {
            if matches!(sig, Signature::Sigkill | Signature::Terminated) {
                continue; // only ever from how the process ended
            }
            assert!(
                cat.signatures.iter().any(|s| s.name == sig.as_str()),
                "no catalog entry for {sig}"
            );
        }
    }

    #[test]
    fn ready_phase_noise_and_progress() {
        let c = Classifier::new(&ClassifierSpec {
            ready_lines: vec!["ready to roll".into(), "listening".into()],
            noise: vec!["^DEBUG".into()],
            phases: vec![
                ("load_weights".into(), "Load weight begin".into()),
                ("capture".into(), "Capture".into()),
            ],
            fail_lines: vec!["MYFAIL".into()],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            c.classify("The server is fired up and ready to roll!")
                .ready,
            vec![0]
        );
        assert_eq!(c.classify("listening ... ready to roll").ready.len(), 2);
        assert!(c.classify("DEBUG x").noise);
        assert_eq!(
            c.classify("Load weight begin. avail mem=70 GB").phase,
            Some(0)
        );
        assert_eq!(
            c.classify("MYFAIL here").hits,
            vec![Hit {
                signature: None,
                strength: Strength::Fatal
            }]
        );
        let table = [
            (
                "Loading safetensors checkpoint shards:  45% Completed | 9/20 [00:10<00:12]",
                Some(0.45),
            ),
            (
                "Capturing batches (bs=4 avail_mem=3.2 GB): 12/36 [00:01<00:02]",
                Some(12.0 / 36.0),
            ),
            ("[2025/03/01 10:00:00] waiting", None),
            ("plain line", None),
        ];
        for (line, want) in table {
            assert_eq!(c.classify(line).progress, want, "{line}");
        }
    }

    #[test]
    fn a_bad_user_regex_is_named() {
        let err = Classifier::new(&ClassifierSpec {
            ready_lines: vec!["(unclosed".into()],
            ..Default::default()
        })
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid regex in --ready-line '(unclosed'"),
            "{err}"
        );
    }

    #[test]
    fn a_flood_of_lines_is_classified_quickly() {
        // Found by tests/faults.rs (a storm of 1 M progress lines): with the regex crate's
        // default DFA cache the catalog's set thrashed it and fell back to the PikeVM, ~60 us a
        // line (1 M lines took over a minute); with a large enough cache it is ~1 us.
        let (_, c) = builtin();
        let started = std::time::Instant::now();
        for i in 0..50_000 {
            let class = c.classify(&format!("Capturing batches {i}/50000"));
            assert!(class.hits.is_empty());
        }
        let took = started.elapsed();
        assert!(
            took < std::time::Duration::from_secs(2),
            "{took:?} for 50k lines"
        );
    }
}
