//! The matcher for lines with non-ASCII text (the ASCII fast path answers for the others; see
//! the parent module): the pattern set with its word boundaries dropped, each hit confirmed by its
//! own pattern.

use std::sync::OnceLock;

use regex::{Regex, RegexSet};

/// The matcher for lines with non-ASCII text. A Unicode `RegexSet` of the catalog searches such a
/// line with its slowest engine (~300 µs a line): its lazy DFA cannot decide a Unicode word
/// boundary next to a non-ASCII byte and gives up. So `loose` is the set with every word-boundary
/// assertion dropped (each pattern then matches a superset of what it matched, and the lazy DFA
/// runs), and a pattern it reports is confirmed by the pattern alone (compiled on first need),
/// unless it had no word boundary to drop (then `loose` already answered exactly).
#[derive(Debug, Clone)]
pub(super) struct Wide {
    loose: Option<RegexSet>,
    /// Per pattern: `loose` holds it unchanged.
    exact: Vec<bool>,
    singles: Vec<OnceLock<Regex>>,
}

impl super::Classifier {
    /// The matcher of lines with non-ASCII text, built on first need unless
    /// [`Self::prepare_for_any_text`] built it.
    pub(super) fn wide(&self) -> &Wide {
        self.wide.get_or_init(|| {
            Wide::new(&self.patterns).unwrap_or_else(|| Wide::singles_only(&self.patterns))
        })
    }

    /// Builds now what a line with non-ASCII text needs (a Unicode set of every pattern: ~16 MiB
    /// at its peak, ~0.1 s of a core), which is otherwise built at the first such line. A watcher
    /// calls it before the server runs far: that line comes when the server chooses (llama.cpp's
    /// vocabulary dump, a progress bar's blocks), often as it fills its memory, and a watcher in
    /// the server's memory cgroup that allocates then is the OOM killer's next pick.
    pub fn prepare_for_any_text(&self) {
        self.wide();
    }
}

impl Wide {
    pub(super) fn new(patterns: &[String]) -> Option<Wide> {
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
    pub(super) fn singles_only(patterns: &[String]) -> Wide {
        Wide {
            loose: None,
            exact: vec![false; patterns.len()],
            singles: patterns.iter().map(|_| OnceLock::new()).collect(),
        }
    }

    pub(super) fn matches(&self, patterns: &[String], text: &str) -> Vec<usize> {
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
pub(super) fn drop_word_boundaries(p: &str) -> Option<String> {
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
