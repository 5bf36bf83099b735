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
//! `matches` on a hit. Before it, one scan for the literals the patterns require
//! (`prefilter.rs`): most lines reach no regex at all. A line with non-ASCII text gets each
//! pattern's own Unicode answer (`wide.rs`), for the patterns that the same literal scan leaves
//! (or, with no literals to scan for, those that the patterns loosened over the line with each
//! non-ASCII character folded to one byte leave). The answer is the same either way
//! (`classify_reference` is the Unicode-only path the tests compare against).

use std::sync::{Arc, OnceLock};

use regex::{Regex, RegexSet};
use serde::Deserialize;

use crate::verdict::Signature;

mod ascii_set;
mod lazy_match;
mod literal_scan;
mod plain_literal;
mod prefilter;
mod progress;
mod ready_line;
mod whole_line;
mod wide;

use ascii_set::ascii_set;
use prefilter::Prefilter;
use progress::Shape;
pub use ready_line::{ReadyLine, matches_every_line};
use wide::{Singles, Wide};

/// How much a matching line says on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strength {
    /// The line alone means the server is failing.
    Fatal,
    /// Names the cause only if the process then ends badly.
    Evidence,
    /// What a healthy peer prints after another rank or worker failed (a collective that lost its
    /// peer, a launcher's summary): names the cause only when no other line does.
    Echo,
}

/// One signature rule as written in a catalog or profile file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureSpec {
    /// The signature's name (`cuda_oom`; see `Signature`).
    pub name: String,
    /// Whether a matching line is fatal alone or only evidence.
    pub strength: Strength,
    /// Regexes; any one matching is a hit.
    pub patterns: Vec<String>,
    /// Lines that must resolve to this signature (checked by the tests).
    #[serde(default)]
    pub examples: Vec<String>,
}

/// The built-in catalog file's shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogFile {
    /// The signature rules, in precedence order.
    #[serde(default, rename = "signature")]
    pub signatures: Vec<SignatureSpec>,
    /// Lines that must match no rule (checked by the tests).
    #[serde(default)]
    pub benign: Vec<String>,
}

/// The built-in signature catalog (TOML, embedded).
const BUILTIN_CATALOG: &str = include_str!("catalog/signatures.toml");

/// Parses the built-in catalog.
pub fn builtin_catalog() -> CatalogFile {
    toml::from_str(BUILTIN_CATALOG).expect("the embedded signature catalog is valid TOML")
}

/// A failure hit on a line: the signature (None for a user `--fail-line`) and its strength.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    /// The signature; `None` for a `--fail-line`.
    pub signature: Option<Signature>,
    /// How much the line says on its own.
    pub strength: Strength,
}

impl Hit {
    /// Sort key, most specific first: echoes last, then named signatures before a `--fail-line`,
    /// in the catalog's precedence order, fatal before evidence.
    pub fn precedence(&self) -> (bool, bool, Option<Signature>, bool) {
        (
            self.strength == Strength::Echo,
            self.signature.is_none(),
            self.signature,
            self.strength == Strength::Evidence,
        )
    }
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
    /// A noise line: not kept as context, not the last line.
    pub noise: bool,
}

/// A line that matches an echo rule is an echo, whatever else it matches: a healthy rank's
/// `RuntimeError: ... Connection closed by peer` is an uncaught exception by its form, but names
/// no cause while another rank printed one (CONTRACT: the multi-process rule). A user's
/// `--fail-line` keeps its strength (the user asked for it), and so does a signal's line (a
/// launcher's `Signal 11 (SIGSEGV) received by PID 42` says how that rank ended).
fn demote_echo_line(hits: &mut [Hit]) {
    if hits.len() < 2 || !hits.iter().any(|h| h.strength == Strength::Echo) {
        return;
    }
    for h in hits.iter_mut() {
        if h.signature.is_some_and(|s| !s.is_signal_class()) {
            h.strength = Strength::Echo;
        }
    }
}

impl LineClass {
    /// The most specific hit.
    pub fn strongest(&self) -> Option<Hit> {
        self.hits.first().copied()
    }
    /// Whether a hit is fatal on its own.
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
    /// Signature rules: the catalog's, then the profile's.
    pub signatures: Vec<SignatureSpec>,
    /// User `--fail-line` patterns (fatal, no named signature).
    pub fail_lines: Vec<String>,
    /// The ready lines, compiled (all must be seen).
    pub ready_lines: Vec<ReadyLine>,
    /// Regexes of noise lines.
    pub noise: Vec<String>,
    /// (phase name, regex) in startup order.
    pub phases: Vec<(String, String)>,
}

/// A compiled classifier.
///
/// A clone shares what was compiled (a plan's classifier and each judge's copy): cloning and
/// dropping one costs a few reference counts, not the catalog's allocations again (the judge's
/// copy is dropped on the way from the verdict to the caller, issue 28).
#[derive(Debug, Clone)]
pub struct Classifier {
    patterns: Arc<[String]>,
    /// Whether the patterns mean the same as one ASCII set on ASCII lines (else all go to `wide`).
    ascii: bool,
    /// That set, held only where no `prefiltered` answers (~0.9 MB a watch need not hold).
    ascii_set: OnceLock<regex::bytes::RegexSet>,
    /// The same answer on ASCII lines, most of them ruled out by a literal scan; `None` when no
    /// pattern has a usable literal (then `ascii_set` answers).
    prefiltered: Option<Arc<Prefilter>>,
    /// For the other lines where no `prefiltered` picks the patterns to confirm, built on the
    /// first one.
    wide: OnceLock<Wide>,
    /// Each pattern alone, Unicode semantics: what answers for a line with non-ASCII text.
    singles: Singles,
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
    /// Where the pattern came from (`--ready-line`, `signature oom`).
    pub origin: String,
    /// The pattern.
    pub pattern: String,
    /// The regex error, its last line.
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
    /// Compiles every pattern of `spec` into one set; a pattern that does not compile is named.
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
        // That the set compiles makes the ASCII paths valid; built again only where it answers.
        let patterns: Arc<[String]> = patterns.into();
        let ascii = ascii_set(&patterns).is_some();
        let prefiltered = ascii
            .then(|| Prefilter::new(&patterns).map(Arc::new))
            .flatten();
        let ascii_set = match (ascii, &prefiltered) {
            (true, None) => OnceLock::from(ascii_set(&patterns).expect("it compiled just above")),
            _ => OnceLock::new(),
        };
        let wide = OnceLock::new();
        if !ascii {
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
            singles: Singles::new(patterns.len()),
            patterns,
            ascii,
            ascii_set,
            prefiltered,
            wide,
            reference: OnceLock::new(),
            slots,
            phase_names: spec.phases.iter().map(|(n, _)| n.clone()).collect(),
            ready_lines: spec.ready_lines.clone(),
            percent: Regex::new(r"(\d{1,3}(?:\.\d+)?)%").expect("static regex"),
            counter: Regex::new(r"(?:^|[\s|(\[])(\d+)/(\d+)(?:$|[\s\]|),])").expect("static regex"),
        })
    }

    /// Compiles up to `n` more of what would otherwise be compiled on the first line that needs
    /// it (the prefilter's patterns alone), for every clone; whether all is compiled now. The
    /// shell calls it while a watch waits, so no failure line allocates it (at an OOM, say).
    pub fn compile_next(&self, n: usize) -> bool {
        self.prefiltered
            .as_ref()
            .is_none_or(|pf| pf.compile_next(n))
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

    /// What the (cleaned) line `text` means.
    pub fn classify(&self, text: &str) -> LineClass {
        let bytes = text.as_bytes();
        let shape = Shape::of(bytes);
        let mut class = match &self.prefiltered {
            Some(pf) if shape.ascii => match pf.matching(bytes) {
                Some(ids) => self.resolve(ids.into_iter()),
                None => LineClass::default(),
            },
            None if self.ascii && shape.ascii => {
                if self.ascii_set().is_match(bytes) {
                    self.resolve(self.ascii_set().matches(bytes).iter())
                } else {
                    LineClass::default()
                }
            }
            Some(pf) => {
                let folded = wide::fold(text);
                let candidates = pf.candidates(text).into_iter();
                let matched =
                    candidates.filter(|&i| self.singles.is_match(&self.patterns, i, text, &folded));
                self.resolve(matched)
            }
            None => self.resolve(
                self.wide()
                    .matches(&self.patterns, &self.singles, text)
                    .into_iter(),
            ),
        };
        class.progress = self.progress_of(text, shape);
        class
    }

    /// [`Classifier::classify`] without the literal prefilter (the whole ASCII set on every
    /// ASCII line): what the prefilter is checked against.
    #[doc(hidden)]
    pub fn classify_unfiltered(&self, text: &str) -> LineClass {
        let bytes = text.as_bytes();
        if !(self.ascii && bytes.is_ascii()) {
            return self.classify(text);
        }
        let mut class = self.resolve(self.ascii_set().matches(bytes).iter());
        class.progress = self.progress(text);
        class
    }

    /// The same answer as [`Classifier::classify`] by the Unicode set alone (no fast path): what
    /// the fast path is checked against.
    #[doc(hidden)]
    pub fn classify_reference(&self, text: &str) -> LineClass {
        let set = self.reference.get_or_init(|| {
            regex::RegexSetBuilder::new(self.patterns.iter())
                .dfa_size_limit(64 << 20)
                .build()
                .expect("the patterns compiled one by one")
        });
        let mut class = self.resolve(set.matches(text).iter());
        class.progress = self.progress_reference(text);
        class
    }

    /// The patterns as one ASCII set (only where `self.ascii`).
    fn ascii_set(&self) -> &regex::bytes::RegexSet {
        let build = || ascii_set(&self.patterns).expect("it compiled when built");
        self.ascii_set.get_or_init(build)
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
        demote_echo_line(&mut class.hits);
        class.hits.sort_by_key(Hit::precedence);
        class.hits.dedup();
        class
    }
}

#[cfg(test)]
mod tests;
