//! The shape of a log line: what is left when the parts that change from one repetition of the
//! same message to the next are removed. A heartbeat (`req 3fa9c1e2 waiting`, `12:00:01 tick 41`)
//! keeps its shape; a new kind of message has a new one. The judge counts a line of a new shape
//! as progress (so a hung server repeating its heartbeat is `stalled`), the event stream reports a
//! probe's detail only when its shape changes, and `logs --meaningful` keeps the last redraw of a
//! progress bar.
//!
//! Removed: every digit, whitespace, and whole tokens that are ids rather than words: a run of
//! hex digits with at least one digit and at least [`MIN_HEX_ID`] long (request ids, hashes,
//! commit ids), a uuid (hex groups joined by `-`), a `0x` number. A hex-looking word without a
//! digit (`deadbeef`, `decade`) is a word and stays.

/// Shortest run of hex digits taken for an id (shorter ones, like `fp16` or `a100`, are words).
pub const MIN_HEX_ID: usize = 6;

/// The shape of `text` (see the module doc).
pub fn line_shape(text: &str) -> String {
    let mut shape = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c.is_ascii_alphanumeric() {
            let len = token_len(rest.as_bytes());
            let token = &rest[..len];
            if !is_id(token) {
                shape.extend(token.chars().filter(|c| !c.is_ascii_digit()));
            }
            rest = &rest[len..];
        } else {
            if !c.is_whitespace() {
                shape.push(c);
            }
            rest = &rest[c.len_utf8()..];
        }
    }
    shape
}

/// A hash of the shape of `text`: what the judge keeps per line (a set of seen shapes, the shape of
/// the last context line) instead of the shape itself.
pub(crate) fn shape_hash(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    line_shape(text).hash(&mut h);
    h.finish()
}

/// Length of the token at the start of `b`: a run of ASCII letters and digits, continued over a
/// `-` between groups of hex digits (so a uuid is one token).
fn token_len(b: &[u8]) -> usize {
    let word_end = |from: usize| {
        from + b[from..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric())
            .count()
    };
    let all_hex = |s: &[u8]| s.iter().all(|c| c.is_ascii_hexdigit() || *c == b'-');
    let mut end = word_end(0);
    while end < b.len() && b[end] == b'-' && all_hex(&b[..end]) {
        let next = word_end(end + 1);
        if next == end + 1 || !all_hex(&b[end + 1..next]) {
            break;
        }
        end = next;
    }
    end
}

/// Whether a token is an id (hex run with a digit, long enough; or a `0x` number).
fn is_id(token: &str) -> bool {
    if let Some(hex) = token
        .strip_prefix("0x")
        .or_else(|| token.strip_prefix("0X"))
    {
        return !hex.is_empty() && hex.bytes().all(|c| c.is_ascii_hexdigit());
    }
    let hex: Vec<u8> = token.bytes().filter(|c| *c != b'-').collect();
    hex.len() >= MIN_HEX_ID
        && hex.iter().all(|c| c.is_ascii_hexdigit())
        && hex.iter().any(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repetitions_of_one_message_have_one_shape() {
        // (a, b): two lines a person would call the same message.
        let same = [
            ("req 3fa9c1e2 waiting", "req 0b7d44aa waiting"),
            ("req 3FA9C1E2 waiting", "req 77AB01CD waiting"),
            ("HTTP 503 (12 ms)", "HTTP 503 (7 ms)"),
            ("2025-01-01 12:00:01 tick 41", "2025-01-01 12:00:02 tick 42"),
            (
                "request 123e4567-e89b-12d3-a456-426614174000 pending",
                "request 9c5b94b1-35ad-49bb-b118-8e8fc24abf80 pending",
            ),
            (
                "commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
                "commit 356a192b7913b04c54574d18c28d46e6395428ab",
            ),
            ("ptr 0x7f3a9c00 freed", "ptr 0xdeadbeef freed"),
            (
                "trace_id=4bf92f3577b34da6 span",
                "trace_id=00f067aa0ba902b7 span",
            ),
            ("aligned   12", "aligned 3"),
        ];
        for (a, b) in same {
            assert_eq!(line_shape(a), line_shape(b), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn different_messages_keep_different_shapes() {
        let different = [
            ("Loading weights", "Capturing cuda graph"),
            ("working on alpha", "working on beta"),
            // Words, not ids: short, or no digit in them.
            ("dtype fp16", "dtype bf16"),
            ("gpu a100", "gpu h100"),
            ("magic deadbeef", "magic cafebabe"),
            // Hyphenated words stay words.
            ("load-weights done", "load-config done"),
        ];
        for (a, b) in different {
            assert_ne!(line_shape(a), line_shape(b), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn what_is_left() {
        let table = [
            ("req 3fa9c1e2 waiting", "reqwaiting"),
            ("HTTP 503 (12 ms)", "HTTP(ms)"),
            ("id abc12 x", "idabcx"),
            ("uuid 123e4567-e89b-12d3-a456-426614174000.", "uuid."),
            ("épоch 1/10 ✓", "épоch/✓"),
            ("", ""),
        ];
        for (text, shape) in table {
            assert_eq!(line_shape(text), shape, "{text:?}");
        }
    }
}
