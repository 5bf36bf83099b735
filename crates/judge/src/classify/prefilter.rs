//! The literal prefilter of the ASCII fast path (issue 28): most log lines match no pattern, and
//! most patterns need a literal that most lines lack. So each pattern's required literals (a set
//! of strings, one of which every match contains) are derived from its syntax tree, never written
//! by hand: a catalog entry added tomorrow gets its own. One Aho-Corasick scan of the line for all
//! of them (ASCII case-insensitive, so `(?i)` patterns are covered) names the few patterns that
//! can match; each is then confirmed by its own regex (compiled while the watch waits, see
//! [`Prefilter::compile_next`]). The patterns with
//! no usable literal (shorter than [`MIN_LITERAL`], or none: `^\s*$`) are a set that always runs.
//!
//! Contract: [`Prefilter::matching`] gives exactly the indices that the whole ASCII set gives on
//! an ASCII line (the tests compare both over every fixture log and the catalog's examples). A
//! line that reaches no regex costs one scan and allocates nothing.
//!
//! Why the literals are sound: a literal node must appear in every match of a concatenation that
//! contains it; a run of adjacent nodes that each match one of a few strings matches one of their
//! concatenations; an alternation needs one of its branches' literals; a repetition at least once
//! needs its body's. Everything else (classes wider than a letter's two cases, optional parts)
//! ends a run. Literals are kept lower-cased and searched case-insensitively, which can only find
//! more lines, never fewer.

use std::sync::{Arc, OnceLock};

use regex::bytes::{RegexSet, RegexSetBuilder};
use regex_automata::meta;
use regex_automata::util::syntax;
use regex_syntax::hir::{Class, Hir, HirKind};

use super::lazy_match::LazyMatch;
use super::literal_scan::LiteralScan;
use super::plain_literal::PlainLiteral;
use super::whole_line::WholeLine;

/// Shortest literal worth a scan: shorter ones are in too many lines to rule any out.
const MIN_LITERAL: usize = 3;
/// At most this many alternative literals per pattern (beyond: no literal, the pattern runs).
const MAX_ALTERNATIVES: usize = 64;
/// Literals are cut to this length (a required literal's prefix is required too).
const MAX_LEN: usize = 32;
/// The scan looks for each literal's first this many bytes (a prefix of a required literal is
/// required too). The scan's DFA has a row of transitions for each prefix of a literal: cut to 8
/// bytes, the catalog's 424 literals are 271 keys and the DFA 0.8 MB instead of 3.9 (issue 28,
/// peak RSS). Where a key occurs, the rest of a longer literal is compared at that place
/// ([`Owner::tail`]), so the key's shortness costs no regex run: on the serving fixtures' lines,
/// 630 confirming runs became 177 (134 of them match).
const SCAN_LEN: usize = 8;

/// A pattern that requires one of the literals beginning with a scan key: the pattern, and what
/// follows the key in that literal (empty where the literal is the key).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Owner {
    pattern: usize,
    tail: Box<[u8]>,
}

impl Owner {
    /// Whether the literal this owner requires occurs where its key ends at `end` in `hay`
    /// (ASCII case-insensitive, as the scan; literals are lower-cased).
    fn holds(&self, hay: &[u8], end: usize) -> bool {
        self.tail.is_empty()
            || hay
                .get(end..end + self.tail.len())
                .is_some_and(|rest| rest.eq_ignore_ascii_case(&self.tail))
    }
}

/// A set of lower-cased strings.
type Literals = Vec<Vec<u8>>;

/// The literal scan, the patterns it gates (each compiled alone), and the set of the patterns
/// that always run.
#[derive(Debug, Clone)]
pub(super) struct Prefilter {
    literals: LiteralScan,
    /// For each scan key (the scan's pattern id), the patterns that require a literal beginning
    /// with it.
    owners: Vec<Vec<Owner>>,
    /// Every pattern's text, and each gated one compiled alone with ASCII semantics: a small
    /// automaton that stays warm, where the whole set's lazy DFA thrashes on a real log's varied
    /// lines. Compiled by [`Prefilter::compile_next`] (the shell calls it while the watch has
    /// nothing to do), else on the first line that needs it. That line is a failure line, and
    /// at a memory-cgroup OOM the allocation would come when memory is tightest (issue 28).
    /// Shared by clones, so one compile serves the plan's classifier and the judge's copy.
    patterns: Arc<[String]>,
    compiled: Arc<[OnceLock<Confirm>]>,
    always: Option<RegexSet>,
    always_ids: Vec<usize>,
    /// A byte test that rules out most lines before `always` runs, where it can.
    always_test: Option<WholeLine>,
}

impl Prefilter {
    /// The prefilter of `patterns` (ASCII semantics, as the fast path compiles them); `None` when
    /// no pattern has a usable literal or a part does not build (the plain set is used then).
    pub(super) fn new(patterns: &Arc<[String]>) -> Option<Prefilter> {
        let mut by_literal: Vec<(Vec<u8>, Owner)> = Vec::new();
        let (mut always, mut always_ids) = (vec![], vec![]);
        for (i, p) in patterns.iter().enumerate() {
            match required_literals(p) {
                Some(lits) => by_literal.extend(lits.into_iter().map(|mut l| {
                    let tail = l.split_off(l.len().min(SCAN_LEN)).into_boxed_slice();
                    (l, Owner { pattern: i, tail })
                })),
                None => {
                    always.push(p.as_str());
                    always_ids.push(i);
                }
            }
        }
        if by_literal.is_empty() {
            return None;
        }
        by_literal.sort();
        by_literal.dedup();
        let mut literals: Literals = Vec::new();
        let mut owners: Vec<Vec<Owner>> = Vec::new();
        for (lit, owner) in by_literal {
            if literals.last() != Some(&lit) {
                literals.push(lit);
                owners.push(Vec::new());
            }
            owners.last_mut().expect("pushed above").push(owner);
        }
        let scan = LiteralScan::new(&literals)?;
        Some(Prefilter {
            literals: scan,
            owners,
            patterns: Arc::clone(patterns),
            compiled: (0..patterns.len()).map(|_| OnceLock::new()).collect(),
            always: if always.is_empty() {
                None
            } else {
                Some(ascii_set(&always)?)
            },
            always_ids,
            always_test: WholeLine::new(&always),
        })
    }

    /// The indices (into the patterns it was built from, ascending) of the patterns that match
    /// the ASCII `line`; `None` when none does (no allocation then, nor for a line whose
    /// literals' patterns all fail their regex: the candidates are bits on the stack).
    pub(super) fn matching(&self, line: &[u8]) -> Option<Vec<usize>> {
        let always = self.always.as_ref().is_some_and(|a| {
            self.always_test.as_ref().is_none_or(|t| t.may_match(line)) && a.is_match(line)
        });
        let mut inline = [0u64; 8];
        let mut heap = Vec::new();
        let words = self.patterns.len().div_ceil(64);
        let bits: &mut [u64] = if words <= inline.len() {
            &mut inline[..words]
        } else {
            heap.resize(words, 0);
            &mut heap
        };
        // The patterns whose literal is in the line, each confirmed by its own regex.
        let mut any = false;
        self.literals.each(line, &mut |literal, end| {
            for o in &self.owners[literal] {
                if o.holds(line, end) {
                    any = true;
                    bits[o.pattern / 64] |= 1 << (o.pattern % 64);
                }
            }
        });
        if !any && !always {
            return None;
        }
        for (w, word) in bits.iter_mut().enumerate() {
            let mut rest = *word;
            while rest != 0 {
                let bit = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                if !self.regex(w * 64 + bit).is_match(line) {
                    *word &= !(1 << bit);
                }
            }
        }
        if let Some(a) = self.always.as_ref().filter(|_| always) {
            for i in a.matches(line).iter().map(|i| self.always_ids[i]) {
                bits[i / 64] |= 1 << (i % 64);
            }
        }
        // Ascending: the slots are resolved in pattern order (the last matching phase wins).
        let mut matched = Vec::new();
        for (w, &word) in bits.iter().enumerate() {
            let mut rest = word;
            while rest != 0 {
                matched.push(w * 64 + rest.trailing_zeros() as usize);
                rest &= rest - 1;
            }
        }
        (!matched.is_empty()).then_some(matched)
    }

    /// The patterns (ascending) that may match `text` with Unicode semantics, a line with
    /// non-ASCII text: those with one of their literals in it, and those that always run. Each
    /// is then confirmed alone (`Singles`). Sound because the literals are ASCII and a pattern of
    /// an ASCII set is ASCII itself (`ascii_set.rs`): a match holds a required literal byte for
    /// byte (UTF-8 never puts an ASCII byte inside another character), up to case. Unicode's
    /// simple case folding adds only two non-ASCII characters to an ASCII letter's cases: `K`
    /// (Kelvin sign) to `k` and `ſ` (long s) to `s`; the scan reads them as those letters.
    pub(super) fn candidates(&self, text: &str) -> Vec<usize> {
        let folded;
        let hay = if text.contains(['\u{212A}', '\u{17F}']) {
            folded = text.replace('\u{212A}', "k").replace('\u{17F}', "s");
            folded.as_bytes()
        } else {
            text.as_bytes()
        };
        let mut ids = self.always_ids.clone();
        self.literals.each(hay, &mut |literal, end| {
            let held = self.owners[literal].iter().filter(|o| o.holds(hay, end));
            ids.extend(held.map(|o| o.pattern));
        });
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Compiles up to `n` more of the gated patterns not compiled yet (no line then pays for
    /// them); returns whether all of them are compiled now.
    pub(super) fn compile_next(&self, n: usize) -> bool {
        let mut pending = (0..self.patterns.len())
            .filter(|&i| !self.always_ids.contains(&i) && self.compiled[i].get().is_none());
        for i in pending.by_ref().take(n) {
            self.regex(i);
        }
        pending.next().is_none()
    }

    /// Pattern `i` alone, ASCII semantics.
    fn regex(&self, i: usize) -> &Confirm {
        self.compiled[i].get_or_init(|| Confirm::new(&self.patterns[i]))
    }

    /// How many patterns run only when one of their literals is in the line (for the tests).
    #[cfg(test)]
    pub(super) fn gated_count(&self) -> usize {
        self.patterns.len() - self.always_ids.len()
    }
}

/// One gated pattern, ASCII semantics (as `regex::bytes::RegexBuilder::unicode(false)` means
/// it), asked only whether it matches a line: a plain literal by a substring search
/// ([`PlainLiteral`]), any other by a lazy DFA ([`LazyMatch`]). A pattern the lazy DFA cannot
/// take (a Unicode word boundary written with `(?u)`) keeps the meta regex.
#[derive(Debug)]
enum Confirm {
    Plain(Box<PlainLiteral>),
    Lazy(LazyMatch),
    Meta(meta::Regex),
}

impl Confirm {
    fn new(pattern: &str) -> Confirm {
        let syntax = syntax::Config::new().unicode(false).utf8(false);
        let hir = syntax::parse_with(pattern, &syntax).ok();
        if let Some(plain) = hir.as_ref().and_then(PlainLiteral::of) {
            return Confirm::Plain(Box::new(plain));
        }
        match hir.as_ref().and_then(LazyMatch::new) {
            Some(lazy) => Confirm::Lazy(lazy),
            None => Confirm::Meta(
                meta::Regex::builder()
                    .syntax(syntax)
                    .configure(meta::Config::new().utf8_empty(false))
                    .build(pattern)
                    // Within the size limit as part of the set (same default limit), so alone too.
                    .expect("a pattern of the ASCII set compiles alone"),
            ),
        }
    }

    fn is_match(&self, line: &[u8]) -> bool {
        match self {
            Confirm::Plain(plain) => plain.is_match(line),
            Confirm::Lazy(lazy) => lazy.is_match(line),
            Confirm::Meta(re) => re.is_match(line),
        }
    }
}

/// `patterns` as one set with ASCII semantics (the fast path's).
pub(super) fn ascii_set<S: AsRef<str>>(patterns: &[S]) -> Option<RegexSet> {
    RegexSetBuilder::new(patterns)
        .unicode(false)
        .dfa_size_limit(8 << 20)
        .build()
        .ok()
}

/// Strings one of which every match of `pattern` (ASCII semantics) contains, lower-cased, each
/// at least [`MIN_LITERAL`] long; `None` when there are none such.
pub(super) fn required_literals(pattern: &str) -> Option<Literals> {
    let hir = regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .build()
        .parse(pattern)
        .ok()?;
    facts(&hir).required.filter(usable)
}

/// What a node says: every string it can match, when they are few (`exact`), and strings one of
/// which each of its matches contains (`required`).
struct Facts {
    exact: Option<Literals>,
    required: Option<Literals>,
}

fn facts(h: &Hir) -> Facts {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => Facts {
            exact: Some(vec![Vec::new()]),
            required: None,
        },
        HirKind::Literal(lit) => {
            let lower: Vec<u8> = lit.0.iter().map(u8::to_ascii_lowercase).collect();
            if lower.len() > MAX_LEN {
                let cut = lower[..MAX_LEN].to_vec();
                return Facts {
                    exact: None,
                    required: Some(vec![cut]),
                };
            }
            Facts {
                exact: Some(vec![lower.clone()]),
                required: Some(vec![lower]),
            }
        }
        HirKind::Class(c) => {
            let exact = class_bytes(c);
            Facts {
                required: exact.clone(),
                exact,
            }
        }
        HirKind::Capture(c) => facts(&c.sub),
        HirKind::Repetition(r) => {
            let sub = facts(&r.sub);
            let exact = match (r.min, r.max, sub.exact) {
                (1, Some(1), e) => e,
                (0, Some(1), Some(mut e)) => {
                    e.push(Vec::new());
                    normalize(e)
                }
                _ => None,
            };
            Facts {
                exact,
                required: if r.min >= 1 { sub.required } else { None },
            }
        }
        HirKind::Concat(items) => concat(items),
        HirKind::Alternation(alts) => {
            let all: Vec<Facts> = alts.iter().map(facts).collect();
            let union = |pick: &dyn Fn(&Facts) -> Option<Literals>| -> Option<Literals> {
                let mut u = Vec::new();
                for f in &all {
                    u.extend(pick(f)?);
                }
                normalize(u)
            };
            Facts {
                exact: union(&|f| f.exact.clone()),
                required: union(&|f| f.required.clone()),
            }
        }
    }
}

/// A concatenation: its exact strings when every part has few; its best required literals among
/// each part's own and each run of adjacent exact parts joined.
fn concat(items: &[Hir]) -> Facts {
    let parts: Vec<Facts> = items.iter().map(facts).collect();
    let mut best: Option<Literals> = None;
    let mut run: Option<Literals> = Some(vec![Vec::new()]);
    let mut exact: Option<Literals> = Some(vec![Vec::new()]);
    for p in &parts {
        consider(&mut best, p.required.clone());
        exact = match (&exact, &p.exact) {
            (Some(a), Some(b)) => product(a, b),
            _ => None,
        };
        run = match (run, &p.exact) {
            (Some(r), Some(e)) => match product(&r, e) {
                Some(joined) => Some(joined),
                None => {
                    consider(&mut best, Some(r));
                    Some(e.clone())
                }
            },
            (r, None) => {
                consider(&mut best, r);
                Some(vec![Vec::new()])
            }
            (None, Some(e)) => Some(e.clone()),
        };
    }
    consider(&mut best, run);
    Facts {
        exact,
        required: best,
    }
}

/// Keeps the better of `best` and `candidate`: usable, then the longer shortest literal, then
/// fewer literals.
fn consider(best: &mut Option<Literals>, candidate: Option<Literals>) {
    let Some(c) = candidate.filter(usable) else {
        return;
    };
    let score = |l: &Literals| {
        let shortest = l.iter().map(Vec::len).min().unwrap_or(0);
        (shortest, std::cmp::Reverse(l.len()))
    };
    if best.as_ref().is_none_or(|b| score(&c) > score(b)) {
        *best = Some(c);
    }
}

/// Every literal at least [`MIN_LITERAL`] long.
fn usable(l: &Literals) -> bool {
    !l.is_empty() && l.iter().all(|s| s.len() >= MIN_LITERAL)
}

/// Each string of `a` followed by each of `b`, when they are few and short enough.
fn product(a: &Literals, b: &Literals) -> Option<Literals> {
    if a.len() * b.len() > MAX_ALTERNATIVES {
        return None;
    }
    let mut out = Vec::with_capacity(a.len() * b.len());
    for x in a {
        for y in b {
            if x.len() + y.len() > MAX_LEN {
                return None;
            }
            let mut s = x.clone();
            s.extend_from_slice(y);
            out.push(s);
        }
    }
    normalize(out)
}

/// Sorted, without repeats; `None` past [`MAX_ALTERNATIVES`].
fn normalize(mut l: Literals) -> Option<Literals> {
    l.sort();
    l.dedup();
    (l.len() <= MAX_ALTERNATIVES).then_some(l)
}

/// The bytes a class matches, lower-cased, as one-byte strings, when they are at most 4 after
/// lower-casing (`[Kk]` is `k`; `[0-9]` is none).
fn class_bytes(c: &Class) -> Option<Literals> {
    let mut bytes: Vec<u8> = Vec::new();
    let mut push_range = |start: u32, end: u32| -> Option<()> {
        if end - start > 64 || end > 0x7f {
            return None;
        }
        for b in start..=end {
            bytes.push((b as u8).to_ascii_lowercase());
        }
        Some(())
    };
    match c {
        Class::Bytes(b) => {
            for r in b.ranges() {
                push_range(u32::from(r.start()), u32::from(r.end()))?;
            }
        }
        Class::Unicode(u) => {
            for r in u.ranges() {
                push_range(u32::from(r.start()), u32::from(r.end()))?;
            }
        }
    }
    bytes.sort_unstable();
    bytes.dedup();
    (bytes.len() <= 4).then(|| bytes.into_iter().map(|b| vec![b]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compile_next_compiles_every_gated_pattern_once_for_every_clone() {
        let patterns: Arc<[String]> = ["CUDA out of memory", r"^\s*$", r"NCCL (?:error|timeout)"]
            .map(String::from)
            .into();
        let pf = Prefilter::new(&patterns).unwrap();
        let judges_copy = pf.clone();
        let compiled =
            |p: &Prefilter| -> Vec<bool> { p.compiled.iter().map(|c| c.get().is_some()).collect() };
        assert_eq!(compiled(&judges_copy), vec![false; 3]);
        assert!(!pf.compile_next(1));
        assert_eq!(compiled(&judges_copy), vec![true, false, false]);
        // The pattern without a literal runs in the `always` set: nothing to compile alone.
        assert!(pf.compile_next(1));
        assert_eq!(compiled(&judges_copy), vec![true, false, true]);
        assert!(judges_copy.compile_next(1));
        assert_eq!(judges_copy.matching(b"NCCL error"), Some(vec![2]));
    }

    #[test]
    fn a_line_with_a_literal_s_key_but_not_the_rest_runs_no_regex() {
        let patterns: Arc<[String]> = [r"\bEngine core initialization failed\b", r"\bOOM\b"]
            .map(String::from)
            .into();
        let ran =
            |p: &Prefilter| -> Vec<bool> { p.compiled.iter().map(|c| c.get().is_some()).collect() };
        // (line, what matches, whether the first pattern's regex had to run)
        let table: &[(&[u8], Option<Vec<usize>>, bool)] = &[
            (b"INFO Engine core 0 started", None, false),
            (b"ENGINE CORE initialization done", None, false),
            (b"ends in its key: engine c", None, false),
            (b"Engine core initialization failed", Some(vec![0]), true),
            // The scan is case-insensitive, the pattern is not: its regex says no.
            (b"engine core initialization failed", None, true),
            (
                b"xEngine core initialization failed, OOM",
                Some(vec![1]),
                true,
            ),
        ];
        for (line, want, runs) in table {
            let pf = Prefilter::new(&patterns).unwrap();
            assert_eq!(
                pf.matching(line),
                *want,
                "{}",
                String::from_utf8_lossy(line)
            );
            assert_eq!(ran(&pf)[0], *runs, "{}", String::from_utf8_lossy(line));
        }
    }
    #[test]
    fn literals_are_derived_from_the_syntax() {
        let lits = |p: &str| {
            required_literals(p).map(|l| {
                l.into_iter()
                    .map(|s| String::from_utf8(s).unwrap())
                    .collect::<Vec<_>>()
            })
        };
        let table: &[(&str, Option<&[&str]>)] = &[
            ("CUDA out of memory", Some(&["cuda out of memory"])),
            (r"(?i)\bout of memory\b", Some(&["out of memory"])),
            (r"^\s*$", None),
            (r"\d+/\d+", None),
            (
                r"Errno 98|address already in use",
                Some(&["address already in use", "errno 98"]),
            ),
            (r"^\s*warnings\.warn\(", Some(&["warnings.warn("])),
            (r"(?:foo)?bar", Some(&["bar"])),
            (r"ab|c", None),
            (
                r"NCCL (?:error|timeout)",
                Some(&["nccl error", "nccl timeout"]),
            ),
            (r"x{3}yz", None),
            (r"x{3}xyz", Some(&["xyz"])),
        ];
        for (p, want) in table {
            let want = want.map(|w| w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            assert_eq!(lits(p), want, "{p}");
        }
    }
}
