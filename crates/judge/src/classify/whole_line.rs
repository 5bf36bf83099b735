//! A byte test before the prefilter's `always` set (the patterns with no literal, which would
//! otherwise run on every line): a pattern that can only match a whole line (`^\s*$`,
//! `^[=-]{20,}\s*$`: every match starts at `^` and ends at `$`) can only match a line whose every
//! byte is one its syntax names. A line with another byte (nearly every line, at its first byte,
//! for the blank-line noise pattern) cannot match, and the set is not run. Where any such pattern
//! is not whole-line, there is no test and the set runs on every line, as before.

use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// The bytes a match of one of the patterns may hold.
#[derive(Debug, Clone)]
pub(super) struct WholeLine {
    allowed: [bool; 256],
}

impl WholeLine {
    /// The test for `patterns` (ASCII semantics, as the fast path compiles them); `None` unless
    /// every one matches only whole lines.
    pub(super) fn new(patterns: &[&str]) -> Option<WholeLine> {
        let mut allowed = [false; 256];
        for p in patterns {
            let hir = regex_syntax::ParserBuilder::new()
                .unicode(false)
                .utf8(false)
                .build()
                .parse(p)
                .ok()?;
            let props = hir.properties();
            // `Start` and `End` (not the multi-line `StartLF`..): the haystack's own ends.
            if !props.look_set_prefix().contains(Look::Start)
                || !props.look_set_suffix().contains(Look::End)
            {
                return None;
            }
            mark(&hir, &mut allowed);
        }
        Some(WholeLine { allowed })
    }

    /// Whether `line` may match one of the patterns: false when it holds a byte that no match
    /// holds.
    pub(super) fn may_match(&self, line: &[u8]) -> bool {
        line.iter().all(|&b| self.allowed[usize::from(b)])
    }
}

/// Marks every byte that a match of `h` may hold.
fn mark(h: &Hir, allowed: &mut [bool; 256]) {
    let mut range = |start: u32, end: u32| {
        for b in start.min(0x100)..=end.min(0xff) {
            allowed[b as usize] = true;
        }
        // A code point past ASCII is bytes of 0x80 and up in UTF-8.
        if end >= 0x80 {
            allowed[0x80..].fill(true);
        }
    };
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(lit) => lit.0.iter().for_each(|&b| range(b.into(), b.into())),
        HirKind::Class(Class::Bytes(c)) => c
            .ranges()
            .iter()
            .for_each(|r| range(r.start().into(), r.end().into())),
        HirKind::Class(Class::Unicode(c)) => c
            .ranges()
            .iter()
            .for_each(|r| range(r.start().into(), r.end().into())),
        HirKind::Repetition(r) => mark(&r.sub, allowed),
        HirKind::Capture(c) => mark(&c.sub, allowed),
        HirKind::Concat(items) | HirKind::Alternation(items) => {
            items.iter().for_each(|i| mark(i, allowed))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const WHOLE: [&str; 4] = [
        r"^\s*$",
        r"^[=-]{20,}\s*$",
        r"^[\s_.\-`|,()]+$",
        r"(?i)^(?:abc|x\d+)\s*$",
    ];

    #[test]
    fn only_patterns_anchored_at_both_ends_get_a_test() {
        for p in WHOLE {
            assert!(WholeLine::new(&[p]).is_some(), "{p}");
        }
        for p in [r"\s*$", r"^ab", r"^a|b$", r"(?m)^\s*$", r"^(?:a$|b)"] {
            assert!(WholeLine::new(&[p]).is_none(), "{p}");
        }
        assert!(WholeLine::new(&[r"^\s*$", r"^ab"]).is_none());
    }

    #[test]
    fn a_blank_line_may_match_and_a_word_may_not() {
        let t = WholeLine::new(&[r"^\s*$"]).unwrap();
        assert!(t.may_match(b"") && t.may_match(b" \t "));
        assert!(!t.may_match(b"  File x") && !t.may_match(b"INFO"));
    }

    proptest! {
        #[test]
        fn a_line_ruled_out_matches_no_pattern(line in "[ \t=\\-_.`|,()aAbBcCxX0-9;]{0,30}") {
            let set = regex::bytes::RegexSetBuilder::new(WHOLE).unicode(false).build().unwrap();
            let test = WholeLine::new(&WHOLE).unwrap();
            if !test.may_match(line.as_bytes()) {
                prop_assert!(!set.is_match(line.as_bytes()));
            }
        }
    }
}
