//! Hard-wrapped lines: a terminal (or `script`, tmux's capture, a CI console) cuts a long message
//! at its width, a log shipper cuts it at a byte size, and "... (16.00 GiB KV cach" /
//! "e is needed, which is larger than the available KV cache memory ..." then match nothing half
//! by half. The previous line is held when it could be the first half of a wrap, and when the
//! next line could be its continuation, the two are classified joined, once.
//!
//! Cheap conditions, so that a healthy log almost never pays a second classification:
//! - the first half matched nothing fatal (a bare `ValueError: ...` that is cut is evidence
//!   already, and the join can name more), is no ready line and not a traceback's source line,
//!   is long (a wrap only happens to a line that filled the width), and does not end a sentence;
//! - the second half has no record header of its own (no timestamp or level: it is not a new log
//!   record), is not indented (a traceback's frame or source line; one space can be the one
//!   after the cut), came from the same rank, and
//!   either the first half is exactly a usual terminal width or shipper chunk long, or the cut
//!   falls inside a word (the first half ends with a letter or digit, the second starts with a
//!   lower-case letter or digit).
//!
//! A failure the joined text shows and neither half did is evidence at the FIRST half's line (its
//! original text is the decisive line; the context holds both).
//!
//! The held text lives in buffers that are reused, so holding allocates only while they grow.

use crate::classify::{Classifier, Hit, LineClass};
use crate::normalize::NormalLine;
use crate::verdict::LineRef;

/// Shortest line that can be the first half of a wrap (a terminal is at least this wide).
const MIN_WRAP_CHARS: usize = 60;

/// Terminal widths a line is cut at (columns): the defaults of terminals, consoles, CI log
/// viewers and `COLUMNS` settings.
const TERMINAL_WIDTHS: [usize; 16] = [
    80, 100, 110, 120, 132, 140, 150, 160, 180, 200, 220, 240, 250, 256, 300, 320,
];
/// The widest of them.
const WIDEST: usize = {
    let (mut widest, mut i) = (0, 0);
    while i < TERMINAL_WIDTHS.len() {
        if TERMINAL_WIDTHS[i] > widest {
            widest = TERMINAL_WIDTHS[i];
        }
        i += 1;
    }
    widest
};

/// The first half of a possible wrap.
#[derive(Debug, Default)]
pub(super) struct Wraps {
    held: bool,
    number: u64,
    original: String,
    text: String,
    rank: Option<u32>,
    /// The held line's own hits (evidence only).
    hits: Vec<Hit>,
}

/// Failure hits only the joined text shows, and the line they are evidence at.
#[derive(Debug, Clone)]
pub(super) struct Joined {
    /// The hits neither half showed.
    pub(super) hits: Vec<Hit>,
    /// The first half: the decisive line of these hits.
    pub(super) line: LineRef,
    /// The rank that printed it.
    pub(super) rank: Option<u32>,
}

impl Wraps {
    /// Line `normal` (its class `class`, a traceback source line if `source`) read after the
    /// held one: the hits the two joined show that neither does alone, if it continues it.
    pub(super) fn join(
        &self,
        classifier: &Classifier,
        normal: &NormalLine<'_>,
        class: &LineClass,
        source: bool,
    ) -> Option<Joined> {
        if !self.held || source || !continues(&self.original, &self.text, normal, self.rank) {
            return None;
        }
        let mut joined = String::with_capacity(self.text.len() + normal.text.len());
        joined.push_str(&self.text);
        joined.push_str(&normal.text);
        let hits: Vec<Hit> = classifier
            .classify(&joined)
            .hits
            .into_iter()
            .filter(|h| !class.hits.contains(h) && !self.hits.contains(h))
            .collect();
        (!hits.is_empty()).then(|| Joined {
            hits,
            line: LineRef {
                number: self.number,
                text: self.original.clone(),
            },
            rank: self.rank,
        })
    }

    /// Holds line `number` (`original` as read, `normal` normalised, classified `class`) if it
    /// can be the first half of a wrap; lets go of the one held before.
    pub(super) fn hold(
        &mut self,
        number: u64,
        original: &str,
        normal: &NormalLine<'_>,
        class: &LineClass,
        source: bool,
    ) {
        self.held = !source
            && !class.is_fatal()
            && class.ready.is_empty()
            && can_be_cut(original, &normal.text);
        if self.held {
            self.number = number;
            self.original.clear();
            self.original.push_str(original);
            self.text.clear();
            self.text.push_str(&normal.text);
            self.rank = normal.rank;
            self.hits.clear();
            self.hits.extend_from_slice(&class.hits);
        }
    }

    /// Holds nothing (the line read was not one that can be cut).
    pub(super) fn release(&mut self) {
        self.held = false;
    }
}

/// Whether a line can be the first half of a wrap: long, and not ending a sentence.
fn can_be_cut(original: &str, text: &str) -> bool {
    if original.len() < MIN_WRAP_CHARS {
        return false;
    }
    let Some(last) = text.chars().next_back() else {
        return false;
    };
    !matches!(last, '.' | '!' | '?') && at_least_chars(original, MIN_WRAP_CHARS)
}

/// Whether `s` has at least `n` characters, without counting a long line's all (a character
/// is at most four bytes; counting them all was 2 % of a watch reading a big log: issue 28).
fn at_least_chars(s: &str, n: usize) -> bool {
    s.len() >= 4 * n || s.chars().count() >= n
}

/// Whether `next` continues the held line (`original`, normalised `text`, printed by `rank`).
fn continues(original: &str, text: &str, next: &NormalLine<'_>, rank: Option<u32>) -> bool {
    let Some(first) = next.text.chars().next() else {
        return false;
    };
    // A traceback's frame or source line is indented by two or more; a wrap at a terminal's
    // width can begin with the one space that fell after the cut.
    let indented = first == '\t' || next.text.starts_with("  ");
    if next.record || next.rank != rank || indented {
        return false;
    }
    let at_width = {
        let bytes = original.len();
        // A line of more than four bytes a column is wider than any terminal width: its
        // characters need no count.
        let chars = || original.chars().count();
        (bytes <= 4 * WIDEST && TERMINAL_WIDTHS.contains(&chars()))
            || (bytes >= 1024 && bytes.is_power_of_two())
    };
    let mid_word = text
        .chars()
        .next_back()
        .is_some_and(|c| c.is_alphanumeric())
        && (first.is_lowercase() || first.is_ascii_digit());
    at_width || mid_word
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{ClassifierSpec, builtin_catalog};
    use crate::normalize::normalize;
    use crate::verdict::Signature;

    fn classifier() -> Classifier {
        Classifier::new(&ClassifierSpec {
            signatures: builtin_catalog().signatures,
            ..ClassifierSpec::default()
        })
        .unwrap()
    }

    /// Feeds two lines; the signatures only their join shows, with the line they are on.
    fn pair(a: &str, b: &str) -> Option<(Vec<Option<Signature>>, u64)> {
        let c = classifier();
        let mut w = Wraps::default();
        let na = normalize(a);
        w.hold(7, a, &na, &c.classify(&na.text), false);
        let nb = normalize(b);
        let j = w.join(&c, &nb, &c.classify(&nb.text), false)?;
        assert_eq!(j.line.text, a);
        Some((j.hits.iter().map(|h| h.signature).collect(), j.line.number))
    }

    #[test]
    fn a_wrapped_failure_is_matched_whole_on_its_first_line() {
        // vLLM's KV cache check (vllm/v1/core/kv_cache_utils.py), cut inside a word.
        let got = pair(
            "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cach",
            "e memory (9.43 GiB). Try increasing `gpu_memory_utilization`.",
        );
        assert_eq!(got, Some((vec![Some(Signature::CudaOom)], 7)));
        // Cut inside a word behind a compose prefix, and a line cut exactly at a terminal's
        // width (160 columns; compose pads the service names to one width) that begins with a
        // capital.
        let msg = "(EngineCore_0 pid=12) ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.43 GiB).";
        let cut = msg.find("cache memory").unwrap() + 2;
        let first = format!("vllm-1  | {}", &msg[..cut]);
        let got = pair(&first, &msg[cut..]);
        assert_eq!(got.map(|g| g.0), Some(vec![Some(Signature::CudaOom)]));
        let cut = msg.find("KV cache is").unwrap();
        let pad = 160 - cut - "vllm-1| ".len();
        let first = format!("vllm-1{}| {}", " ".repeat(pad), &msg[..cut]);
        let got = pair(&first, &msg[cut..]);
        assert_eq!(
            got, None,
            "the second half shows it alone: it is that line's evidence"
        );
    }

    /// A line cut at a terminal's width is counted in characters, not bytes; a line of fewer
    /// than `MIN_WRAP_CHARS` characters is never held, however many bytes it has.
    #[test]
    fn widths_and_lengths_are_counted_in_characters() {
        let second = "KV cache memory (9.43 GiB).";
        // Ends in a space and the next half begins with a capital: only the width says wrap.
        let body = "Modèle: KV cache is needed, which is larger than the available ";
        for width in [120, 160] {
            let pad = width - "vllm-1| ".len() - body.chars().count();
            let first = format!("vllm-1{}| {body}", " ".repeat(pad));
            assert_eq!(first.chars().count(), width);
            assert_eq!(first.len(), width + 1, "one character of two bytes");
            let got = pair(&first, second).map(|g| g.0);
            assert_eq!(got, Some(vec![Some(Signature::CudaOom)]), "{width}");
            // One column less is no terminal's width.
            let narrower = first.replacen(' ', "", 1);
            assert_eq!(pair(&narrower, second), None, "{width} - 1");
        }
        // Cut inside a word: joined when the first half has 60 characters, not when it has 52
        // (in 67 bytes).
        let cut = |n: usize| format!("{} is larger than the available KV cach", "é".repeat(n));
        assert_eq!(cut(15).chars().count(), 52);
        assert_eq!(cut(15).len(), 67);
        assert_eq!(pair(&cut(15), "e memory (9.43 GiB)"), None);
        assert_eq!(
            pair(&cut(23), "e memory (9.43 GiB)").map(|g| g.0),
            Some(vec![Some(Signature::CudaOom)])
        );
    }

    #[test]
    fn lines_that_are_not_a_wrap_are_not_joined() {
        let long = "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cach";
        let other_rank = format!("[rank0]: {long}");
        for (a, b) in [
            // The next line is a record of its own.
            (
                long,
                "INFO 03-01 10:00:00 [core.py:1] e is needed, which is larger than the available KV cache memory",
            ),
            // The first line ends a sentence.
            (
                "Loading the model weights from the local cache directory, which may take a while.",
                "e is needed, which is larger than the available KV cache memory (9.43 GiB).",
            ),
            // Too short to have been cut.
            (
                "(16.00 GiB KV cach",
                "e is needed, which is larger than the available KV cache memory",
            ),
            // An indented next line (a traceback frame).
            (
                long,
                "  e is needed, which is larger than the available KV cache memory",
            ),
            // Another rank's line.
            (
                &other_rank,
                "[rank1]: e is needed, which is larger than the available KV cache memory",
            ),
        ] {
            assert_eq!(pair(a, b), None, "{a:?} / {b:?}");
        }
        // A failure one half shows alone is that half's, not the join's.
        assert_eq!(
            pair(
                "INFO 03-01 10:00:00 [core.py:1] Loading the model weights from the local cache directory now",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.",
            ),
            None
        );
    }
}
