//! A gated pattern that is one literal, case-sensitive, with at most an ASCII word boundary on
//! either side (`\bTraceback \(most recent call last\):`, `\bEngineCore failed to start\.`):
//! confirmed by a substring search and a look at the bytes around each occurrence, where a lazy
//! DFA would step through the line in a cache the literal scan has just evicted (issue 28: on the
//! serving fixtures' lines, a confirmation between the scan's steps cost about 300 ns, several
//! times what the same confirmations cost run back to back).
//!
//! Contract: [`PlainLiteral::is_match`] answers as the pattern compiled with ASCII semantics
//! (`unicode(false)`, as the prefilter's confirmations are) on any line; the tests compare both.

use memchr::memmem::Finder;
use regex_syntax::hir::{Hir, HirKind, Look};

/// The literal and whether a word boundary is required before and after it.
#[derive(Debug)]
pub(super) struct PlainLiteral {
    finder: Finder<'static>,
    boundary_before: bool,
    boundary_after: bool,
}

impl PlainLiteral {
    /// `hir` (parsed with ASCII semantics) as a plain literal, when it is one.
    pub(super) fn of(hir: &Hir) -> Option<PlainLiteral> {
        let parts: &[Hir] = match hir.kind() {
            HirKind::Concat(parts) => parts,
            HirKind::Literal(_) => std::slice::from_ref(hir),
            _ => return None,
        };
        let is_boundary = |h: &Hir| matches!(h.kind(), HirKind::Look(Look::WordAscii));
        let boundary_before = parts.first().is_some_and(is_boundary);
        let boundary_after = parts.len() > 1 && parts.last().is_some_and(is_boundary);
        let middle =
            &parts[usize::from(boundary_before)..parts.len() - usize::from(boundary_after)];
        let [literal] = middle else { return None };
        let HirKind::Literal(bytes) = literal.kind() else {
            return None;
        };
        Some(PlainLiteral {
            finder: Finder::new(&bytes.0).into_owned(),
            boundary_before,
            boundary_after,
        })
    }

    /// Whether the pattern matches somewhere in `line`: at any occurrence, overlapping ones
    /// included (`__\b` in `___.` is the one that starts second).
    pub(super) fn is_match(&self, line: &[u8]) -> bool {
        let n = self.finder.needle().len();
        let word = |at: Option<&u8>| at.is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_');
        let mut from = 0;
        while let Some(found) = line.get(from..).and_then(|rest| self.finder.find(rest)) {
            let at = from + found;
            let before = at.checked_sub(1).and_then(|i| line.get(i));
            if (!self.boundary_before || word(before) != word(line.get(at)))
                && (!self.boundary_after || word(line.get(at + n - 1)) != word(line.get(at + n)))
            {
                return true;
            }
            from = at + 1;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use regex_automata::util::syntax;

    fn parse(pattern: &str) -> Hir {
        let config = syntax::Config::new().unicode(false).utf8(false);
        syntax::parse_with(pattern, &config).unwrap()
    }

    /// The plain reading and the regex's, on `line`.
    fn both(pattern: &str, line: &[u8]) -> (bool, bool) {
        let plain = PlainLiteral::of(&parse(pattern)).expect("a plain literal");
        let re = regex::bytes::RegexBuilder::new(pattern)
            .unicode(false)
            .build()
            .unwrap();
        (plain.is_match(line), re.is_match(line))
    }

    #[test]
    fn which_patterns_are_plain_literals() {
        let table: &[(&str, bool)] = &[
            (r"\bTraceback \(most recent call last\):", true),
            (r"\bEngineCore failed to start\.", true),
            (r"CUDA out of memory", true),
            (r"\bNCCL error\b", true),
            (r"out of memory\b", true),
            (r"(?i)\bout of memory\b", false),
            (r"\bNCCL (?:error|timeout)", false),
            (r"^Traceback", false),
            (r"\bcudaError\w+", false),
            (r"\b", false),
            (r"\b\b", false),
        ];
        for (pattern, plain) in table {
            assert_eq!(
                PlainLiteral::of(&parse(pattern)).is_some(),
                *plain,
                "{pattern}"
            );
        }
    }

    #[test]
    fn word_boundaries_are_the_regex_s() {
        let table: &[(&str, &[u8])] = &[
            (r"\bNCCL error\b", b"NCCL error"),
            (r"\bNCCL error\b", b"xNCCL error"),
            (r"\bNCCL error\b", b"NCCL errors"),
            (r"\bNCCL error\b", b"NCCL errors, NCCL error."),
            (r"\bNCCL error\b", b"_NCCL error"),
            (r"\b\.NCCL\b", b"a.NCCL"),
            (r"\b\.NCCL\b", b" .NCCL"),
            (
                r"\bEngineCore failed to start\.",
                b"EngineCore failed to start.x",
            ),
            (
                r"\bEngineCore failed to start\.",
                b"engineCore failed to start.",
            ),
            (r"out of memory\b", b"CUDA out of memory9"),
            (r"\bab\b", b"abab ab"),
            (r"__\b", b"___."),
        ];
        for (pattern, line) in table {
            let (plain, re) = both(pattern, line);
            assert_eq!(plain, re, "{pattern} on {}", String::from_utf8_lossy(line));
        }
    }

    proptest! {
        #[test]
        fn a_plain_literal_answers_as_its_regex(
            literal in "[ab_. ]{1,4}",
            before in any::<bool>(),
            after in any::<bool>(),
            line in prop::collection::vec(prop::sample::select(b"ab_. \xc3".to_vec()), 0..24),
        ) {
            let escaped = regex_syntax::escape(&literal);
            let pattern = format!(
                "{}{escaped}{}",
                if before { r"\b" } else { "" },
                if after { r"\b" } else { "" }
            );
            let (plain, re) = both(&pattern, &line);
            prop_assert_eq!(plain, re, "{} on {:?}", pattern, line);
        }
    }
}
