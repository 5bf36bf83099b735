//! The byte reading of a process tag against the text reading it replaced (issue 28).

use super::super::scan::Token;
use super::super::scan::{byte, space, strip};
use super::process_tag;
use proptest::prelude::*;

/// What a token says, comparably.
fn said(t: Option<Token>) -> Option<(usize, Option<u32>, bool, Option<usize>, bool)> {
    t.map(|t| match t {
        Token::Strip {
            end,
            rank,
            record,
            until,
        } => (end, rank, record, until, false),
        Token::KeepLevel { rank, end } => (end, rank, false, None, true),
    })
}

fn process_tag_reference(b: &[u8], i: usize) -> Option<Token> {
    let n = b
        .get(i + 1..)?
        .iter()
        .take(96)
        .take_while(|c| **c != b')')
        .count();
    let inner = std::str::from_utf8(&b[i + 1..i + 1 + n]).ok()?;
    let close = byte(b, i + 1 + n, b')')?;
    let mut rank = None;
    let mut saw_pid = false;
    for (k, w) in inner.split(' ').enumerate() {
        match tag_field_reference(w) {
            Some(RefField::Pid) => saw_pid = true,
            Some(RefField::Rank(r)) => rank = Some(r),
            Some(RefField::Ip) => {}
            None if k == 0
                && !w.is_empty()
                && w.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') =>
            {
                rank = worker_rank_reference(w);
            }
            None => return None,
        }
    }
    if !saw_pid {
        return None;
    }
    strip(space(b, close), rank, false)
}

fn worker_rank_reference(name: &str) -> Option<u32> {
    let index = |tag: &str| name.rfind(tag).and_then(|p| name[p + 2..].parse().ok());
    index("TP").or_else(|| name.starts_with("Worker").then(|| index("PP")).flatten())
}

enum RefField {
    Pid,
    Rank(u32),
    Ip,
}

fn tag_field_reference(w: &str) -> Option<RefField> {
    let w = w.strip_suffix(',').unwrap_or(w);
    let (key, value) = w.split_once('=')?;
    let number = !value.is_empty() && value.bytes().all(|c| c.is_ascii_digit());
    match key {
        "pid" if number => Some(RefField::Pid),
        "rank" if number => value.parse().ok().map(RefField::Rank),
        "ip" if !value.is_empty() => Some(RefField::Ip),
        _ => None,
    }
}

#[test]
fn the_byte_reading_equals_the_text_reading_on_real_tags() {
    for line in [
        "(EngineCore_0 pid=12) INFO x",
        "(VllmWorker rank=1 pid=34) x",
        "(Worker_TP1 pid=34) x",
        "(Worker_PP0_TP1 pid=34) x",
        "(Worker_PP1 pid=34) x",
        "(Worker_TP+3 pid=34) x",
        "(Worker_TP99999999999 pid=34) x",
        "(APIServer pid=1) x",
        "(RayWorkerWrapper pid=1, ip=10.0.0.1) x",
        "(pid=1) x",
        "(pid=) x",
        "(rank=99999999999 pid=1) x",
        "(foo bar pid=1) x",
        "(Worker pid=1)",
        "(Worker pid=1",
        "(W\u{e9}rker pid=1) x",
        "(pid=1 ip=\u{e9}\u{e9}) x",
    ] {
        assert_eq!(
            said(process_tag(line.as_bytes(), 0)),
            said(process_tag_reference(line.as_bytes(), 0)),
            "{line}"
        );
    }
}

fn fragments() -> impl Strategy<Value = String> {
    let parts = prop::sample::select(vec![
        "(",
        ")",
        " ",
        ",",
        "=",
        "+",
        "pid=",
        "rank=",
        "ip=",
        "1",
        "42",
        "99999999999",
        "Worker",
        "_TP",
        "_PP",
        "TP",
        "PP",
        "EngineCore_0",
        "x",
        "\u{e9}",
        "\u{1f600}",
        ") ",
    ]);
    prop::collection::vec(parts, 0..24).prop_map(|v| format!("({}", v.concat()))
}

proptest! {
    #[test]
    fn the_byte_reading_equals_the_text_reading(line in fragments(), pad in 0usize..100) {
        // A tag near the 96-byte limit, where a character can be cut.
        let line = format!("({}{}", "W".repeat(pad), &line[1..]);
        prop_assert_eq!(
            said(process_tag(line.as_bytes(), 0)),
            said(process_tag_reference(line.as_bytes(), 0))
        );
    }
}
