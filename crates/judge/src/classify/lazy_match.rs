//! One pattern asked only whether it matches a line: a forward lazy DFA alone (with the
//! memchr/memmem search of its literal prefixes), its cache shared by the classifier's clones
//! behind a lock that no search waits for. A whole `regex` also holds a reverse NFA, capture
//! states and a pool of caches: ~300 of them were 1.0 MB more at the peak (issue 28, peak RSS).

use std::sync::{Mutex, TryLockError};

use regex_automata::Input;
use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::util::prefilter::Prefilter as Literal;
use regex_syntax::hir::Hir;

/// A lazy DFA and its cache.
#[derive(Debug)]
pub(super) struct LazyMatch(Box<(DFA, Mutex<Cache>)>);

impl LazyMatch {
    /// `hir` compiled; `None` where the lazy DFA cannot take it (a Unicode word boundary: without
    /// its heuristic, which would quit at non-ASCII bytes, the build fails) or it does not build.
    pub(super) fn new(hir: &Hir) -> Option<LazyMatch> {
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .which_captures(WhichCaptures::None)
                    .utf8(false),
            )
            .build_from_hir(hir)
            .ok()?;
        // The pattern's literal prefixes, searched with memchr/memmem where it has them (a plain
        // literal is found at memmem's speed, as the whole regex finds it).
        let pre = Literal::from_hir_prefix(regex_automata::MatchKind::LeftmostFirst, hir);
        let dfa = DFA::builder()
            .configure(DFA::config().prefilter(pre))
            .build_from_nfa(nfa)
            .ok()?;
        let cache = Mutex::new(dfa.create_cache());
        Some(LazyMatch(Box::new((dfa, cache))))
    }

    /// Whether the pattern matches somewhere in `hay`.
    pub(super) fn is_match(&self, hay: &[u8]) -> bool {
        let (dfa, cache) = &*self.0;
        // Never gives up (no minimum cache clear count) and quits at no byte (see `new`).
        let search = |cache: &mut Cache| {
            dfa.try_search_fwd(cache, &Input::new(hay).earliest(true))
                .expect("a lazy DFA without quit bytes searches any haystack")
                .is_some()
        };
        match cache.try_lock() {
            Ok(mut held) => search(&mut held),
            Err(TryLockError::Poisoned(e)) => search(&mut e.into_inner()),
            // Another watch of this process is searching with it: a cache of its own.
            Err(TryLockError::WouldBlock) => search(&mut dfa.create_cache()),
        }
    }
}
