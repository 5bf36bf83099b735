//! Two ranks' prints interleaved on one line: each rank writes to the same terminal or file
//! without a lock, so `[rank0]: some text[rank1]: RuntimeError: ...` happens when one rank's line
//! is cut by another's (torch.distributed's excepthook prefixes every line of a traceback with
//! `[rankN]: `). [`next_rank_print`] finds where the next rank's print starts inside a line, so
//! each part is read with its own rank.

/// The byte offset, after the first byte, where a `[rankN]: ` print starts inside `text`.
/// Cost: one vectorised scan for `[` (most lines hold none or one).
pub fn next_rank_print(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    memchr::memchr_iter(b'[', b.get(1..)?)
        .map(|p| p + 1)
        .find(|&i| is_rank_prefix(&b[i..]))
}

/// Whether `b` starts with `[rank` digits `]:`.
fn is_rank_prefix(b: &[u8]) -> bool {
    let Some(rest) = b.strip_prefix(b"[rank") else {
        return false;
    };
    let n = rest
        .iter()
        .take(7)
        .take_while(|c| c.is_ascii_digit())
        .count();
    (1..=6).contains(&n) && rest[n..].starts_with(b"]:")
}

#[cfg(test)]
mod tests {
    use super::next_rank_print;

    #[test]
    fn finds_the_second_rank_print() {
        for (text, at) in [
            ("[rank0]: foo[rank1]: RuntimeError: x", Some(12)),
            ("foo[rank1]: RuntimeError: x", Some(3)),
            ("[rank0]: RuntimeError: x", None),
            ("see [rank] and [rank1] and [rank2]x", None),
            ("a[b]c[rank10]:d", Some(5)),
        ] {
            assert_eq!(next_rank_print(text), at, "{text}");
        }
    }
}
