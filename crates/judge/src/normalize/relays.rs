//! Prefixes of whoever relayed the line: a quote, a container runtime (`docker compose`,
//! kubectl), a launcher (torch.distributed, torchrun, `srun`) or a multi-process server (vLLM's
//! and Ray's process tags). They carry no level; some name a rank.

use super::scan::{Token, byte, digits, is_name_byte, lit, space, spaces, strip};

/// `> ` quoting (e-mail, Markdown, issue comments).
pub(super) fn quote(b: &[u8], i: usize) -> Option<Token> {
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
pub(super) fn rank_prefix(b: &[u8], i: usize) -> Option<Token> {
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
pub(super) fn kubectl(b: &[u8], i: usize) -> Option<Token> {
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

/// vLLM's `(EngineCore_0 pid=12) `, `(VllmWorker rank=1 pid=34) `, `(Worker_TP1 pid=34) `,
/// `(APIServer pid=1) ` (vllm/utils `_add_prefix`: `f"({name} pid={pid}) "`), Ray's
/// `(RayWorkerWrapper pid=1, ip=10.0.0.1) ` and `(pid=1) `.
///
/// The rank: `rank=N`, or the `TP` index in a worker's name (`Worker_TP1`, `Worker_PP0_TP1`:
/// the TP rank, as for sglang), else its `PP` index (`Worker_PP1`); an engine's `_DP0` is a
/// replica, not a rank.
///
/// Read as bytes (most lines of a vLLM log start with a tag): the same answer as
/// `process_tag_reference` in the tests, which reads it as text.
pub(super) fn process_tag(b: &[u8], i: usize) -> Option<Token> {
    let n = b
        .get(i + 1..)?
        .iter()
        .take(96)
        .take_while(|c| **c != b')')
        .count();
    let inner = &b[i + 1..i + 1 + n];
    let close = byte(b, i + 1 + n, b')')?;
    // The text reading needs whole characters: a tag cut inside one by the length limit is none.
    if !inner.is_ascii() {
        std::str::from_utf8(inner).ok()?;
    }
    let mut rank = None;
    let mut saw_pid = false;
    for (k, w) in inner.split(|c| *c == b' ').enumerate() {
        match tag_field(w) {
            Some(TagField::Pid) => saw_pid = true,
            Some(TagField::Rank(r)) => rank = Some(r),
            Some(TagField::Ip) => {}
            None if k == 0
                && !w.is_empty()
                && w.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_') =>
            {
                rank = worker_rank(w);
            }
            None => return None,
        }
    }
    if !saw_pid {
        return None;
    }
    strip(space(b, close), rank, false)
}

/// The rank in a vLLM worker's name: its `TP` index (`Worker_TP1`, `Worker_PP0_TP1`), else
/// its `PP` index (`Worker_PP1`: vLLM names the TP index only when there are several, so a
/// pipeline stage alone is the rank). The index is what follows the tag's last occurrence, read
/// as `str::parse::<u32>` does (an optional `+`, digits, no overflow).
fn worker_rank(name: &[u8]) -> Option<u32> {
    let index = |tag: &[u8]| {
        let p = name.windows(2).rposition(|w| w == tag)?;
        parse_u32(&name[p + 2..])
    };
    index(b"TP").or_else(|| name.starts_with(b"Worker").then(|| index(b"PP")).flatten())
}

/// `str::parse::<u32>` on ASCII bytes.
fn parse_u32(s: &[u8]) -> Option<u32> {
    let digits = s.strip_prefix(b"+").unwrap_or(s);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.iter().try_fold(0u32, |v, c| {
        v.checked_mul(10)?.checked_add(u32::from(c - b'0'))
    })
}

/// A `key=value` field of a process tag.
enum TagField {
    Pid,
    Rank(u32),
    Ip,
}

fn tag_field(w: &[u8]) -> Option<TagField> {
    let w = w.strip_suffix(b",").unwrap_or(w);
    let eq = w.iter().position(|c| *c == b'=')?;
    let (key, value) = (&w[..eq], &w[eq + 1..]);
    let number = !value.is_empty() && value.iter().all(u8::is_ascii_digit);
    match key {
        b"pid" if number => Some(TagField::Pid),
        b"rank" if number => parse_u32(value).map(TagField::Rank),
        b"ip" if !value.is_empty() => Some(TagField::Ip),
        _ => None,
    }
}

/// `srun --label`'s `1: ` (right-aligned to the widest task id: `  12: `).
pub(super) fn srun_label(b: &[u8], i: usize) -> Option<Token> {
    let j = spaces(b, i);
    if j - i > 6 {
        return None;
    }
    let (rank, j) = digits(b, j, 1, 6)?;
    let j = lit(b, j, ": ")?;
    strip(j, Some(rank), false)
}

/// docker compose's `vllm-1  | ` (v2) and `sglang_1 | ` (v1): the service and its index, padded,
/// a bar and one space.
pub(super) fn compose(b: &[u8], i: usize) -> Option<Token> {
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

#[cfg(test)]
mod tests;
