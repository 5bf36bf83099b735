//! The byte readers the prefixes are recognised with, and the [`Token`] a recogniser answers:
//! each reader takes the bytes of a line and an offset, and returns the offset after what it read,
//! or None. No regex, no allocation.

/// What one token at the head of a line is.
pub(super) enum Token {
    /// A prefix to take off: the message continues at `end`.
    Strip {
        end: usize,
        rank: Option<u32>,
        record: bool,
        /// Where the text ends, when a suffix is dress too (TGI's `rank=N`).
        until: Option<usize>,
    },
    /// A record header whose level is not an error: the text is kept from this token on, as it
    /// was (see the module doc), up to `end`; `rank` is a rank its fields name (TGI's shards).
    KeepLevel { rank: Option<u32>, end: usize },
}

pub(super) fn lit(b: &[u8], i: usize, s: &str) -> Option<usize> {
    b.get(i..i + s.len())
        .filter(|x| *x == s.as_bytes())
        .map(|_| i + s.len())
}

/// Between `min` and `max` ASCII digits at `i`: their value and the end.
pub(super) fn digits(b: &[u8], i: usize, min: usize, max: usize) -> Option<(u32, usize)> {
    let n = b
        .get(i..)?
        .iter()
        .take(max + 1)
        .take_while(|c| c.is_ascii_digit())
        .count();
    if n < min || n > max {
        return None;
    }
    let v = b[i..i + n].iter().fold(0u32, |v, c| {
        v.saturating_mul(10).saturating_add(u32::from(c - b'0'))
    });
    Some((v, i + n))
}

pub(super) fn byte(b: &[u8], i: usize, c: u8) -> Option<usize> {
    (b.get(i) == Some(&c)).then_some(i + 1)
}

/// One optional space.
pub(super) fn space(b: &[u8], i: usize) -> usize {
    byte(b, i, b' ').unwrap_or(i)
}

pub(super) fn spaces(b: &[u8], i: usize) -> usize {
    i + b
        .get(i..)
        .map_or(0, |r| r.iter().take_while(|c| **c == b' ').count())
}

/// `HH:MM:SS` and an optional fraction (`.123456`, `,123`).
pub(super) fn clock(b: &[u8], i: usize) -> Option<usize> {
    let j = digits(b, i, 2, 2)?.1;
    let j = digits(b, byte(b, j, b':')?, 2, 2)?.1;
    let j = digits(b, byte(b, j, b':')?, 2, 2)?.1;
    Some(match b.get(j) {
        Some(b'.' | b',') => digits(b, j + 1, 1, 9).map_or(j, |d| d.1),
        _ => j,
    })
}

/// `YYYY-MM-DD`, then `T` or a space, then the clock.
pub(super) fn date_time(b: &[u8], i: usize) -> Option<usize> {
    let j = digits(b, i, 4, 4)?.1;
    let j = digits(b, byte(b, j, b'-').or_else(|| byte(b, j, b'/'))?, 2, 2)?.1;
    let j = digits(b, byte(b, j, b'-').or_else(|| byte(b, j, b'/'))?, 2, 2)?.1;
    let j = match b.get(j) {
        Some(b'T' | b' ') => j + 1,
        _ => return None,
    };
    clock(b, j)
}

/// The level word at `i`: (is an error level, end). Only the words its first byte begins are
/// tried, longest first (`WARNING` before `WARN`).
pub(super) fn level_word(b: &[u8], i: usize) -> Option<(bool, usize)> {
    let words: &[(&str, bool)] = match b.get(i)? {
        b'C' => &[("CRITICAL", true)],
        b'E' => &[("ERROR", true)],
        b'F' => &[("FATAL", true)],
        b'W' => &[("WARNING", false), ("WARN", false)],
        b'I' => &[("INFO", false)],
        b'D' => &[("DEBUG", false)],
        b'T' => &[("TRACE", false)],
        b'N' => &[("NOTICE", false)],
        _ => return None,
    };
    words.iter().find_map(|(w, error)| {
        let end = lit(b, i, w)?;
        let next = b.get(end).copied();
        (next.is_none() || !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_'))
            .then_some((*error, end))
    })
}

pub(super) fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')
}

pub(super) fn strip(end: usize, rank: Option<u32>, record: bool) -> Option<Token> {
    Some(Token::Strip {
        end,
        rank,
        record,
        until: None,
    })
}

// ---- the prefixes ----
