//! The prefixes in front of a log message: who relayed it (a container runtime, kubectl, a
//! launcher, a quote), which process or rank printed it, and the logging library's record header
//! (timestamp, level, source location). [`dress`] reads them at the start of a line, repeated and
//! in any order, and says where the message starts, which rank was named, and whether a record
//! header was seen (a line without one can be the continuation of a wrapped line).
//!
//! Levels: the catalog's exception-form patterns are anchored (`^` then a prefix group that
//! admits ERROR/CRITICAL record headers but not INFO/WARNING ones), so that "WARNING ... Failed to
//! import x: ImportError: ..." stays benign. That rule must survive normalisation, so a record
//! whose level is not an error (INFO, WARNING, DEBUG, TRACE, NOTICE; glog and c10's `I`/`W`) is
//! kept from its level on, exactly as the catalog was written against it: the message keeps its
//! level word at its head, no pattern that did not match it before matches it now, and no text is
//! allocated. (A separate `level` field that reading.rs would use to drop hits was the
//! alternative; it would also drop the unanchored evidence patterns that are meant to match
//! warnings, like vLLM's "Failed to import from vllm._C with ImportError(...)".) An error record's
//! header is taken off, so the exception it carries is matched as if printed bare.
//!
//! Hand-written byte scanning, no regex: every token is recognised by its first bytes, so a line
//! without a prefix costs a few comparisons.

/// Where the message of a line starts and what its prefixes said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Dress {
    /// Byte offset where the text to classify starts.
    pub(super) start: usize,
    /// Byte offset where it ends (before a trailing `rank=N` of TGI's shard spans).
    pub(super) end: usize,
    /// The rank the innermost prefix that names one named.
    pub(super) rank: Option<u32>,
    /// A logging library's record header (timestamp or level) was seen.
    pub(super) record: bool,
}

/// What one token at the head of a line is.
enum Token {
    /// A prefix to take off: the message continues at `end`.
    Strip {
        end: usize,
        rank: Option<u32>,
        record: bool,
        /// Where the text ends, when a suffix is dress too (TGI's `rank=N`).
        until: Option<usize>,
    },
    /// A record header whose level is not an error: the text is kept from this token on, as it
    /// was (see the module doc), up to `end`; `rank` is a rank its fields name (TGI's shards).
    KeepLevel { rank: Option<u32>, end: usize },
}

/// At most this many prefixes are taken off one line (bounded work on a pathological line).
const MAX_TOKENS: usize = 12;

/// Reads the prefixes of `line`.
pub(super) fn dress(line: &str) -> Dress {
    let b = line.as_bytes();
    let mut d = Dress {
        start: 0,
        end: b.len(),
        rank: None,
        record: false,
    };
    for _ in 0..MAX_TOKENS {
        match token(b, d.start) {
            Some(Token::Strip {
                end,
                rank,
                record,
                until,
            }) => {
                d.start = end;
                d.end = until.unwrap_or(d.end);
                d.rank = rank.or(d.rank);
                d.record |= record;
            }
            Some(Token::KeepLevel { rank, end }) => {
                d.rank = rank.or(d.rank);
                d.end = end;
                d.record = true;
                break;
            }
            None => break,
        }
    }
    d.end = d.end.max(d.start);
    d
}

/// The token at `i`, if one is a known prefix.
fn token(b: &[u8], i: usize) -> Option<Token> {
    let first = *b.get(i)?;
    match first {
        b'>' => quote(b, i),
        b'[' => rank_prefix(b, i)
            .or_else(|| kubectl(b, i))
            .or_else(|| bracketed_time(b, i))
            .or_else(|| c10_header(b, i))
            .or_else(|| bracketed_level(b, i)),
        b'(' => process_tag(b, i),
        b'0'..=b'9' => iso_record(b, i).or_else(|| srun_label(b, i)),
        b' ' => srun_label(b, i),
        b'A'..=b'Z' | b'a'..=b'z' => level_record(b, i)
            .or_else(|| glog_header(b, i))
            .or_else(|| syslog_header(b, i))
            .or_else(|| compose(b, i)),
        _ => None,
    }
}

// ---- small readers: each returns the offset after what it read ----

fn lit(b: &[u8], i: usize, s: &str) -> Option<usize> {
    b.get(i..i + s.len())
        .filter(|x| *x == s.as_bytes())
        .map(|_| i + s.len())
}

/// Between `min` and `max` ASCII digits at `i`: their value and the end.
fn digits(b: &[u8], i: usize, min: usize, max: usize) -> Option<(u32, usize)> {
    let n = b
        .get(i..)?
        .iter()
        .take(max + 1)
        .take_while(|c| c.is_ascii_digit())
        .count();
    if n < min || n > max {
        return None;
    }
    let v = b[i..i + n].iter().fold(0u32, |v, c| {
        v.saturating_mul(10).saturating_add(u32::from(c - b'0'))
    });
    Some((v, i + n))
}

fn byte(b: &[u8], i: usize, c: u8) -> Option<usize> {
    (b.get(i) == Some(&c)).then_some(i + 1)
}

/// One optional space.
fn space(b: &[u8], i: usize) -> usize {
    byte(b, i, b' ').unwrap_or(i)
}

fn spaces(b: &[u8], i: usize) -> usize {
    i + b
        .get(i..)
        .map_or(0, |r| r.iter().take_while(|c| **c == b' ').count())
}

/// `HH:MM:SS` and an optional fraction (`.123456`, `,123`).
fn clock(b: &[u8], i: usize) -> Option<usize> {
    let j = digits(b, i, 2, 2)?.1;
    let j = digits(b, byte(b, j, b':')?, 2, 2)?.1;
    let j = digits(b, byte(b, j, b':')?, 2, 2)?.1;
    Some(match b.get(j) {
        Some(b'.' | b',') => digits(b, j + 1, 1, 9).map_or(j, |d| d.1),
        _ => j,
    })
}

/// `YYYY-MM-DD`, then `T` or a space, then the clock.
fn date_time(b: &[u8], i: usize) -> Option<usize> {
    let j = digits(b, i, 4, 4)?.1;
    let j = digits(b, byte(b, j, b'-').or_else(|| byte(b, j, b'/'))?, 2, 2)?.1;
    let j = digits(b, byte(b, j, b'-').or_else(|| byte(b, j, b'/'))?, 2, 2)?.1;
    let j = match b.get(j) {
        Some(b'T' | b' ') => j + 1,
        _ => return None,
    };
    clock(b, j)
}

/// The level word at `i`: (is an error level, end).
fn level_word(b: &[u8], i: usize) -> Option<(bool, usize)> {
    const LEVELS: [(&str, bool); 9] = [
        ("CRITICAL", true),
        ("ERROR", true),
        ("FATAL", true),
        ("WARNING", false),
        ("WARN", false),
        ("INFO", false),
        ("DEBUG", false),
        ("TRACE", false),
        ("NOTICE", false),
    ];
    LEVELS.iter().find_map(|(w, error)| {
        let end = lit(b, i, w)?;
        let next = b.get(end).copied();
        (next.is_none() || !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_'))
            .then_some((*error, end))
    })
}

fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')
}

fn strip(end: usize, rank: Option<u32>, record: bool) -> Option<Token> {
    Some(Token::Strip {
        end,
        rank,
        record,
        until: None,
    })
}

// ---- the prefixes ----

/// `> ` quoting (e-mail, Markdown, issue comments).
fn quote(b: &[u8], i: usize) -> Option<Token> {
    let j = i + 1;
    match b.get(j) {
        None | Some(b'>') => strip(j, None, false),
        Some(b' ') => strip(j + 1, None, false),
        _ => None,
    }
}

/// torch.distributed's excepthook prefix `[rank1]: ` (torch/distributed/distributed_c10d.py:
/// `f"{excepthook_prefix}: {s}"`, also `[rank0]:[W...` on c10 warnings), and torchrun's `--tee`
/// / `log_line_prefix_template` default `[{role_name}{local_rank}]:` (`[default0]:`,
/// torch/distributed/elastic/multiprocessing/tail_log.py), which adds no space.
fn rank_prefix(b: &[u8], i: usize) -> Option<Token> {
    let name_end = i
        + 1
        + b.get(i + 1..)?
            .iter()
            .take(32)
            .take_while(|c| c.is_ascii_alphabetic() || **c == b'_')
            .count();
    let (rank, j) = digits(b, name_end, 1, 6)?;
    let j = lit(b, j, "]:")?;
    // `[rank1]: ` has a space of its own; the launcher's `[default0]:`, `[0]:` do not.
    let end = if &b[i + 1..name_end] == b"rank" {
        space(b, j)
    } else {
        j
    };
    strip(end, Some(rank), false)
}

/// kubectl logs --prefix: `[pod/NAME/CONTAINER] `.
fn kubectl(b: &[u8], i: usize) -> Option<Token> {
    let j = lit(b, i, "[pod/")?;
    let n = b
        .get(j..)?
        .iter()
        .take(256)
        .take_while(|c| **c != b']' && **c != b' ')
        .count();
    let inner = &b[j..j + n];
    if inner.iter().filter(|c| **c == b'/').count() != 1 {
        return None;
    }
    let j = byte(b, j + n, b']')?;
    strip(space(b, j), None, false)
}

/// sglang's `configure_logger` header `[%(asctime)s{prefix}] ` (datefmt `%Y-%m-%d %H:%M:%S`),
/// the prefix built from ` DP{dp_rank}`, ` PP{pp_rank}`, ` TP{tp_rank}`, ` EP{moe_ep_rank}`,
/// ` ATTN_CP..`, ` MOE_DP..` (sglang/srt/managers/scheduler.py `run_scheduler_process`); also a
/// plain `[2025-03-01 10:00:00,123] `.
///
/// The rank named is the TP rank: it is the one every tensor-parallel server has (DP, PP and EP
/// appear only with those options), and the rank a CUDA or NCCL failure happens on is a TP
/// worker's. With DP and no DP attention each replica counts its TP ranks from 0, so `DP1 TP0`
/// and `DP0 TP0` both say 0: the rank is then the rank within the replica.
fn bracketed_time(b: &[u8], i: usize) -> Option<Token> {
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
fn c10_header(b: &[u8], i: usize) -> Option<Token> {
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
    let n = b
        .get(j..)?
        .iter()
        .take(128)
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

/// `[ERROR] `, `[INFO]` after a timestamp.
fn bracketed_level(b: &[u8], i: usize) -> Option<Token> {
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

/// vLLM's `(EngineCore_0 pid=12) `, `(VllmWorker rank=1 pid=34) `, `(Worker_TP1 pid=34) `,
/// `(APIServer pid=1) ` (vllm/utils `_add_prefix`: `f"({name} pid={pid}) "`), Ray's
/// `(RayWorkerWrapper pid=1, ip=10.0.0.1) ` and `(pid=1) `.
///
/// The rank: `rank=N`, or the `TP` index in a worker's name (`Worker_TP1`, `Worker_PP0_TP1`:
/// the TP rank, as for sglang); an engine's `_DP0` is a replica, not a rank.
fn process_tag(b: &[u8], i: usize) -> Option<Token> {
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
        match tag_field(w) {
            Some(TagField::Pid) => saw_pid = true,
            Some(TagField::Rank(r)) => rank = Some(r),
            Some(TagField::Ip) => {}
            None if k == 0
                && !w.is_empty()
                && w.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') =>
            {
                rank = w.rfind("TP").and_then(|p| w[p + 2..].parse().ok());
            }
            None => return None,
        }
    }
    if !saw_pid {
        return None;
    }
    strip(space(b, close), rank, false)
}

/// A `key=value` field of a process tag.
enum TagField {
    Pid,
    Rank(u32),
    Ip,
}

fn tag_field(w: &str) -> Option<TagField> {
    let w = w.strip_suffix(',').unwrap_or(w);
    let (key, value) = w.split_once('=')?;
    let number = !value.is_empty() && value.bytes().all(|c| c.is_ascii_digit());
    match key {
        "pid" if number => Some(TagField::Pid),
        "rank" if number => value.parse().ok().map(TagField::Rank),
        "ip" if !value.is_empty() => Some(TagField::Ip),
        _ => None,
    }
}

/// An ISO 8601 timestamp (`2025-03-01T10:00:00.123456Z`, `2025-03-01 10:00:00,123`, an offset,
/// ` UTC`; Go's `2025/03/01 10:00:00`), then maybe a level: TGI's tracing output
/// `2025-03-01T10:00:00.000000Z ERROR shard-manager: text_generation_launcher: ... rank=1`.
fn iso_record(b: &[u8], i: usize) -> Option<Token> {
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

/// `srun --label`'s `1: ` (right-aligned to the widest task id: `  12: `).
fn srun_label(b: &[u8], i: usize) -> Option<Token> {
    let j = spaces(b, i);
    if j - i > 6 {
        return None;
    }
    let (rank, j) = digits(b, j, 1, 6)?;
    let j = lit(b, j, ": ")?;
    strip(j, Some(rank), false)
}

/// A level-first record header: vLLM's `INFO 03-01 10:00:00 [core.py:700] ` (vllm/logger.py
/// `_FORMAT`: `%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s`, datefmt
/// `%m-%d %H:%M:%S`; before 2025 `%(filename)s:%(lineno)d] ` without the `[`), uvicorn's
/// `INFO:     ` (the level padded to nine columns), Python logging's default `ERROR:root:`.
fn level_record(b: &[u8], i: usize) -> Option<Token> {
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
fn glog_header(b: &[u8], i: usize) -> Option<Token> {
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
    let n = b
        .get(j..)?
        .iter()
        .take(160)
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
fn syslog_header(b: &[u8], i: usize) -> Option<Token> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
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

/// docker compose's `vllm-1  | ` (v2) and `sglang_1 | ` (v1): the service and its index, padded,
/// a bar and one space.
fn compose(b: &[u8], i: usize) -> Option<Token> {
    let n = b
        .get(i..)?
        .iter()
        .take(128)
        .take_while(|c| is_name_byte(**c))
        .count();
    let name = &b[i..i + n];
    let idx = name.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    if idx == 0 || idx == n || !matches!(name[n - idx - 1], b'-' | b'_') {
        return None;
    }
    let j = spaces(b, i + n);
    if j == i + n {
        return None;
    }
    let j = byte(b, j, b'|')?;
    strip(space(b, j), None, false)
}
