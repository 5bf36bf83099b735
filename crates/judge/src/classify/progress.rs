//! The progress fraction a line prints (`45%`, `12/36`), and the one pass over a line's bytes
//! that tells which lines need the progress regexes at all.

use super::Classifier;

impl Classifier {
    /// A progress fraction: `percent` needs a `%`, `counter` a digit, `/`, digit; on an ASCII line
    /// a byte scan rules both out before any regex runs (a date or a path has `/` but seldom
    /// digit/digit with the separators the counter wants; those still go to the regex).
    pub(super) fn progress(&self, text: &str) -> Option<f64> {
        self.progress_of(text, Shape::of(text.as_bytes()))
    }

    /// [`Classifier::progress`] of a line whose [`Shape`] is known.
    pub(super) fn progress_of(&self, text: &str, shape: Shape) -> Option<f64> {
        let b = text.as_bytes();
        if !shape.ascii {
            return self.progress_reference(text);
        }
        let percent = shape.percent;
        let counter = shape.slash && has_digit_slash_digit(b);
        if !percent && !counter {
            return None;
        }
        if percent {
            // `percent` is `(number)%`: its group is the match without the `%`, so a search
            // for the match alone (cheaper than resolving the group) gives the same number.
            if let Some(m) = self.percent.find(text) {
                let v: f64 = m.as_str()[..m.len() - 1].parse().ok()?;
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

    pub(super) fn progress_reference(&self, text: &str) -> Option<f64> {
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

    /// The first `n/total` counter that is not a count of attempts: huggingface_hub's "Retrying
    /// in 1s [Retry 3/5]." is no progress (a server retrying its download is not 60 % through).
    fn counter_fraction(&self, text: &str) -> Option<f64> {
        let c = self.counter.captures_iter(text).find(|c| {
            c.get(0)
                .is_some_and(|m| !counts_attempts(&text[..m.start()]))
        })?;
        let n: f64 = c[1].parse().ok()?;
        let total: f64 = c[2].parse().ok()?;
        (total > 0.0 && n <= total).then(|| n / total)
    }
}

/// What one pass over a line's bytes says: whether it is ASCII, and holds a `%` or a `/` (the
/// progress regexes need one). A branch-free fold the compiler vectorises: one pass where
/// `is_ascii` and two `memchr` scans were three.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shape {
    pub(super) ascii: bool,
    percent: bool,
    slash: bool,
}

impl Shape {
    pub(super) fn of(bytes: &[u8]) -> Shape {
        let (high, percent, slash) = bytes.iter().fold((0u8, 0u8, 0u8), |(h, p, s), &c| {
            (h | c, p | u8::from(c == b'%'), s | u8::from(c == b'/'))
        });
        Shape {
            ascii: high < 0x80,
            percent: percent != 0,
            slash: slash != 0,
        }
    }
}

/// Whether the word just before a counter (`before` ends there) says it counts attempts:
/// `Retry 3/5`, `attempt 2/10`, `try 1/3`, `retries 4/5`.
fn counts_attempts(before: &str) -> bool {
    let word = before
        .trim_end_matches([' ', '[', '(', '#', ':'])
        .rsplit(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    matches!(
        word.as_str(),
        "retry" | "retries" | "retrying" | "attempt" | "attempts" | "try" | "tries"
    )
}

/// Whether `hay` has an ASCII digit, `/`, an ASCII digit (what `counter` needs on ASCII text).
/// A vectorised scan for each `/` (most lines hold none or a few).
fn has_digit_slash_digit(hay: &[u8]) -> bool {
    memchr::memchr_iter(b'/', hay).any(|at| {
        at >= 1
            && at + 1 < hay.len()
            && hay[at - 1].is_ascii_digit()
            && hay[at + 1].is_ascii_digit()
    })
}
