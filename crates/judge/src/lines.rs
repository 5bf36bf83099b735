//! Splitting a byte stream into log lines, whatever the chunking.
//!
//! Contract: `\n`, `\r\n` and a lone `\r` (progress bars redraw with it) each end a line; empty
//! segments are dropped; a line longer than the cap keeps its first `cap` bytes and is marked
//! truncated, without holding the rest in memory; line numbers count `\n` only, so they are the
//! numbers an editor or `sed -n Np` shows. Feeding the same bytes in any chunks yields the same lines.

/// One line as it was in the log, before decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawLine {
    /// 1-based number of the `\n`-terminated line this segment belongs to.
    pub number: u64,
    /// The line's bytes, without its terminator, up to the cap.
    pub bytes: Vec<u8>,
    /// Bytes dropped past the cap.
    pub dropped: u64,
}

/// The default cap on one line's kept bytes.
pub const DEFAULT_LINE_CAP: usize = 64 * 1024;

/// Incremental line splitter.
#[derive(Debug)]
pub struct LineSplitter {
    cap: usize,
    buf: Vec<u8>,
    dropped: u64,
    number: u64,
    after_cr: bool,
}

impl Default for LineSplitter {
    fn default() -> Self {
        Self::new(DEFAULT_LINE_CAP)
    }
}

impl LineSplitter {
    /// A splitter that keeps at most `cap` bytes of a line.
    pub fn new(cap: usize) -> Self {
        LineSplitter {
            cap: cap.max(1),
            buf: Vec::new(),
            dropped: 0,
            number: 1,
            after_cr: false,
        }
    }

    /// Feeds bytes; calls `emit` for every line they complete.
    pub fn push(&mut self, bytes: &[u8], emit: &mut dyn FnMut(RawLine)) {
        let mut rest = bytes;
        while !rest.is_empty() {
            if self.after_cr && rest[0] == b'\n' {
                // The `\n` of a `\r\n`: the segment was already emitted at the `\r`.
                self.after_cr = false;
                self.number += 1;
                rest = &rest[1..];
                continue;
            }
            self.after_cr = false;
            match memchr2(b'\n', b'\r', rest) {
                Some(i) => {
                    self.append(&rest[..i]);
                    let is_cr = rest[i] == b'\r';
                    self.end_segment(emit);
                    if is_cr {
                        self.after_cr = true;
                    } else {
                        self.number += 1;
                    }
                    rest = &rest[i + 1..];
                }
                None => {
                    self.append(rest);
                    rest = &[];
                }
            }
        }
    }

    /// Emits a held partial line (the writer exited without a final newline).
    pub fn finish(&mut self, emit: &mut dyn FnMut(RawLine)) {
        self.end_segment(emit);
    }

    /// Whether a partial line is held.
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty() || self.dropped > 0
    }

    /// The number the next line will carry.
    pub fn next_number(&self) -> u64 {
        self.number
    }

    /// Bytes fed since the last line boundary (held or dropped past the cap): the stream offset
    /// minus this is where a new splitter can resume and produce the same lines.
    pub fn held_bytes(&self) -> u64 {
        self.buf.len() as u64 + self.dropped
    }

    /// Continues the numbering of an earlier splitter (resuming at one of its line boundaries).
    pub fn set_next_number(&mut self, number: u64) {
        self.number = number.max(1);
    }

    /// Starts over (the file was truncated or replaced), keeping the line numbering of the new file.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.dropped = 0;
        self.number = 1;
        self.after_cr = false;
    }

    fn append(&mut self, bytes: &[u8]) {
        let room = self.cap.saturating_sub(self.buf.len());
        let take = room.min(bytes.len());
        self.buf.extend_from_slice(&bytes[..take]);
        self.dropped += (bytes.len() - take) as u64;
    }

    fn end_segment(&mut self, emit: &mut dyn FnMut(RawLine)) {
        if self.buf.is_empty() && self.dropped == 0 {
            return;
        }
        let bytes = std::mem::take(&mut self.buf);
        let dropped = std::mem::take(&mut self.dropped);
        emit(RawLine {
            number: self.number,
            bytes,
            dropped,
        });
    }
}

fn memchr2(a: u8, b: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&c| c == a || c == b)
}

/// Decodes a raw line for matching and display: invalid UTF-8 replaced, ANSI escape sequences and
/// other control characters (NUL, backspace, bell) removed, tabs kept.
pub fn clean_text(bytes: &[u8]) -> String {
    if bytes
        .iter()
        .all(|&b| (0x20..0x7f).contains(&b) || b == b'\t')
    {
        // Printable ASCII (most lines): nothing to replace or remove.
        if let Ok(text) = std::str::from_utf8(bytes) {
            return text.to_owned();
        }
    }
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            match chars.peek() {
                Some('[') => {
                    chars.next();
                    // CSI: parameters and intermediates, then one final byte in @..~
                    for n in chars.by_ref() {
                        if ('@'..='~').contains(&n) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    chars.next();
                    // OSC: until BEL or ESC \
                    while let Some(n) = chars.next() {
                        if n == '\u{7}' {
                            break;
                        }
                        if n == '\u{1b}' {
                            if chars.peek() == Some(&'\\') {
                                chars.next();
                            }
                            break;
                        }
                    }
                }
                Some(_) => {
                    chars.next();
                }
                None => {}
            }
        } else if c == '\t' || !c.is_control() {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn split_all(chunks: &[&[u8]], cap: usize) -> Vec<RawLine> {
        let mut s = LineSplitter::new(cap);
        let mut out = Vec::new();
        for c in chunks {
            s.push(c, &mut |l| out.push(l));
        }
        s.finish(&mut |l| out.push(l));
        out
    }

    fn texts(lines: &[RawLine]) -> Vec<(u64, String)> {
        lines
            .iter()
            .map(|l| (l.number, String::from_utf8_lossy(&l.bytes).into_owned()))
            .collect()
    }

    #[test]
    fn splits_the_line_endings_people_write() {
        let table: &[(&[u8], &[(u64, &str)])] = &[
            (b"a\nb\n", &[(1, "a"), (2, "b")]),
            (b"a\r\nb\r\n", &[(1, "a"), (2, "b")]),
            (
                b"10%\r20%\r30%\ndone\n",
                &[(1, "10%"), (1, "20%"), (1, "30%"), (2, "done")],
            ),
            (b"a\n\n\nb", &[(1, "a"), (4, "b")]),
            (b"partial", &[(1, "partial")]),
            (b"\r\r\r", &[]),
        ];
        for (input, want) in table {
            let got = texts(&split_all(&[input], 1024));
            let want: Vec<(u64, String)> = want.iter().map(|(n, t)| (*n, t.to_string())).collect();
            assert_eq!(got, want, "input {:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn caps_long_lines_and_counts_what_it_dropped() {
        let mut long = vec![b'x'; 100];
        long.push(b'\n');
        long.extend_from_slice(b"next\n");
        let lines = split_all(&[&long], 10);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].bytes.len(), 10);
        assert_eq!(lines[0].dropped, 90);
        assert_eq!(lines[1].bytes, b"next");
    }

    #[test]
    fn holds_a_partial_line_until_it_completes() {
        let mut s = LineSplitter::new(1024);
        let mut out = Vec::new();
        s.push(b"hel", &mut |l| out.push(l));
        assert!(out.is_empty());
        assert!(s.has_partial());
        s.push(b"lo\n", &mut |l| out.push(l));
        assert_eq!(texts(&out), vec![(1, "hello".to_string())]);
    }

    #[test]
    fn cleans_ansi_controls_and_bad_utf8() {
        let table: &[(&[u8], &str)] = &[
            (b"\x1b[31mERROR\x1b[0m: boom", "ERROR: boom"),
            (b"\x1b]0;title\x07text", "text"),
            (b"a\x00b\x08c", "abc"),
            (b"caf\xc3\xa9 \xff!", "caf\u{e9} \u{fffd}!"),
            (b"tab\there", "tab\there"),
        ];
        for (input, want) in table {
            assert_eq!(clean_text(input), *want);
        }
    }

    proptest! {
        #[test]
        fn any_chunking_gives_the_same_lines(
            data in proptest::collection::vec(prop_oneof![
                Just(b'\n'), Just(b'\r'), Just(b'a'), Just(b'b'), Just(0xffu8), Just(0u8)
            ], 0..400),
            cuts in proptest::collection::vec(0usize..400, 0..20),
            cap in 1usize..40,
        ) {
            let whole = split_all(&[&data], cap);
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
            points.sort();
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut last = 0;
            for p in points {
                chunks.push(&data[last..p]);
                last = p;
            }
            chunks.push(&data[last..]);
            prop_assert_eq!(whole, split_all(&chunks, cap));
        }
    }
}
