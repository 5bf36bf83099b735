//! Terminal escape sequences that reached the log as text: the ESC byte was written out by a log
//! shipper or a copy (`#033[0;32m` by rsyslog, `^[[0m` by `cat -v` and less, a literal `\x1b[`,
//! `\033[`, `\e[` or `\u001b[` by CloudWatch, journald exports, JSON logs and CI log copies), or
//! dropped, leaving an orphan `[0m` / `[1;31m`. They glue onto the next word (`#033[1;31mERROR`)
//! and defeat anchored patterns, so [`flatten`] takes them out.
//!
//! Contract: an escape written out with an ESC marker is removed whatever it is (any CSI, such as
//! SGR colours, erase-line `[2K`, cursor moves `[1A`, `[?25l`; and OSC, such as a hyperlink
//! `]8;;url` ended by BEL or ST in text form). An orphan (no marker) is removed only when it is an
//! SGR colour (`[` digits and `;` `m`) and the line shows it is colour: it starts the line, or the
//! line holds an orphan reset (`[0m`, `[m`), as a colour always ends in one. So `[5m]` in a
//! message survives. A line without any is returned borrowed, after one vectorised scan for `[`
//! and `]` (most lines hold none or a few, and only those are looked at, each ruled out by the
//! byte before it or the bytes after it).

use std::borrow::Cow;

/// Text forms of the ESC byte, as they precede the `[` of a CSI or the `]` of an OSC. `^[` is
/// caret notation (`cat -v`, less -R off); `#033` is rsyslog's octal escape of control
/// characters; the backslash forms are how C, shells, Python reprs and JSON write it; `␛` is the
/// Unicode control picture some web consoles show.
const MARKERS: [&str; 9] = [
    "#033", "^[", "\\x1b", "\\x1B", "\\033", "\\e", "\\u001b", "\\u001B", "\u{241b}",
];

/// Text forms of ST (ESC `\\`, which ends an OSC): each marker followed by a backslash.
const STS: [&str; 9] = [
    "#033\\",
    "^[\\",
    "\\x1b\\",
    "\\x1B\\",
    "\\033\\",
    "\\e\\",
    "\\u001b\\",
    "\\u001B\\",
    "\u{241b}\\",
];

/// Text forms of BEL (which ends an OSC).
const BELS: [&str; 5] = ["#007", "^G", "\\x07", "\\a", "\\u0007"];

/// `line` with the escape sequences written out as text removed; borrowed when it has none.
pub(super) fn flatten(line: &str) -> Cow<'_, str> {
    let bytes = line.as_bytes();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut orphans: Vec<(usize, usize)> = Vec::new();
    let mut colour_evidence = false;
    // Each `[` (a CSI) and `]` (an OSC), in one vectorised pass; most lines hold none or a few.
    let mut from = 0;
    for i in memchr::memchr2_iter(b'[', b']', bytes) {
        if i < from {
            continue;
        }
        if bytes[i] == b']' {
            let osc = marker_before(line, i).and_then(|m| Some((m, osc_end(line, i + 1)?)));
            if let Some((m, end)) = osc {
                cuts.push((i - m, end));
                from = end;
            }
            continue;
        }
        match marker_before(line, i) {
            Some(m) => {
                if let Some(end) = csi_end(bytes, i + 1) {
                    cuts.push((i - m, end));
                    from = end;
                }
            }
            None => {
                // An orphan SGR: `[`, digits and `;`, `m` (and not `[5m]`).
                let params = bytes[i + 1..]
                    .iter()
                    .take(17)
                    .take_while(|b| b.is_ascii_digit() || **b == b';')
                    .count();
                let end = i + 1 + params + 1;
                if params <= 16
                    && bytes.get(end - 1) == Some(&b'm')
                    && bytes.get(end) != Some(&b']')
                    && !bytes[i + 1..end - 1].starts_with(b";;")
                {
                    let params = &bytes[i + 1..end - 1];
                    if i == 0 || params.is_empty() || params.iter().all(|&b| b == b'0') {
                        colour_evidence = true;
                    }
                    orphans.push((i, end));
                    from = end;
                }
            }
        }
    }
    if colour_evidence {
        cuts.extend(orphans);
    }
    if cuts.is_empty() {
        return Cow::Borrowed(line);
    }
    cuts.sort_unstable();
    let mut out = String::with_capacity(line.len());
    let mut at = 0;
    for (start, end) in cuts {
        if start >= at {
            out.push_str(&line[at..start]);
            at = end;
        }
    }
    out.push_str(&line[at..]);
    Cow::Owned(out)
}

/// The length of the ESC marker that ends right before byte `i`, if one does.
fn marker_before(line: &str, i: usize) -> Option<usize> {
    let head = line.as_bytes().get(..i)?;
    // Every marker ends in one of these bytes (`#033`, `\033`, `^[`, `\x1b`, `\x1B`, `\e`,
    // `\u001b`, `\u001B`, and `␛`'s last byte): most brackets are ruled out by one compare.
    if !matches!(head.last(), Some(b'3' | b'[' | b'b' | b'B' | b'e' | 0x9b)) {
        return None;
    }
    MARKERS
        .iter()
        .find(|m| head.ends_with(m.as_bytes()))
        .map(|m| m.len())
}

/// The end (exclusive) of a CSI whose parameters start at `from`: parameter and intermediate
/// bytes, then one final byte in `@`..=`~` (ECMA-48).
fn csi_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut j = from;
    while j < bytes.len() && (0x20..=0x3f).contains(&bytes[j]) && bytes[j] != b'[' {
        j += 1;
        if j - from > 32 {
            return None;
        }
    }
    let last = *bytes.get(j)?;
    (0x40..=0x7e).contains(&last).then_some(j + 1)
}

/// The end (exclusive) of an OSC whose text starts at `from`: up to and including a BEL or an
/// ST (an ESC marker and `\`), in text form; None when it does not end on the line.
fn osc_end(line: &str, from: usize) -> Option<usize> {
    let rest = line.get(from..)?;
    let mut best: Option<usize> = None;
    for bel in BELS {
        if let Some(p) = rest.find(bel) {
            best = Some(best.map_or(p + bel.len(), |b| b.min(p + bel.len())));
        }
    }
    for st in STS {
        if let Some(p) = rest.find(st) {
            best = Some(best.map_or(p + st.len(), |b| b.min(p + st.len())));
        }
    }
    best.map(|len| from + len)
}
