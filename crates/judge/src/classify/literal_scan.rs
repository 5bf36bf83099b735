//! The prefilter's literal scan (issue 28): which of a set of literals (lower-cased, searched
//! ASCII case-insensitively) a line holds. It is one Aho-Corasick DFA, walked by hand: a walk
//! costs one dependent table step per byte, bound by the latency of that load, so a line is
//! walked as two halves at once (the CPU overlaps the two chains of loads). The second walk
//! starts from the start state at the middle; the first runs on past the middle until it is back
//! in the start state (no literal it is inside of started before the middle), or until the longest
//! literal could not reach further. Every occurrence is reported by one walk or the other (some by
//! both): the same occurrences as one walk over the line, each with where it ends, which the
//! tests check.

use std::sync::Arc;

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::dfa::DFA;
use aho_corasick::{Anchored, MatchKind};

/// Lines shorter than this take one walk.
const TWO_WALKS: usize = 16;

/// The literals' automaton and what the walks need of it.
#[derive(Debug, Clone)]
pub(super) struct LiteralScan {
    /// Shared by the classifier's clones (a plan's, each judge's): the automaton is most of the
    /// classifier's heap (0.8 MB), and `dfa::DFA` itself clones deep.
    dfa: Arc<DFA>,
    start: StateID,
    longest: usize,
}

impl LiteralScan {
    /// The scan for `literals` (each at least one byte); `None` when the automaton does not build.
    pub(super) fn new(literals: &[Vec<u8>]) -> Option<LiteralScan> {
        let dfa = DFA::builder()
            .ascii_case_insensitive(true)
            // Every literal ending at each byte (overlapping semantics), never a dead state.
            .match_kind(MatchKind::Standard)
            // Its prefilter would only serve the crate's own search loop.
            .prefilter(false)
            .build(literals)
            .ok()?;
        let start = dfa.start_state(Anchored::No).ok()?;
        let longest = dfa.max_pattern_len();
        Some(LiteralScan {
            dfa: Arc::new(dfa),
            start,
            longest,
        })
    }

    /// Calls `found` with the index of each literal that occurs in `hay` and where that
    /// occurrence ends (the index just past its last byte): every occurrence at least once, some
    /// twice.
    pub(super) fn each(&self, hay: &[u8], found: &mut impl FnMut(usize, usize)) {
        if hay.len() < TWO_WALKS {
            self.walk(self.start, hay, 0, found);
            return;
        }
        let (first, second) = hay.split_at(hay.len() / 2);
        let half = first.len();
        let (mut a, mut b) = (self.start, self.start);
        for (k, (&x, &y)) in first.iter().zip(second).enumerate() {
            a = self.step(a, x, k + 1, found);
            b = self.step(b, y, half + k + 1, found);
        }
        // The first walk goes on into `second` while an occurrence that started in `first` may
        // still end: not back in the start state, and less than the longest literal past the
        // middle. The second walk goes on meanwhile.
        let reach = second.len().min(self.longest - 1);
        let (mut i, mut j) = (0, half);
        while i < reach && a != self.start {
            a = self.step(a, second[i], half + i + 1, found);
            i += 1;
            if let Some(&y) = second.get(j) {
                b = self.step(b, y, half + j + 1, found);
                j += 1;
            }
        }
        self.walk(b, &second[j..], half + j, found);
    }

    /// One step of a walk, over the byte just before `end`: the next state, its literals
    /// reported as ending at `end`.
    #[inline(always)]
    fn step(
        &self,
        sid: StateID,
        byte: u8,
        end: usize,
        found: &mut impl FnMut(usize, usize),
    ) -> StateID {
        let next = self.dfa.next_state(Anchored::No, sid, byte);
        if self.dfa.is_special(next) {
            self.report(next, end, found);
        }
        next
    }

    /// One walk over `hay` from state `sid`; `hay` begins at `offset` of the line.
    fn walk(
        &self,
        mut sid: StateID,
        hay: &[u8],
        offset: usize,
        found: &mut impl FnMut(usize, usize),
    ) {
        for (k, &x) in hay.iter().enumerate() {
            sid = self.step(sid, x, offset + k + 1, found);
        }
    }

    /// The literals that end where the walk is, if it is in a match state.
    fn report(&self, sid: StateID, end: usize, found: &mut impl FnMut(usize, usize)) {
        // Standard semantics: an unanchored walk never reaches the dead state.
        debug_assert!(!self.dfa.is_dead(sid));
        if self.dfa.is_match(sid) {
            for k in 0..self.dfa.match_len(sid) {
                found(self.dfa.match_pattern(sid, k).as_usize(), end);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The occurrences found (literal, end), by the walks and by a plain case-insensitive search
    /// for each literal.
    fn both(literals: &[Vec<u8>], hay: &[u8]) -> (Vec<(usize, usize)>, Vec<(usize, usize)>) {
        let scan = LiteralScan::new(literals).unwrap();
        let mut walked = Vec::new();
        scan.each(hay, &mut |i, end| walked.push((i, end)));
        walked.sort_unstable();
        walked.dedup();
        let lower = hay.to_ascii_lowercase();
        let mut plain: Vec<(usize, usize)> = (0..literals.len())
            .flat_map(|i| {
                let n = literals[i].len();
                let ends = lower.windows(n).enumerate();
                ends.filter(move |(_, w)| *w == literals[i])
                    .map(move |(at, _)| (i, at + n))
            })
            .collect();
        plain.sort_unstable();
        (walked, plain)
    }

    #[test]
    fn an_occurrence_across_the_middle_is_found() {
        let literals = vec![b"abcdef".to_vec(), b"xyz".to_vec(), b"cde".to_vec()];
        for n in 40..80 {
            for at in 0..n - 6 {
                let mut hay = vec![b'.'; n];
                hay[at..at + 6].copy_from_slice(b"aBcDeF");
                let (walked, plain) = both(&literals, &hay);
                assert_eq!(walked, plain, "n {n} at {at}");
                assert_eq!(walked, vec![(0, at + 6), (2, at + 5)]);
            }
        }
    }

    proptest! {
        #[test]
        fn the_walks_find_what_a_plain_search_finds(
            literals in prop::collection::vec("[abcAB]{3,9}", 1..12),
            hay in "[abcAB .]{0,160}",
        ) {
            let literals: Vec<Vec<u8>> = literals.iter().map(|l| l.to_ascii_lowercase().into_bytes()).collect();
            let (walked, plain) = both(&literals, hay.as_bytes());
            prop_assert_eq!(walked, plain);
        }
    }
}
