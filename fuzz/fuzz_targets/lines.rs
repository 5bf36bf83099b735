//! The line splitter: any chunking of the same bytes gives the same lines, the lines are the ones
//! a plain reference split gives, caps are respected, and nothing panics.
//!
//! Input: byte 0 picks the cap (1..=64), byte 1 the number of cut points, then that many bytes of
//! cut positions, then the data.
#![no_main]

use firedup::lines::{LineSplitter, RawLine, clean_text};
use libfuzzer_sys::fuzz_target;

fn split(chunks: &[&[u8]], cap: usize) -> Vec<RawLine> {
    let mut s = LineSplitter::new(cap);
    let mut out = Vec::new();
    for c in chunks {
        s.push(c, &mut |l| out.push(l));
    }
    s.finish(&mut |l| out.push(l));
    out
}

/// What the contract says, written the obvious way: `\n` separates numbered lines, `\r` splits a
/// line into segments, empty segments are dropped, each segment keeps its first `cap` bytes.
fn reference(data: &[u8], cap: usize) -> Vec<RawLine> {
    let mut out = Vec::new();
    for (i, line) in data.split(|&b| b == b'\n').enumerate() {
        for seg in line.split(|&b| b == b'\r') {
            if seg.is_empty() {
                continue;
            }
            let kept = seg.len().min(cap);
            out.push(RawLine {
                number: i as u64 + 1,
                bytes: seg[..kept].to_vec(),
                dropped: (seg.len() - kept) as u64,
            });
        }
    }
    out
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 2 {
        return;
    }
    let cap = (input[0] % 64) as usize + 1;
    let ncuts = (input[1] % 16) as usize;
    if input.len() < 2 + ncuts {
        return;
    }
    let data = &input[2 + ncuts..];
    let mut cuts: Vec<usize> = input[2..2 + ncuts]
        .iter()
        .map(|&c| (c as usize * data.len()) / 255)
        .collect();
    cuts.sort_unstable();
    let mut chunks: Vec<&[u8]> = Vec::new();
    let mut last = 0;
    for c in cuts {
        chunks.push(&data[last..c]);
        last = c;
    }
    chunks.push(&data[last..]);

    let whole = split(&[data], cap);
    assert_eq!(whole, split(&chunks, cap), "chunking changed the lines");
    // One byte at a time is the most extreme chunking.
    let bytes: Vec<&[u8]> = data.chunks(1).collect();
    assert_eq!(
        whole,
        split(&bytes, cap),
        "byte-at-a-time changed the lines"
    );
    assert_eq!(
        whole,
        reference(data, cap),
        "differs from the reference split"
    );
    for l in &whole {
        assert!(l.bytes.len() <= cap, "cap exceeded");
        assert!(!l.bytes.contains(&b'\n') && !l.bytes.contains(&b'\r'));
        assert!(!l.bytes.is_empty() || l.dropped > 0);
        let text = clean_text(&l.bytes);
        assert!(
            text.chars().all(|c| c == '\t' || !c.is_control()),
            "control character left in {text:?}"
        );
    }
    // Numbers never go down.
    assert!(whole.windows(2).all(|w| w[0].number <= w[1].number));
});
