//! Splitting a byte stream into log lines, whatever the chunking.
//!
//! Contract: `\n`, `\r\n` and a lone `\r` (progress bars redraw with it) each end a line; empty
//! segments are dropped; a line longer than the cap keeps its first `cap` bytes and is marked
//! truncated, without holding the rest in memory; line numbers count `\n` only, so they are the
//! numbers an editor or `sed -n Np` shows. Feeding the same bytes in any chunks yields the same lines.
//!
//! Cost: the split is one vectorised scan for `\n` and `\r`, and a line that lies whole in the
//! bytes fed is handed over borrowed from them ([`LineSplitter::push_lines`]): only a line cut
//! by a chunk boundary is copied, into one buffer the splitter reuses. [`clean_text`] borrows
//! the line when there is nothing to replace or remove (most lines).

use std::borrow::Cow;

/// One line as it was in the log, before decoding, borrowed from the bytes fed to the splitter
/// (or from its buffer, for a line cut by a chunk boundary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRef<'a> {
    /// 1-based number of the `\n`-terminated line this segment belongs to.
    pub number: u64,
    /// The line's bytes, without its terminator, up to the cap.
    pub bytes: &'a [u8],
    /// Bytes dropped past the cap.
    pub dropped: u64,
}

impl LineRef<'_> {
    /// The line, owned.
    pub fn to_raw(&self) -> RawLine {
        RawLine {
            number: self.number,
            bytes: self.bytes.to_vec(),
            dropped: self.dropped,
        }
    }
}

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
        self.push_lines(bytes, &mut |l| emit(l.to_raw()));
    }

    /// Feeds bytes; calls `emit` for every line they complete, borrowed: the same lines as
    /// [`LineSplitter::push`], without a copy of each.
    pub fn push_lines(&mut self, bytes: &[u8], emit: &mut dyn FnMut(LineRef<'_>)) {
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
            match memchr::memchr2(b'\n', b'\r', rest) {
                Some(i) => {
                    if self.has_partial() {
                        self.append(&rest[..i]);
                        self.end_segment(emit);
                    } else {
                        self.emit_whole(&rest[..i], emit);
                    }
                    if rest[i] == b'\r' {
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
        self.finish_lines(&mut |l| emit(l.to_raw()));
    }

    /// [`LineSplitter::finish`], the line borrowed.
    pub fn finish_lines(&mut self, emit: &mut dyn FnMut(LineRef<'_>)) {
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

    /// A segment that lies whole in the bytes fed (nothing held): handed over borrowed from them.
    fn emit_whole(&self, segment: &[u8], emit: &mut dyn FnMut(LineRef<'_>)) {
        if segment.is_empty() {
            return;
        }
        let kept = segment.len().min(self.cap);
        emit(LineRef {
            number: self.number,
            bytes: &segment[..kept],
            dropped: (segment.len() - kept) as u64,
        });
    }

    /// Emits the held segment and empties the buffer, keeping its memory (at most the cap) for
    /// the next line cut by a chunk boundary.
    fn end_segment(&mut self, emit: &mut dyn FnMut(LineRef<'_>)) {
        if !self.has_partial() {
            return;
        }
        emit(LineRef {
            number: self.number,
            bytes: &self.buf,
            dropped: self.dropped,
        });
        self.buf.clear();
        self.dropped = 0;
    }
}

/// Decodes a raw line for matching and display: invalid UTF-8 replaced, ANSI escape sequences and
/// other control characters (NUL, backspace, bell) removed, tabs kept. Borrowed when there is
/// nothing to replace or remove.
pub fn clean_text(bytes: &[u8]) -> Cow<'_, str> {
    let (control, ascii) = shape(bytes);
    if !control {
        if ascii {
            // SAFETY: every byte is below 0x80 (`shape` read them all): ASCII is valid UTF-8.
            // Most lines; the one pass over them is `shape`'s (issue 28).
            return Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(bytes) });
        }
        // Valid UTF-8 without a control character: the text is the bytes.
        if let Ok(text) = std::str::from_utf8(bytes) {
            return Cow::Borrowed(text);
        }
    }
    Cow::Owned(cleaned(bytes))
}

/// Whether `bytes` hold a control character other than a tab (a C0 byte, DEL, or `0xC2`, the
/// first byte of a C1 control's UTF-8 encoding and of a few printable characters, which are then
/// cleaned the long way, unchanged), and whether they are all ASCII. No early exit: a line that
/// needs cleaning is rare, one that does not is read to its end anyway, and the loop without a
/// branch is cheaper (the compiler vectorises it).
fn shape(bytes: &[u8]) -> (bool, bool) {
    let (control, high) = bytes.iter().fold((false, 0u8), |(any, high), &b| {
        (
            any | ((b < 0x20) & (b != b'\t')) | (b == 0x7f) | (b == 0xc2),
            high | b,
        )
    });
    (control, high < 0x80)
}

/// [`clean_text`] the long way: decoded, escape sequences and control characters taken out.
fn cleaned(bytes: &[u8]) -> String {
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

    #[test]
    fn a_clean_line_is_borrowed() {
        for line in [
            "plain ascii",
            "tab\tkept",
            "caf\u{e9} \u{2713} \u{65e5}\u{672c}",
            "",
        ] {
            assert!(
                matches!(clean_text(line.as_bytes()), Cow::Borrowed(_)),
                "{line:?}"
            );
        }
    }

    #[test]
    fn a_line_cut_by_a_chunk_boundary_is_the_same_line() {
        let mut s = LineSplitter::new(1024);
        let mut out = Vec::new();
        s.push_lines(b"whole\npar", &mut |l| out.push(l.to_raw()));
        s.push_lines(b"tial\r\nnext", &mut |l| out.push(l.to_raw()));
        s.finish_lines(&mut |l| out.push(l.to_raw()));
        let want = [(1, "whole"), (2, "partial"), (3, "next")];
        let want: Vec<(u64, String)> = want.iter().map(|(n, t)| (*n, t.to_string())).collect();
        assert_eq!(texts(&out), want);
    }

    proptest! {
        #[test]
        fn borrowing_a_clean_line_cleans_as_the_long_way(
            data in proptest::collection::vec(prop_oneof![
                any::<u8>(), Just(b'a'), Just(b'\t'), Just(0x1b), Just(b'['), Just(0xc2), Just(0x85)
            ], 0..48),
            text in any::<String>(),
        ) {
            prop_assert_eq!(clean_text(&data), cleaned(&data));
            prop_assert_eq!(clean_text(text.as_bytes()), cleaned(text.as_bytes()));
        }

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
