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
    let mut shape = Vec::with_capacity(text.len());
    shape_bytes(text, &mut shape);
    // Every byte kept is of a whole character, or an ASCII letter or punctuation.
    String::from_utf8(shape).unwrap_or_default()
}

/// Where a shape's bytes go.
trait ShapeSink {
    fn byte(&mut self, b: u8);
    fn bytes(&mut self, b: &[u8]);
}

impl ShapeSink for Vec<u8> {
    fn byte(&mut self, b: u8) {
        self.push(b);
    }
    fn bytes(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
}

/// The bytes of a shape gathered on the stack, the hasher fed when the buffer is full.
struct Gather {
    buf: [u8; 256],
    len: usize,
    hasher: std::collections::hash_map::DefaultHasher,
}

impl Gather {
    fn flush(&mut self) {
        use std::hash::Hasher;
        self.hasher.write(&self.buf[..self.len]);
        self.len = 0;
    }
}

impl ShapeSink for Gather {
    #[inline]
    fn byte(&mut self, b: u8) {
        if self.len == self.buf.len() {
            self.flush();
        }
        self.buf[self.len] = b;
        self.len += 1;
    }
    fn bytes(&mut self, b: &[u8]) {
        b.iter().for_each(|&b| self.byte(b));
    }
}

/// A hash of the shape of `text`: what the judge keeps per line (a set of seen shapes, the shape of
/// the last context line) instead of the shape itself. The same value as hashing
/// [`line_shape`]'s string, without building it: the bytes gather in a buffer on the stack that
/// the hasher takes when full and at the end (SipHash's `write` gives one answer however the
/// bytes are split; one `write` a piece cost more than finding the pieces: issue 28, `perf` of a
/// watch following 512 MB), then `str`'s terminator.
pub(crate) fn shape_hash(text: &str) -> u64 {
    use std::hash::Hasher;
    let mut g = Gather {
        buf: [0; 256],
        len: 0,
        hasher: std::collections::hash_map::DefaultHasher::new(),
    };
    shape_bytes(text, &mut g);
    g.flush();
    g.hasher.write_u8(0xff);
    g.hasher.finish()
}

/// Gives `sink` the bytes of `text`'s shape, in order: a word token's non-digit bytes, and each
/// kept character (see the module doc). No allocation; one pass over a token to read it, one to
/// keep it.
fn shape_bytes(text: &str, sink: &mut impl ShapeSink) {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphanumeric() {
            let (len, id) = token(&b[i..]);
            if !id {
                for &c in &b[i..i + len] {
                    if !c.is_ascii_digit() {
                        sink.byte(c);
                    }
                }
            }
            i += len;
        } else if c.is_ascii() {
            // `char::is_whitespace` on ASCII: also the vertical tab, which `u8`'s test leaves out.
            if !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
                sink.byte(c);
            }
            i += 1;
        } else {
            // `i` is at a character boundary: every step above is a whole ASCII byte or character.
            let ch = text[i..].chars().next().unwrap_or_default();
            let n = ch.len_utf8();
            if !ch.is_whitespace() {
                sink.bytes(&b[i..i + n]);
            }
            i += n;
        }
    }
}

/// The token at the start of `b` (a run of ASCII letters and digits, continued over a `-` between
/// groups of hex digits, so that a uuid is one token): its length, and whether it is an id (a run
/// of hex digits with a digit, at least [`MIN_HEX_ID`] of them not counting the `-`; or a `0x`
/// number).
fn token(b: &[u8]) -> (usize, bool) {
    let (mut end, mut hex, mut digit) = (0, true, false);
    while end < b.len() && b[end].is_ascii_alphanumeric() {
        hex &= b[end].is_ascii_hexdigit();
        digit |= b[end].is_ascii_digit();
        end += 1;
    }
    let mut count = end;
    // Continued only while everything so far is hex groups.
    while hex && end < b.len() && b[end] == b'-' {
        let mut next = end + 1;
        let (mut group_hex, mut group_digit) = (true, false);
        while next < b.len() && b[next].is_ascii_alphanumeric() {
            group_hex &= b[next].is_ascii_hexdigit();
            group_digit |= b[next].is_ascii_digit();
            next += 1;
        }
        if next == end + 1 || !group_hex {
            break;
        }
        count += next - end - 1;
        digit |= group_digit;
        end = next;
    }
    let token = &b[..end];
    if let Some(rest) = token
        .strip_prefix(b"0x")
        .or_else(|| token.strip_prefix(b"0X"))
    {
        // `0x` then hex digits only (a `-` is not one: a `0x` token is never continued).
        return (
            end,
            !rest.is_empty() && rest.iter().all(|c| c.is_ascii_hexdigit()),
        );
    }
    (end, hex && digit && count >= MIN_HEX_ID)
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
    fn the_hash_is_the_hash_of_the_shape() {
        use std::hash::{Hash, Hasher};
        for text in [
            "req 3fa9c1e2 waiting",
            "2025-01-01 12:00:01 tick 41 fp16 a100",
            "uuid 123e4567-e89b-12d3-a456-426614174000. 0xdeadbeef",
            "épоch 1/10 ✓ Capturing batches (bs=160 avail_mem=68.50 GB):  45%|████▌",
            "",
            "   ",
        ] {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            line_shape(text).hash(&mut h);
            assert_eq!(shape_hash(text), h.finish(), "{text:?}");
        }
    }

    /// The first reading of a shape (before issue 28's one-pass scan), kept to check the scan.
    fn reference_shape(text: &str) -> String {
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
        fn is_id(token: &[u8]) -> bool {
            if let Some(hex) = token
                .strip_prefix(b"0x")
                .or_else(|| token.strip_prefix(b"0X"))
            {
                return !hex.is_empty() && hex.iter().all(|c| c.is_ascii_hexdigit());
            }
            let hex = || token.iter().filter(|c| **c != b'-');
            hex().count() >= MIN_HEX_ID
                && hex().all(|c| c.is_ascii_hexdigit())
                && hex().any(|c| c.is_ascii_digit())
        }
        let mut shape = String::new();
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            if c.is_ascii_alphanumeric() {
                let len = token_len(rest.as_bytes());
                let token = &rest[..len];
                if !is_id(token.as_bytes()) {
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

    proptest::proptest! {
        #[test]
        fn the_one_pass_scan_reads_as_the_first_reading_did(
            text in "[0-9a-fA-FxXgz\\- \t\u{b}\u{c}\r.:=/é✓\u{85}\u{a0}\u{3000}]{0,80}",
            long in 0usize..3,
        ) {
            // Past the gathering buffer's 256 bytes too.
            let text = text.repeat(1 + long * 4);
            use std::hash::{Hash, Hasher};
            let want = reference_shape(&text);
            proptest::prop_assert_eq!(line_shape(&text), want.clone());
            let mut h = std::collections::hash_map::DefaultHasher::new();
            want.hash(&mut h);
            proptest::prop_assert_eq!(shape_hash(&text), h.finish());
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
