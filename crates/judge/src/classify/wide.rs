//! The matchers for lines with non-ASCII text (the ASCII fast path answers for the others; see
//! the parent module). Each pattern is confirmed alone on such a line ([`Singles`], Unicode
//! semantics, compiled on first need); what picks the patterns to confirm is the literal scan of
//! the prefilter where the classifier has one (`Prefilter::candidates`), else [`Wide`]: every
//! pattern loosened to a byte pattern over the line with each non-ASCII character folded to one
//! byte.

use std::sync::{Arc, OnceLock};

use regex_automata::nfa::thompson::WhichCaptures;
use regex_automata::{Input, MatchKind, PatternSet, meta};
use regex_syntax::hir::{self, Class, ClassBytes, ClassBytesRange, Hir, HirKind, Look};

use super::lazy_match::LazyMatch;

/// The byte every non-ASCII character of a line is folded to (never a byte of ASCII text).
const FOLDED: u8 = 0x80;

/// The matcher of lines with non-ASCII text where no literal scan picks the patterns (a pattern
/// set with a non-ASCII pattern, or none with a literal). A Unicode set of the catalog would
/// search such a line with its slowest engine (its lazy DFA cannot decide a Unicode word boundary
/// next to a non-ASCII byte) and costs ~10 MiB of NFA and cache. So `loose` is every pattern
/// loosened over the folded line ([`fold`]: one byte, [`FOLDED`], for each non-ASCII character):
/// word boundaries dropped, a class that holds any non-ASCII character holds `FOLDED`. A pattern
/// then matches the folded line wherever it matched the line (a superset), and a pattern `loose`
/// reports is confirmed by the pattern alone, unless loosening it lost nothing (then `loose`
/// already answered exactly). ~0.8 MiB, and as much again of cache once lines run through it.
#[derive(Debug, Clone)]
pub(super) struct Wide {
    loose: Option<meta::Regex>,
    /// Per pattern: its loosened form matches exactly where it does.
    pub(super) exact: Vec<bool>,
}

/// Each pattern alone, compiled on its first line with non-ASCII text: its loosened form over
/// the folded line (a small lazy DFA, [`LazyMatch`]), which rules out most lines the literal scan
/// let through and answers alone where loosening lost nothing, then the pattern itself with
/// Unicode semantics. (Straight to the Unicode regex, a sglang progress bar's line compiled four
/// more of them than the loosened set had: their code and Unicode tables made the peak RSS no
/// lower without the set.)
/// Shared by the classifier's clones: one compile serves the plan's and each judge's.
#[derive(Debug, Clone)]
pub(super) struct Singles {
    loose: Arc<[OnceLock<Loosened>]>,
    unicode: Arc<[OnceLock<meta::Regex>]>,
}

/// A pattern loosened (see [`loosen`]), compiled, and whether it is exact.
#[derive(Debug)]
struct Loosened {
    /// `None` where it did not build: then it rules out nothing.
    matcher: Option<LazyMatch>,
    exact: bool,
}

impl super::Classifier {
    /// The loosened set, built on first need unless [`Self::prepare_for_any_text`] built it.
    pub(super) fn wide(&self) -> &Wide {
        self.wide.get_or_init(|| {
            Wide::new(&self.patterns).unwrap_or_else(|| Wide::none(self.patterns.len()))
        })
    }

    /// Builds now what a line with non-ASCII text needs beyond the patterns' own regexes, which is
    /// otherwise built at the first such line: the loosened set (~1 MiB, a few tens of ms of a
    /// core), where no literal scan picks the patterns; nothing where one does. A watcher calls
    /// it before the server runs far: that line comes when the server chooses (llama.cpp's
    /// vocabulary dump, a progress bar's blocks), often as it fills its memory, and a watcher in
    /// the server's memory cgroup that allocates then is the OOM killer's next pick.
    pub fn prepare_for_any_text(&self) {
        if self.prefiltered.is_none() {
            self.wide();
        }
    }
}

impl Singles {
    /// One slot per pattern, none compiled.
    pub(super) fn new(n: usize) -> Singles {
        Singles {
            loose: (0..n).map(|_| OnceLock::new()).collect(),
            unicode: (0..n).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Whether pattern `i` (of `patterns`) matches `text` (Unicode semantics), whose [`fold`]
    /// is `folded`.
    pub(super) fn is_match(
        &self,
        patterns: &[String],
        i: usize,
        text: &str,
        folded: &[u8],
    ) -> bool {
        let loose = self.loose[i].get_or_init(|| Loosened::new(&patterns[i]));
        if let Some(m) = &loose.matcher {
            if !m.is_match(folded) {
                return false;
            }
            if loose.exact {
                return true;
            }
        }
        self.unicode_match(patterns, i, text)
    }

    /// Whether pattern `i` matches `text`, by the pattern itself.
    fn unicode_match(&self, patterns: &[String], i: usize, text: &str) -> bool {
        self.unicode[i]
            .get_or_init(|| single(&patterns[i]))
            .is_match(text)
    }
}

impl Loosened {
    fn new(pattern: &str) -> Loosened {
        let mut exact = true;
        let matcher = regex_syntax::ParserBuilder::new()
            .build()
            .parse(pattern)
            .ok()
            .and_then(|hir| LazyMatch::new(&loosen(&hir, &mut exact)));
        Loosened {
            exact: exact && matcher.is_some(),
            matcher,
        }
    }
}

impl Wide {
    pub(super) fn new(patterns: &[String]) -> Option<Wide> {
        let mut exact = Vec::with_capacity(patterns.len());
        let mut loosened = Vec::with_capacity(patterns.len());
        for p in patterns {
            let mut lossless = true;
            // A parser of its own for each: a reused one carries flags (`(?i)`) to the next.
            let hir = regex_syntax::ParserBuilder::new().build().parse(p).ok()?;
            loosened.push(loosen(&hir, &mut lossless));
            exact.push(lossless);
        }
        let loose = meta::Regex::builder()
            .configure(
                meta::Config::new()
                    .match_kind(MatchKind::All)
                    .utf8_empty(false)
                    .which_captures(WhichCaptures::None),
            )
            .build_many_from_hir(&loosened)
            .ok()?;
        Some(Wide {
            loose: Some(loose),
            exact,
        })
    }

    /// No set (it could not be built): every pattern is confirmed alone.
    pub(super) fn none(n: usize) -> Wide {
        Wide {
            loose: None,
            exact: vec![false; n],
        }
    }

    /// The patterns that match `text`, ascending.
    pub(super) fn matches(&self, patterns: &[String], singles: &Singles, text: &str) -> Vec<usize> {
        let candidates: Vec<usize> = match &self.loose {
            Some(set) => {
                let mut found = PatternSet::new(set.pattern_len());
                set.which_overlapping_matches(&Input::new(&fold(text)), &mut found);
                found.iter().map(|id| id.as_usize()).collect()
            }
            None => (0..patterns.len()).collect(),
        };
        candidates
            .into_iter()
            .filter(|&i| self.exact[i] || singles.unicode_match(patterns, i, text))
            .collect()
    }
}

/// `pattern` alone, as `regex::Regex::new` compiles it but for `is_match` only: no capture
/// groups and no lazy DFA, so no reverse NFA (that DFA would give up at the line's first non-ASCII
/// byte anyway where the pattern has a Unicode `\b`). sglang's capture phase (`(?i)`, `\w`),
/// which its progress bars' lines reach, holds 60 KB instead of 360 KB with its cache, and its
/// compile at such a line adds 1.0 MB to the peak heap instead of 1.5 (issue 28, peak RSS).
fn single(pattern: &str) -> meta::Regex {
    meta::Regex::builder()
        .configure(
            meta::Config::new()
                .which_captures(WhichCaptures::None)
                .hybrid(false),
        )
        .build(pattern)
        .expect("checked pattern")
}

/// The line with each non-ASCII character replaced by the one byte [`FOLDED`].
pub(super) fn fold(text: &str) -> Vec<u8> {
    text.chars()
        .map(|c| if c.is_ascii() { c as u8 } else { FOLDED })
        .collect()
}

/// `hir` (a pattern parsed with Unicode on) as a byte pattern that matches the [`fold`]ed text
/// of every text it matches; `lossless` is cleared when it may match more. Sound because
/// folding is one byte per character that keeps every ASCII byte: a class keeps its ASCII part
/// and takes `FOLDED` for any non-ASCII member; a literal is folded as the text is; the anchors of
/// the text and of its lines (`\n`, `\r` are ASCII) stay where they were; a word boundary, which
/// folding can move, matches everywhere; anything else that names non-ASCII bytes matches any
/// text.
fn loosen(hir: &Hir, lossless: &mut bool) -> Hir {
    match hir.kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(hir::Literal(bytes)) => match std::str::from_utf8(bytes) {
            Ok(s) => {
                *lossless &= s.is_ascii();
                Hir::literal(fold(s))
            }
            Err(_) => anything(lossless),
        },
        HirKind::Class(Class::Unicode(class)) => {
            let ascii = class
                .ranges()
                .iter()
                .filter(|r| r.start().is_ascii())
                .map(|r| ClassBytesRange::new(r.start() as u8, (r.end() as u32).min(0x7f) as u8));
            let mut bytes = ClassBytes::new(ascii);
            let wide = class.ranges().iter().any(|r| !r.end().is_ascii());
            if wide {
                bytes.push(ClassBytesRange::new(FOLDED, FOLDED));
                // Lossless when the class holds every non-ASCII character (`.`, `[^"]`).
                let mut outside = class.clone();
                outside.negate();
                *lossless &= outside.ranges().iter().all(|r| r.end().is_ascii());
            }
            Hir::class(Class::Bytes(bytes))
        }
        HirKind::Class(Class::Bytes(class)) => match class.is_ascii() {
            true => hir.clone(),
            false => anything(lossless),
        },
        HirKind::Look(look) => match look {
            Look::Start
            | Look::End
            | Look::StartLF
            | Look::EndLF
            | Look::StartCRLF
            | Look::EndCRLF => hir.clone(),
            _ => {
                *lossless = false;
                Hir::empty()
            }
        },
        HirKind::Repetition(r) => Hir::repetition(hir::Repetition {
            min: r.min,
            max: r.max,
            greedy: r.greedy,
            sub: Box::new(loosen(&r.sub, lossless)),
        }),
        // No group is read back: the set only says which patterns match.
        HirKind::Capture(c) => loosen(&c.sub, lossless),
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(|h| loosen(h, lossless)).collect()),
        HirKind::Alternation(subs) => {
            Hir::alternation(subs.iter().map(|h| loosen(h, lossless)).collect())
        }
    }
}

/// Any text at all (`(?s-u:.)*`).
fn anything(lossless: &mut bool) -> Hir {
    *lossless = false;
    Hir::repetition(hir::Repetition {
        min: 0,
        max: None,
        greedy: true,
        sub: Box::new(Hir::class(Class::Bytes(ClassBytes::new([
            ClassBytesRange::new(0, 0xff),
        ])))),
    })
}
