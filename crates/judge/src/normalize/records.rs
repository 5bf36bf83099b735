//! A logging library's record header: timestamp, level, source location (vLLM, sglang, TGI,
//! glog, c10, syslog, Python logging, uvicorn). An error record's header is taken off; one of
//! another level is kept from its start (see `dress.rs` for why).

use super::scan::{
    Token, byte, clock, date_time, digits, is_name_byte, level_word, lit, space, spaces, strip,
};

/// sglang's `configure_logger` header `[%(asctime)s{prefix}] ` (datefmt `%Y-%m-%d %H:%M:%S`),
/// the prefix built from ` DP{dp_rank}`, ` PP{pp_rank}`, ` TP{tp_rank}`, ` EP{moe_ep_rank}`,
/// ` ATTN_CP..`, ` MOE_DP..` (sglang/srt/managers/scheduler.py `run_scheduler_process`); also a
/// plain `[2025-03-01 10:00:00,123] `.
///
/// The rank named is the TP rank: it is the one every tensor-parallel server has (DP, PP and EP
/// appear only with those options), and the rank a CUDA or NCCL failure happens on is a TP
/// worker's. With DP and no DP attention each replica counts its TP ranks from 0, so `DP1 TP0`
/// and `DP0 TP0` both say 0: the rank is then the rank within the replica.
pub(super) fn bracketed_time(b: &[u8], i: usize) -> Option<Token> {
    let mut j = date_time(b, i + 1)?;
    let mut rank = None;
    while byte(b, j, b' ').is_some() {
        let k = j + 1;
        let n = b
            .get(k..)?
            .iter()
            .take(16)
            .take_while(|c| c.is_ascii_uppercase() || **c == b'_')
            .count();
        let name = &b[k..k + n];
        if let Some((v, e)) = digits(b, k + n, 1, 6).filter(|_| n > 0) {
            if name == b"TP" {
                rank = Some(v);
            }
            j = e;
        } else if let Some(e) = lit(b, k, "migrate") {
            j = e;
        } else {
            return None;
        }
    }
    let j = byte(b, j, b']')?;
    strip(space(b, j), rank, true)
}

/// c10's (PyTorch C++) log header `[W301 10:00:00.000000000 ProcessGroupNCCL.cpp:4561] ` and the
/// older `[W socket.cpp:663] `.
pub(super) fn c10_header(b: &[u8], i: usize) -> Option<Token> {
    let level = *b.get(i + 1)?;
    let error = match level {
        b'E' | b'F' => true,
        b'I' | b'W' => false,
        _ => return None,
    };
    let mut j = i + 2;
    if let Some((_, e)) = digits(b, j, 3, 4) {
        j = clock(b, byte(b, e, b' ')?)?;
    }
    let j = byte(b, j, b' ')?;
    source_location_then_message(b, j, 128, error)
}

/// `[ERROR] `, `[INFO]` after a timestamp.
pub(super) fn bracketed_level(b: &[u8], i: usize) -> Option<Token> {
    let (error, j) = level_word(b, i + 1)?;
    let j = byte(b, j, b']')?;
    if !error {
        return Some(Token::KeepLevel {
            rank: None,
            end: b.len(),
        });
    }
    strip(space(b, j), None, true)
}

/// An ISO 8601 timestamp (`2025-03-01T10:00:00.123456Z`, `2025-03-01 10:00:00,123`, an offset,
/// ` UTC`; Go's `2025/03/01 10:00:00`), then maybe a level: TGI's tracing output
/// `2025-03-01T10:00:00.000000Z ERROR shard-manager: text_generation_launcher: ... rank=1`.
pub(super) fn iso_record(b: &[u8], i: usize) -> Option<Token> {
    let mut j = date_time(b, i)?;
    match b.get(j) {
        Some(b'Z') => j += 1,
        Some(b'+' | b'-') => {
            // `+00:00`, `-0700`, `+01`.
            j = digits(b, j + 1, 4, 4)
                .or_else(|| {
                    let k = digits(b, j + 1, 2, 2)?.1;
                    Some(
                        byte(b, k, b':')
                            .and_then(|k| digits(b, k, 2, 2))
                            .unwrap_or((0, k)),
                    )
                })?
                .1;
        }
        _ => {}
    }
    j = lit(b, j, " UTC").unwrap_or(j);
    let k = spaces(b, j);
    let level = level_word(b, k).or_else(|| {
        let (e, end) = level_word(b, byte(b, k, b'[')?)?;
        Some((e, byte(b, end, b']')?))
    });
    let Some((error, after)) = level else {
        return strip(space(b, j), None, true);
    };
    let (rank, end) = shard_rank(b);
    if !error {
        return Some(Token::KeepLevel { rank, end });
    }
    let mut j = spaces(b, after);
    j = lit(b, j, "- ").unwrap_or(j);
    while let Some(e) = rust_span_or_target(b, j) {
        j = e;
    }
    Some(Token::Strip {
        end: j,
        rank,
        record: true,
        until: Some(end),
    })
}

/// A trailing ` rank=N` of TGI's shard-manager span (tracing's compact format puts span fields
/// at the end): the rank, and where the text ends without it.
fn shard_rank(b: &[u8]) -> (Option<u32>, usize) {
    let Some(at) = b.windows(14).position(|w| w == b"shard-manager:") else {
        return (None, b.len());
    };
    let tail = &b[at..];
    let Some(p) = tail.windows(6).rposition(|w| w == b" rank=") else {
        return (None, b.len());
    };
    match digits(tail, p + 6, 1, 6) {
        Some((v, e)) if e == tail.len() => (Some(v), at + p),
        _ => (None, b.len()),
    }
}

/// A Rust tracing span or target before the message: `shard-manager: `,
/// `warmup{max_input_length=4095}:warmup: `, `text_generation_launcher: `,
/// `text_generation_router::server: `, `router/src/server.rs:2302: `. Lower-case and with a `-`,
/// `_`, `::`, `{` or `/` (never a Python exception's CamelCase name).
fn rust_span_or_target(b: &[u8], i: usize) -> Option<usize> {
    let first = *b.get(i)?;
    if !first.is_ascii_lowercase() {
        return None;
    }
    let mut j = i;
    let mut depth = 0usize;
    while let Some(&c) = b.get(j) {
        match c {
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            b':' if depth == 0 && b.get(j + 1) == Some(&b' ') => break,
            b' ' if depth == 0 => return None,
            _ => {}
        }
        j += 1;
        if j - i > 200 {
            return None;
        }
    }
    let word = &b[i..j];
    let rusty = word.iter().any(|c| matches!(c, b'-' | b'_' | b'{' | b'/'))
        || word.windows(2).any(|w| w == b"::");
    (rusty && b.get(j) == Some(&b':')).then_some(j + 2)
}

/// A level-first record header: vLLM's `INFO 03-01 10:00:00 [core.py:700] ` (vllm/logger.py
/// `_FORMAT`: `%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s`, datefmt
/// `%m-%d %H:%M:%S`; before 2025 `%(filename)s:%(lineno)d] ` without the `[`), uvicorn's
/// `INFO:     ` (the level padded to nine columns), Python logging's default `ERROR:root:`.
pub(super) fn level_record(b: &[u8], i: usize) -> Option<Token> {
    let (error, j) = level_word(b, i)?;
    let end = match b.get(j)? {
        b' ' => vllm_header(b, j + 1)?,
        b':' if b.get(j + 1) == Some(&b' ') => {
            if &b[i..j] == b"FATAL" {
                return None; // Postgres's `FATAL:  ...`: its patterns read the word.
            }
            spaces(b, j + 1)
        }
        b':' => {
            if &b[i..j] == b"FATAL" {
                return None;
            }
            let n = b
                .get(j + 1..)?
                .iter()
                .take(128)
                .take_while(|c| is_name_byte(**c) || matches!(**c, b'<' | b'>'))
                .count();
            byte(b, j + 1 + n, b':')?
        }
        _ => return None,
    };
    if !error {
        return Some(Token::KeepLevel {
            rank: None,
            end: b.len(),
        });
    }
    strip(end, None, true)
}

/// vLLM's header after the level: `03-01 10:00:00 [core.py:700] ` (or `core.py:700] `).
fn vllm_header(b: &[u8], i: usize) -> Option<usize> {
    let j = digits(b, i, 2, 2)?.1;
    let j = digits(b, byte(b, j, b'-')?, 2, 2)?.1;
    let j = clock(b, byte(b, j, b' ')?)?;
    let j = byte(b, j, b' ')?;
    let j = byte(b, j, b'[').unwrap_or(j);
    let n = b
        .get(j..)?
        .iter()
        .take(128)
        .take_while(|c| is_name_byte(**c) || **c == b'/')
        .count();
    let j = digits(b, byte(b, j + n, b':')?, 1, 7)?.1;
    let j = byte(b, j, b']')?;
    Some(space(b, j))
}

/// glog (absl, Triton, PyTorch C++): `I0301 10:00:00.000000 140 file.cc:12] `.
pub(super) fn glog_header(b: &[u8], i: usize) -> Option<Token> {
    let error = match b[i] {
        b'E' | b'F' => true,
        b'I' | b'W' => false,
        _ => return None,
    };
    let j = digits(b, i + 1, 4, 4)?.1;
    let j = clock(b, byte(b, j, b' ')?)?;
    let j = spaces(b, j);
    let j = digits(b, j, 1, 10)?.1;
    let j = byte(b, j, b' ')?;
    source_location_then_message(b, j, 160, error)
}

/// The end of a c10 or glog header, from `j`: the source location `path/file.cc:LINE]`, at most
/// `max_name` bytes of path; then an error record's header is taken off, any other record's kept
/// (see `dress.rs`, levels).
fn source_location_then_message(b: &[u8], j: usize, max_name: usize, error: bool) -> Option<Token> {
    let n = b
        .get(j..)?
        .iter()
        .take(max_name)
        .take_while(|c| is_name_byte(**c) || **c == b'/')
        .count();
    let j = digits(b, byte(b, j + n, b':')?, 1, 7)?.1;
    let j = byte(b, j, b']')?;
    if !error {
        return Some(Token::KeepLevel {
            rank: None,
            end: b.len(),
        });
    }
    strip(space(b, j), None, true)
}

/// syslog / journalctl's short format: `Mar 01 10:00:00 host unit[123]: `.
pub(super) fn syslog_header(b: &[u8], i: usize) -> Option<Token> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    if b.get(i + 3) != Some(&b' ')
        || !matches!(b[i], b'J' | b'F' | b'M' | b'A' | b'S' | b'O' | b'N' | b'D')
    {
        return None;
    }
    let j = MONTHS.iter().find_map(|m| lit(b, i, m))?;
    let j = byte(b, j, b' ')?;
    let j = byte(b, j, b' ').unwrap_or(j);
    let j = digits(b, j, 1, 2)?.1;
    let j = clock(b, byte(b, j, b' ')?)?;
    let j = byte(b, j, b' ')?;
    let host = b
        .get(j..)?
        .iter()
        .take(128)
        .take_while(|c| **c != b' ')
        .count();
    let j = byte(b, j + host, b' ')?;
    let unit = b
        .get(j..)?
        .iter()
        .take(128)
        .take_while(|c| is_name_byte(**c) || **c == b'@')
        .count();
    let mut k = j + unit;
    if unit == 0 {
        return None;
    }
    if let Some(e) = byte(b, k, b'[') {
        k = byte(b, digits(b, e, 1, 10)?.1, b']')?;
    }
    let k = lit(b, k, ": ")?;
    strip(k, None, true)
}
