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
//! header is taken off, so the exception it carries is matched as if printed bare. A kept header
//! still says its record is calm (`Dress::calm`): `judge/quoted.rs` takes from such a record the
//! fatal hits that only its quoted text shows (a logged prompt), its evidence kept.
//!
//! Hand-written byte scanning, no regex: every token is recognised by its first bytes, so a line
//! without a prefix costs a few comparisons.

use super::records::{
    bracketed_level, bracketed_time, c10_header, glog_header, iso_record, level_record,
    syslog_header,
};
use super::relays::{compose, kubectl, process_tag, quote, rank_prefix, srun_label};
use super::scan::Token;

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
    /// That header's level is not an error (INFO, WARNING, DEBUG, ...): a calm record.
    pub(super) calm: bool,
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
        calm: false,
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
                d.calm = true;
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
