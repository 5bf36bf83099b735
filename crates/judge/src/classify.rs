//! Turning one cleaned log line into what it means: failure signatures it shows, readiness conditions
//! it satisfies, the startup phase it begins, a progress fraction, or noise.
//!
//! Pure and per line: no state, no I/O. All patterns are compiled into one `RegexSet`, so a line is
//! scanned once whatever the size of the catalog.
//!
//! Fast path: most lines are ASCII, and on ASCII text the ASCII and Unicode meanings of `\w`, `\b`,
//! `\s`, `\d`, `(?i)` and negated classes agree. So the patterns are compiled a second time as an
//! ASCII byte set (a much smaller lazy DFA, about 500× faster than the Unicode one with the
//! catalog), which answers for ASCII lines: first `is_match` (most lines match nothing), then
//! `matches` on a hit. Other lines go to the Unicode set. The answer is the same either way
//! (`classify_reference` is the Unicode-only path the tests compare against).

use std::sync::OnceLock;

use regex::{Regex, RegexSet};
use serde::Deserialize;

use crate::verdict::Signature;

mod ready_line;
pub use ready_line::ReadyLine;

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
    /// Indices (into [`Classifier::ready_lines`]) of the ready lines this line matches.
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
    /// The ready lines, compiled (all must be seen).
    pub ready_lines: Vec<ReadyLine>,
    pub noise: Vec<String>,
    /// (phase name, regex) in startup order.
    pub phases: Vec<(String, String)>,
}

/// A compiled classifier.
#[derive(Debug, Clone)]
pub struct Classifier {
    patterns: Vec<String>,
    /// The patterns with ASCII semantics, for ASCII lines; None when a pattern cannot be compiled
    /// that way or is not ASCII itself (then every line goes to `wide`).
    ascii: Option<regex::bytes::RegexSet>,
    /// For the other lines, built on the first one.
    wide: OnceLock<Wide>,
    /// The patterns as one Unicode `RegexSet`: what `classify` answered with before the fast
    /// paths, built only for [`Classifier::classify_reference`].
    reference: OnceLock<RegexSet>,
    slots: Vec<Slot>,
    phase_names: Vec<String>,
    ready_lines: Vec<ReadyLine>,
    percent: Regex,
    counter: Regex,
}

/// A pattern that does not compile, named by where it came from.
#[derive(Debug)]
pub struct PatternError {
    pub origin: String,
    pub pattern: String,
    pub message: String,
}

impl std::fmt::Display for PatternError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid regex in {} '{}': {}",
            self.origin, self.pattern, self.message
        )
    }
}

impl std::error::Error for PatternError {}

fn check(origin: &str, pattern: &str) -> Result<(), PatternError> {
    compile(origin, pattern).map(|_| ())
}

/// `pattern` compiled, or the error named by `origin` (`--ready-line`, `signature oom`).
fn compile(origin: &str, pattern: &str) -> Result<Regex, PatternError> {
    regex::Regex::new(pattern).map_err(|e| PatternError {
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
        for (i, r) in spec.ready_lines.iter().enumerate() {
            // Compiled when it was made: a `ReadyLine` is a valid regex.
            patterns.push(r.as_str().to_string());
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
        let ascii = ascii_set(&patterns);
        let wide = OnceLock::new();
        if ascii.is_none() {
            // Every line goes there: build it now, so a pattern set too large to build is an
            // error here rather than a slower watch later.
            let w = Wide::new(&patterns).ok_or_else(|| PatternError {
                origin: "pattern set".into(),
                pattern: String::new(),
                message: "the patterns together exceed the regex size limit".into(),
            })?;
            let _ = wide.set(w);
        }
        Ok(Classifier {
            patterns,
            ascii,
            wide,
            reference: OnceLock::new(),
            slots,
            phase_names: spec.phases.iter().map(|(n, _)| n.clone()).collect(),
            ready_lines: spec.ready_lines.clone(),
            percent: Regex::new(r"(\d{1,3}(?:\.\d+)?)%").expect("static regex"),
            counter: Regex::new(r"(?:^|[\s|(\[])(\d+)/(\d+)(?:$|[\s\]|),])").expect("static regex"),
        })
    }

    /// The phase names, in the order [`LineClass::phase`] indexes them.
    pub fn phase_names(&self) -> &[String] {
        &self.phase_names
    }

    /// The ready lines, in the order [`LineClass::ready`] indexes them.
    pub fn ready_lines(&self) -> &[ReadyLine] {
        &self.ready_lines
    }

    /// How many ready lines there are.
    pub fn ready_count(&self) -> usize {
        self.ready_lines.len()
    }

    pub fn classify(&self, text: &str) -> LineClass {
        let bytes = text.as_bytes();
        let mut class = match &self.ascii {
            Some(ascii) if bytes.is_ascii() => {
                if ascii.is_match(bytes) {
                    self.resolve(ascii.matches(bytes).iter())
                } else {
                    LineClass::default()
                }
            }
            _ => {
                let wide = self.wide.get_or_init(|| {
                    Wide::new(&self.patterns).unwrap_or_else(|| Wide::singles_only(&self.patterns))
                });
                self.resolve(wide.matches(&self.patterns, text).into_iter())
            }
        };
        class.progress = self.progress(text);
        class
    }

    /// The same answer as [`Classifier::classify`] by the Unicode set alone (no fast path): what
    /// the fast path is checked against.
    #[doc(hidden)]
    pub fn classify_reference(&self, text: &str) -> LineClass {
        let set = self.reference.get_or_init(|| {
            regex::RegexSetBuilder::new(&self.patterns)
                .dfa_size_limit(64 << 20)
                .build()
                .expect("the patterns compiled one by one")
        });
        let mut class = self.resolve(set.matches(text).iter());
        class.progress = self.progress_reference(text);
        class
    }

    fn resolve(&self, matched: impl Iterator<Item = usize>) -> LineClass {
        let mut class = LineClass::default();
        for i in matched {
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
        class
    }

    /// A progress fraction: `percent` needs a `%`, `counter` a digit, `/`, digit; on an ASCII line
    /// a byte scan rules both out before any regex runs (a date or a path has `/` but seldom
    /// digit/digit with the separators the counter wants; those still go to the regex).
    fn progress(&self, text: &str) -> Option<f64> {
        let b = text.as_bytes();
        if !b.is_ascii() {
            return self.progress_reference(text);
        }
        let percent = memchr_byte(b'%', b);
        let counter = has_digit_slash_digit(b);
        if !percent && !counter {
            return None;
        }
        if percent {
            if let Some(c) = self.percent.captures(text) {
                let v: f64 = c[1].parse().ok()?;
                if (0.0..=100.0).contains(&v) {
                    return Some(v / 100.0);
                }
            }
        }
        if !counter {
            return None;
        }
        self.counter_fraction(text)
    }

    fn progress_reference(&self, text: &str) -> Option<f64> {
        if !text.contains('%') && !text.contains('/') {
            return None;
        }
        if let Some(c) = self.percent.captures(text) {
            let v: f64 = c[1].parse().ok()?;
            if (0.0..=100.0).contains(&v) {
                return Some(v / 100.0);
            }
        }
        self.counter_fraction(text)
    }

    fn counter_fraction(&self, text: &str) -> Option<f64> {
        let c = self.counter.captures(text)?;
        let n: f64 = c[1].parse().ok()?;
        let total: f64 = c[2].parse().ok()?;
        (total > 0.0 && n <= total).then(|| n / total)
    }
}

/// The matcher for lines with non-ASCII text. A Unicode `RegexSet` of the catalog searches such a
/// line with its slowest engine (~300 µs a line): its lazy DFA cannot decide a Unicode word
/// boundary next to a non-ASCII byte and gives up. So `loose` is the set with every word-boundary
/// assertion dropped (each pattern then matches a superset of what it matched, and the lazy DFA
/// runs), and a pattern it reports is confirmed by the pattern alone (compiled on first need),
/// unless it had no word boundary to drop (then `loose` already answered exactly).
#[derive(Debug, Clone)]
struct Wide {
    loose: Option<RegexSet>,
    /// Per pattern: `loose` holds it unchanged.
    exact: Vec<bool>,
    singles: Vec<OnceLock<Regex>>,
}

impl Wide {
    fn new(patterns: &[String]) -> Option<Wide> {
        let loosened: Vec<Option<String>> =
            patterns.iter().map(|p| drop_word_boundaries(p)).collect();
        let loose_patterns: Vec<&str> = patterns
            .iter()
            .zip(&loosened)
            .map(|(p, l)| l.as_deref().unwrap_or(p))
            .collect();
        let loose = regex::RegexSetBuilder::new(&loose_patterns)
            .dfa_size_limit(64 << 20)
            .build()
            .ok()?;
        Some(Wide {
            loose: Some(loose),
            exact: patterns
                .iter()
                .zip(&loosened)
                .map(|(p, l)| l.as_deref() == Some(p.as_str()))
                .collect(),
            singles: patterns.iter().map(|_| OnceLock::new()).collect(),
        })
    }

    /// Every pattern alone (the set could not be built).
    fn singles_only(patterns: &[String]) -> Wide {
        Wide {
            loose: None,
            exact: vec![false; patterns.len()],
            singles: patterns.iter().map(|_| OnceLock::new()).collect(),
        }
    }

    fn matches(&self, patterns: &[String], text: &str) -> Vec<usize> {
        let candidates: Vec<usize> = match &self.loose {
            Some(set) => set.matches(text).into_iter().collect(),
            None => (0..patterns.len()).collect(),
        };
        candidates
            .into_iter()
            .filter(|&i| {
                self.exact[i]
                    || self.singles[i]
                        .get_or_init(|| Regex::new(&patterns[i]).expect("checked pattern"))
                        .is_match(text)
            })
            .collect()
    }
}

/// The pattern with its word-boundary assertions (`\b`, `\B`, `\b{..}`, `\<`, `\>`) removed, so
/// that it matches a superset of what it matched; None when that is not certain (`\b` inside a
/// bracket class, verbose mode) or the result does not compile.
fn drop_word_boundaries(p: &str) -> Option<String> {
    if verbose(p) {
        // `#` comments could hold brackets the scan would take for classes.
        return None;
    }
    let mut out = String::with_capacity(p.len());
    let mut chars = p.chars().peekable();
    let mut class_depth = 0usize;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let next = chars.next()?;
                if class_depth > 0 {
                    if matches!(next, 'b' | 'B' | '<' | '>') {
                        return None;
                    }
                    out.push('\\');
                    out.push(next);
                    continue;
                }
                match next {
                    'b' | 'B' => {
                        if chars.peek() == Some(&'{') {
                            for n in chars.by_ref() {
                                if n == '}' {
                                    break;
                                }
                            }
                        }
                    }
                    '<' | '>' => {}
                    _ => {
                        out.push('\\');
                        out.push(next);
                    }
                }
            }
            '[' => {
                class_depth += 1;
                out.push(c);
                // A `]` (or `^]`) right after the opening bracket is a member, not the end.
                if chars.peek() == Some(&'^') {
                    out.push(chars.next()?);
                }
                if chars.peek() == Some(&']') {
                    out.push(chars.next()?);
                }
            }
            ']' if class_depth > 0 => {
                class_depth -= 1;
                out.push(c);
            }
            c => out.push(c),
        }
    }
    regex::Regex::new(&out).ok()?;
    Some(out)
}

/// Whether the pattern turns on the `x` (verbose) flag anywhere.
fn verbose(p: &str) -> bool {
    p.match_indices("(?").any(|(i, _)| {
        p[i + 2..]
            .chars()
            .take_while(|c| *c != ')' && *c != ':')
            .any(|c| c == 'x')
    })
}

/// The patterns as one ASCII byte set, when that means the same as the Unicode set on ASCII text:
/// every pattern must be ASCII itself, name no code point by number (under Unicode `(?i)` a `K`
/// (Kelvin sign) or `\x{212A}` matches `k`, and `\u{17F}` matches `s`; without Unicode they do
/// not), and compile without Unicode (`\p{..}` does not).
fn ascii_set(patterns: &[String]) -> Option<regex::bytes::RegexSet> {
    let plain =
        |p: &String| p.is_ascii() && !p.contains("\\x") && !p.contains("\\u") && !p.contains("\\U");
    if !patterns.iter().all(plain) {
        return None;
    }
    regex::bytes::RegexSetBuilder::new(patterns)
        .unicode(false)
        .dfa_size_limit(8 << 20)
        .build()
        .ok()
}

fn memchr_byte(needle: u8, hay: &[u8]) -> bool {
    hay.contains(&needle)
}

/// Whether `hay` has an ASCII digit, `/`, an ASCII digit (what `counter` needs on ASCII text).
fn has_digit_slash_digit(hay: &[u8]) -> bool {
    let mut from = 1;
    while let Some(i) = hay
        .get(from..)
        .and_then(|h| h.iter().position(|&c| c == b'/'))
    {
        let at = from + i;
        if at + 1 < hay.len() && hay[at - 1].is_ascii_digit() && hay[at + 1].is_ascii_digit() {
            return true;
        }
        from = at + 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(patterns: &[&str]) -> Vec<ReadyLine> {
        patterns
            .iter()
            .map(|p| ReadyLine::new(p).unwrap())
            .collect()
    }

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
            ready_lines: ready(&["ready to roll", "listening"]),
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
        let err = ReadyLine::new("(unclosed").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid regex in --ready-line '(unclosed'"),
            "{err}"
        );
    }

    /// The catalog and every built-in profile's patterns in one classifier: the widest set of
    /// patterns the fast path must agree on.
    fn everything() -> Classifier {
        let profiles = crate::profile::builtin_profiles();
        let mut signatures = builtin_catalog().signatures;
        let mut spec = ClassifierSpec::default();
        for p in &profiles {
            signatures.extend(p.signatures.iter().cloned());
            spec.ready_lines
                .extend(p.ready.iter().map(|r| ReadyLine::new(r).unwrap()));
            spec.noise.extend(p.noise.iter().cloned());
            spec.phases.extend(
                p.phases
                    .iter()
                    .map(|ph| (ph.name.clone(), ph.pattern.clone())),
            );
        }
        spec.signatures = signatures;
        spec.fail_lines = vec![r"(?i)fatal:\s+\w+".into(), r"\bpanicked at\b".into()];
        Classifier::new(&spec).expect("catalog and profiles compile")
    }

    /// Every line the repository knows: catalog examples and benign lines, profile examples, and
    /// every line of the recorded logs under tests/fixtures.
    fn known_lines() -> Vec<String> {
        let cat = builtin_catalog();
        let mut lines: Vec<String> = cat
            .signatures
            .iter()
            .flat_map(|s| s.examples.iter().cloned())
            .chain(cat.benign.iter().cloned())
            .collect();
        for p in crate::profile::builtin_profiles() {
            lines.extend(p.signatures.iter().flat_map(|s| s.examples.iter().cloned()));
            lines.extend(p.detect_examples.iter().cloned());
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
        let mut dirs = vec![root];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap().filter_map(|e| e.ok()) {
                let path = e.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|x| x == "log") {
                    let bytes = std::fs::read(&path).unwrap();
                    for l in bytes.split(|&b| b == b'\n' || b == b'\r') {
                        lines.push(crate::lines::clean_text(l));
                    }
                }
            }
        }
        lines
    }

    #[test]
    fn the_fast_path_answers_as_the_unicode_set_on_every_known_line() {
        let c = everything();
        assert!(c.ascii.is_some(), "the built-in patterns compile as ASCII");
        let lines = known_lines();
        assert!(lines.len() > 1000, "{} lines", lines.len());
        let mut classified = 0;
        for l in &lines {
            let want = c.classify_reference(l);
            classified += (want != LineClass::default()) as usize;
            assert_eq!(c.classify(l), want, "{l:?}");
        }
        assert!(classified > 100, "only {classified} lines had a class");
    }

    #[test]
    fn a_non_ascii_pattern_keeps_every_line_on_the_unicode_set() {
        // Under Unicode (?i) the Kelvin sign matches 'k': an ASCII set would miss it.
        let c = Classifier::new(&ClassifierSpec {
            ready_lines: ready(&["(?i)\u{212A}ernel ready", r"\p{Greek}+ ok"]),
            ..Default::default()
        })
        .unwrap();
        assert!(c.ascii.is_none());
        assert_eq!(c.classify("kernel ready").ready, vec![0]);
        let c = Classifier::new(&ClassifierSpec {
            ready_lines: ready(&[r"(?i)\x{212A}ernel ready"]),
            ..Default::default()
        })
        .unwrap();
        assert!(c.ascii.is_none());
        assert_eq!(c.classify("kernel ready").ready, vec![0]);
        let c = Classifier::new(&ClassifierSpec {
            ready_lines: ready(&[r"(?i)\u{17F}tarted"]),
            ..Default::default()
        })
        .unwrap();
        assert!(c.ascii.is_none());
        assert_eq!(c.classify("STARTED").ready, vec![0]);
    }

    #[test]
    fn word_boundaries_are_dropped_only_where_the_scan_is_sure() {
        let table: &[(&str, Option<&str>)] = &[
            (r"\bCUDA\b error", Some(r"CUDA error")),
            (
                r"(?i)\bbind\B: \<x\> \b{start}y\b{end}",
                Some(r"(?i)bind: x y"),
            ),
            (r"\\b literal", Some(r"\\b literal")),
            (r"[]b\]]x\b", Some(r"[]b\]]x")),
            (r"[\s\]]x\b", Some(r"[\s\]]x")),
            (r"[\b]x", None),
            (r"[^]a]\b", Some(r"[^]a]")),
            (r"[[:alpha:]]+\bz", Some(r"[[:alpha:]]+z")),
            (r"\[\bq\]", Some(r"\[q\]")),
            (r"\p{Greek}\b", Some(r"\p{Greek}")),
            (r"(?x) a \b # [", None),
        ];
        for (p, want) in table {
            assert_eq!(drop_word_boundaries(p).as_deref(), *want, "{p}");
        }
    }

    fn mutate(line: &str, ops: &[(u8, usize, char)]) -> String {
        let mut chars: Vec<char> = line.chars().collect();
        for &(op, at, c) in ops {
            let at = if chars.is_empty() {
                0
            } else {
                at % (chars.len() + 1)
            };
            match op % 4 {
                0 => chars.insert(at, c),
                1 if at < chars.len() => {
                    chars.remove(at);
                }
                2 if at < chars.len() => chars[at] = c,
                _ if at < chars.len() => {
                    let flipped: Vec<char> = if chars[at].is_ascii_lowercase() {
                        chars[at].to_uppercase().collect()
                    } else {
                        chars[at].to_lowercase().collect()
                    };
                    chars[at] = flipped[0];
                }
                _ => {}
            }
        }
        chars.into_iter().collect()
    }

    fn interesting_char() -> impl Strategy<Value = char> {
        prop_oneof![
            proptest::char::range(' ', '~'),
            Just('%'),
            Just('/'),
            Just('\t'),
            proptest::char::range('0', '9'),
            Just('\u{e9}'),
            Just('\u{212A}'),
            Just('\u{17F}'),
            Just('\u{663}'),
            Just('\u{a0}'),
            Just('\u{2028}'),
            Just('\u{3000}'),
            Just('\u{fffd}'),
        ]
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn the_fast_path_answers_as_the_unicode_set_on_mutated_lines(
            pick in any::<proptest::sample::Index>(),
            ops in proptest::collection::vec((any::<u8>(), any::<usize>(), interesting_char()), 0..6),
        ) {
            static LINES: std::sync::OnceLock<(Classifier, Vec<String>)> = std::sync::OnceLock::new();
            let (c, lines) = LINES.get_or_init(|| {
                let mut l = known_lines();
                l.retain(|x| !x.trim().is_empty());
                (everything(), l)
            });
            let line = mutate(pick.get::<String>(lines), &ops);
            prop_assert_eq!(c.classify(&line), c.classify_reference(&line), "{:?}", line);
        }

        #[test]
        fn the_fast_path_answers_as_the_unicode_set_on_random_lines(
            chars in proptest::collection::vec(interesting_char(), 0..120),
        ) {
            static C: std::sync::OnceLock<Classifier> = std::sync::OnceLock::new();
            let c = C.get_or_init(everything);
            let line: String = chars.into_iter().collect();
            prop_assert_eq!(c.classify(&line), c.classify_reference(&line), "{:?}", line);
        }
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
