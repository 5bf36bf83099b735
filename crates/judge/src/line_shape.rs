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
    let mut g = Gather::new(Vec::with_capacity(text.len()));
    shape_bytes(text, &mut g);
    // Every byte kept is of a whole character, or an ASCII letter or punctuation.
    String::from_utf8(g.finish()).unwrap_or_default()
}

/// A hash of the shape of `text`: what the judge keeps per line (a set of seen shapes, the shape of
/// the last context line) instead of the shape itself. The hash of [`line_shape`]'s string given
/// to foldhash (fixed seed) in pieces of [`PIECE`] bytes, then a terminator byte, without building
/// the string: the bytes gather in a buffer on the stack that the hasher takes when full and at
/// the end. The pieces depend on the shape alone, so one shape has one hash. (SipHash, the
/// standard library's, with the set's own SipHash of each hash, was 3.5 % of a watch reading a
/// big log: issue 28. These hashes never leave the process; a writer who made two shapes collide
/// would only have a line not counted as news, which its own log could do by repeating itself.)
pub(crate) fn shape_hash(text: &str) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut g = Gather::new(SHAPE_HASHER.build_hasher());
    shape_bytes(text, &mut g);
    let mut hasher = g.finish();
    hasher.write_u8(0xff);
    hasher.finish()
}

/// The seed of [`shape_hash`]: fixed, so that a shape hashes the same in every judge and run.
const SHAPE_SEED: u64 = 0x5ea5_0f11_9e5d_0b0e;

static SHAPE_HASHER: foldhash::fast::FixedState = foldhash::fast::FixedState::with_seed(SHAPE_SEED);

/// What a byte is, for the scan: one table load where the `is_ascii_*` tests were a branch each
/// (issue 28: the shape of every line was a quarter of a watch's time reading a big log).
const WORD: u8 = 1;
const HEX: u8 = 2;
const DIGIT: u8 = 4;
/// ASCII whitespace as `char::is_whitespace` has it (also the vertical tab, which `u8`'s
/// `is_ascii_whitespace` leaves out).
const GAP: u8 = 8;
/// Not ASCII: the start or the rest of a longer character.
const WIDE: u8 = 16;

static CLASS: [u8; 256] = classes();

const fn classes() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = if b.is_ascii_digit() {
            WORD | HEX | DIGIT
        } else if b.is_ascii_hexdigit() {
            WORD | HEX
        } else if b.is_ascii_alphanumeric() {
            WORD
        } else if matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
            GAP
        } else if !b.is_ascii() {
            WIDE
        } else {
            0
        };
        c += 1;
    }
    t
}

#[inline(always)]
fn class(b: u8) -> u8 {
    CLASS[b as usize]
}

/// Where a shape's pieces go: a hasher, or the shape's string.
trait Pieces {
    fn take(&mut self, piece: &[u8]);
}

impl Pieces for Vec<u8> {
    fn take(&mut self, piece: &[u8]) {
        self.extend_from_slice(piece);
    }
}

impl Pieces for foldhash::fast::FoldHasher<'_> {
    fn take(&mut self, piece: &[u8]) {
        std::hash::Hasher::write(self, piece);
    }
}

/// The size of [`Gather`]'s buffer: its output takes the shape in pieces of this size, the last
/// one shorter.
const PIECE: usize = 256;

/// The bytes of a shape gathered on the stack, given to `out` a whole piece at a time.
struct Gather<P: Pieces> {
    buf: [u8; PIECE],
    /// Bytes in `buf`: below [`PIECE`] between calls.
    len: usize,
    out: P,
}

impl<P: Pieces> Gather<P> {
    fn new(out: P) -> Self {
        Gather {
            buf: [0; PIECE],
            len: 0,
            out,
        }
    }

    /// The output, given the last piece.
    fn finish(mut self) -> P {
        if self.len > 0 {
            self.out.take(&self.buf[..self.len]);
        }
        self.out
    }

    fn settle(&mut self) {
        if self.len == PIECE {
            self.out.take(&self.buf);
            self.len = 0;
        }
    }

    fn byte(&mut self, b: u8) {
        self.buf[self.len] = b;
        self.len += 1;
        self.settle();
    }

    fn bytes(&mut self, b: &[u8]) {
        b.iter().for_each(|&b| self.byte(b));
    }

    /// Reads the token at the start of `b` and keeps it unless it is an id: its bytes but its
    /// digits. Returns its length.
    ///
    /// A token is a run of ASCII letters and digits, continued over a `-` between groups of hex
    /// digits, so that a uuid is one token. An id is a run of hex digits with a digit, at least
    /// [`MIN_HEX_ID`] of them not counting the `-`; or a `0x` number.
    ///
    /// One pass: the bytes are copied while the token is read (a digit's place taken by the
    /// next byte, no branch a byte), and the copy is dropped if the token is an id. A token that
    /// does not fit in what is left of the buffer is kept again byte by byte, so that every piece
    /// but the last is whole.
    fn token(&mut self, b: &[u8]) -> usize {
        let mut copy = Kept {
            len: self.len,
            fits: true,
        };
        let (mut end, all, any) = copy.run(&mut self.buf, b);
        let hex = all & HEX != 0;
        let mut digit = any & DIGIT != 0;
        let mut count = end;
        // Continued only while everything so far is hex groups.
        while hex && b.get(end) == Some(&b'-') {
            let mut group = copy;
            group.keep(&mut self.buf, b'-');
            let (n, group_all, group_any) = group.run(&mut self.buf, &b[end + 1..]);
            if n == 0 || group_all & HEX == 0 {
                break;
            }
            copy = group;
            count += n;
            digit |= group_any & DIGIT != 0;
            end += 1 + n;
        }
        let id = if end >= 2 && b[0] == b'0' && matches!(b[1], b'x' | b'X') {
            // `0x` then hex digits only (never continued: `x` is no hex digit).
            end > 2 && b[2..end].iter().all(|&c| class(c) & HEX != 0)
        } else {
            hex && digit && count >= MIN_HEX_ID
        };
        if !id && copy.fits {
            self.len = copy.len;
            self.settle();
        } else if !id {
            for &c in &b[..end] {
                if class(c) & DIGIT == 0 {
                    self.byte(c);
                }
            }
        }
        end
    }
}

/// A token's bytes copied into the buffer as it is read: where the next kept byte goes, and
/// whether every kept byte so far found room.
#[derive(Clone, Copy)]
struct Kept {
    len: usize,
    fits: bool,
}

impl Kept {
    #[inline(always)]
    fn keep(&mut self, buf: &mut [u8; PIECE], c: u8) {
        match buf.get_mut(self.len) {
            Some(slot) => {
                *slot = c;
                self.len += usize::from(class(c) & DIGIT == 0);
            }
            None => self.fits = false,
        }
    }

    /// Copies the run of ASCII letters and digits at the start of `b`: its length, and the
    /// classes all of its bytes have and any of them has.
    #[inline(always)]
    fn run(&mut self, buf: &mut [u8; PIECE], b: &[u8]) -> (usize, u8, u8) {
        let (mut end, mut all, mut any) = (0, WORD | HEX | DIGIT, 0);
        while let Some(&c) = b.get(end) {
            let k = class(c);
            if k & WORD == 0 {
                break;
            }
            all &= k;
            any |= k;
            self.keep(buf, c);
            end += 1;
        }
        (end, all, any)
    }
}

/// Gives `g` the bytes of `text`'s shape, in order: a word token's non-digit bytes, and each
/// kept character (see the module doc). No allocation.
fn shape_bytes<P: Pieces>(text: &str, g: &mut Gather<P>) {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let k = class(c);
        if k & WORD != 0 {
            i += g.token(&b[i..]);
        } else if k & WIDE == 0 {
            if k & GAP == 0 {
                g.byte(c);
            }
            i += 1;
        } else {
            // `i` is at a character boundary: every step above is a whole ASCII byte or character.
            let ch = text[i..].chars().next().unwrap_or_default();
            let n = ch.len_utf8();
            if !ch.is_whitespace() {
                g.bytes(&b[i..i + n]);
            }
            i += n;
        }
    }
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

    /// A shape's string hashed as [`shape_hash`] says it is.
    fn hash_of(shape: &str) -> u64 {
        use std::hash::{BuildHasher, Hasher};
        let mut h = SHAPE_HASHER.build_hasher();
        for piece in shape.as_bytes().chunks(PIECE) {
            h.write(piece);
        }
        h.write_u8(0xff);
        h.finish()
    }

    #[test]
    fn the_hash_is_the_hash_of_the_shape() {
        for text in [
            "req 3fa9c1e2 waiting",
            "2025-01-01 12:00:01 tick 41 fp16 a100",
            "uuid 123e4567-e89b-12d3-a456-426614174000. 0xdeadbeef",
            "épоch 1/10 ✓ Capturing batches (bs=160 avail_mem=68.50 GB):  45%|████▌",
            "",
            "   ",
        ] {
            assert_eq!(shape_hash(text), hash_of(&line_shape(text)), "{text:?}");
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
            let want = reference_shape(&text);
            proptest::prop_assert_eq!(line_shape(&text), want.clone());
            proptest::prop_assert_eq!(shape_hash(&text), hash_of(&want));
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
