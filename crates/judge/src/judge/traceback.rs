//! A Python traceback is a structure, not a bag of lines: the lines under a `File "...", line N,
//! in f` frame are source code (a `raise RuntimeError(...)` there is not the error), the exception
//! line after the frames is, and chained tracebacks ("The above exception was the direct cause of
//! the following exception", "During handling of the above exception, another exception
//! occurred") form one failure whose root cause is chosen over the whole chain (`cause.rs`).
//!
//! Read line by line, per rank, so that two ranks' interleaved tracebacks do not mix:
//! - a line containing `Traceback (most recent call last):` opens a traceback (also after a prefix,
//!   "Scheduler hit an exception: Traceback ...", and `Exception Group Traceback`);
//! - then every indented line is a frame or its source (statements over several lines, `^^^^`
//!   and `~~~~` markers, "[Previous line repeated ...]"): its hits are dropped;
//! - the first non-indented line that reads as an exception (`pkg.Name: message`, `Name`) is the
//!   exception line: it carries the `python_exception` hit, and a bare header's python_exception
//!   evidence moves to it (the decisive line of a generic failure is the exception, not the
//!   header; a fatal "Scheduler hit an exception: Traceback ..." stays where it is);
//! - the message goes on over the next lines ("BackendCompilerFailed: backend='inductor'
//!   raised:" then "RuntimeError: ... during CUDA graph capture") until a blank line, a new
//!   traceback, a chain marker or a line that starts a new log record; they are in the chain;
//! - a chain marker (within a few lines of the end of a traceback: the message's tail may come
//!   first) links the traceback before it and the one after it into one chain; a
//!   traceback not preceded by one starts a new chain. An exception group's `| ` and `+-` gutter
//!   is read through, its sub-tracebacks in the group's chain.
//!
//! pytest's `E   ` lines are not a traceback and are left alone. The state is bounded: one small
//! entry per rank with an open traceback.

use crate::classify::{Hit, LineClass, Strength};
use crate::verdict::Signature;

/// What a line is inside (or outside) a traceback.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct LineRole {
    /// A frame or source line shown under a frame: its hits are not failures.
    pub(super) source: bool,
    /// The chain (one failure: chained tracebacks and their exception lines) the line belongs to.
    pub(super) chain: Option<u32>,
    /// The line is the exception line of the traceback whose header was this line number.
    pub(super) exception_of: Option<u64>,
    /// The line is the exception line of a traceback that followed "During handling of the
    /// above exception, another exception occurred": the exception raised while the one before
    /// was handled, the chain's error (the one before was being handled: a StopIteration inside
    /// importlib). After "The above exception was the direct cause" the first stays the cause.
    pub(super) handled_before: bool,
}

impl LineRole {
    /// The line's class as the traceback structure reads it: a source line names nothing; an
    /// exception line names at least an uncaught Python exception.
    pub(super) fn apply(&self, class: &mut LineClass) {
        if self.source {
            class.hits.clear();
        }
        let python = Some(Signature::PythonException);
        if self.exception_of.is_some() && !class.hits.iter().any(|h| h.signature == python) {
            class.hits.push(Hit {
                signature: python,
                strength: Strength::Evidence,
            });
            class.hits.sort_by_key(Hit::precedence);
        }
    }
}

/// Where one rank is in its traceback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading frames and source after the header on line `header`, indented by `indent` (a
    /// logger may indent a whole traceback: frames and source are indented further, the
    /// exception line is not); `foreign` lines seen since that are neither (another process's
    /// print).
    Frames {
        chain: u32,
        header: u64,
        indent: u8,
        foreign: u8,
        handling: bool,
    },
    /// After the exception line: its message may go on. `lines` so far; `record` whether the
    /// exception line itself started with a log record's prefix.
    Message { chain: u32, lines: u8, record: bool },
    /// The traceback ended on a blank line: a chain marker may follow, after a few lines of the
    /// message's tail (dynamo's "You can suppress this exception ..."); `lines` seen so far.
    Ended { chain: u32, lines: u8 },
    /// A chain marker was read: the next traceback is in `chain`; `handling`: the marker was
    /// "During handling of the above exception".
    Linked { chain: u32, handling: bool },
}

/// At most this many foreign lines inside the frames before the traceback is given up as cut.
const MAX_FOREIGN: u8 = 16;
/// At most this many lines of an exception message after its first.
const MAX_MESSAGE: u8 = 40;
/// At most this many lines between the end of a traceback and a chain marker.
const MAX_TAIL: u8 = 8;
/// At most this many ranks with an open traceback are tracked (bounded memory on a wild log).
const MAX_OPEN: usize = 1024;

const HEADER: &str = "Traceback (most recent call last):";
const MARKERS: [&str; 2] = [
    "The above exception was the direct cause of the following exception:",
    HANDLING,
];
const HANDLING: &str = "During handling of the above exception, another exception occurred:";

/// A phrase every one of [`MARKERS`] holds, searched for first.
static MARKER_WORD: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new("above exception"));

/// The tracebacks being read, per rank.
#[derive(Debug, Default)]
pub(super) struct Tracebacks {
    /// (rank, state) of each rank with an open traceback.
    open: Vec<(Option<u32>, State)>,
    /// The id of the next new chain.
    next_chain: u32,
}

/// Whether `text` is a Python `raise` statement: source code shown under a frame, never the
/// error itself, even where the frame and its indentation were lost (a log that starts inside a
/// traceback, a paste that dropped leading spaces).
pub(super) fn is_raise_statement(text: &str) -> bool {
    text.trim_start()
        .strip_prefix("raise ")
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
}

impl Tracebacks {
    /// Whether a traceback printed by `rank` is open (its frames or message are being read).
    pub(super) fn is_open(&self, rank: Option<u32>) -> bool {
        self.open.iter().any(|(r, _)| *r == rank)
    }

    /// The role of line `number`, `text` (normalised; `original` as printed), printed by `rank`;
    /// `class` is what the classifier made of `text`.
    pub(super) fn on_line(
        &mut self,
        number: u64,
        rank: Option<u32>,
        text: &str,
        original: &str,
        class: &LineClass,
    ) -> LineRole {
        let slot = self.open.iter().position(|(r, _)| *r == rank);
        // The common case, no open traceback and no header: nothing to do (the classifier
        // already matched the header text as python_exception, so no extra scan of the line).
        let maybe_header = class
            .hits
            .iter()
            .any(|h| h.signature == Some(Signature::PythonException))
            && text.contains(HEADER);
        let Some(slot) = slot else {
            if maybe_header {
                let chain = self.new_chain();
                let indent = indent_of(strip_gutter(text).0);
                self.set(rank, None, frames(chain, number, indent));
                return in_chain(chain);
            }
            return LineRole::default();
        };
        let state = self.open[slot].1;
        let (content, gutter) = strip_gutter(text);
        if maybe_header {
            // A new traceback: linked to the chain before it by a marker, or as a sub-exception
            // of a group; else a new chain.
            let (chain, handling) = match state {
                State::Linked { chain, handling } => (chain, handling),
                State::Frames { chain, .. } | State::Message { chain, .. } if gutter => {
                    (chain, false)
                }
                _ => (self.new_chain(), false),
            };
            let mut next = frames(chain, number, indent_of(content));
            if let State::Frames { handling: h, .. } = &mut next {
                *h = handling;
            }
            self.set(rank, Some(slot), next);
            return in_chain(chain);
        }
        // A gutter line with nothing after it (`+-+---- 1 ----`) is part of the group, not a
        // blank line.
        let blank = content.trim().is_empty() && !gutter;
        // Both markers hold the phrase: one search a line (the markers' own searches build a
        // searcher each, issue 28: 2 % of a watch's time).
        let marker = !blank
            && MARKER_WORD.find(content.as_bytes()).is_some()
            && MARKERS.iter().any(|m| content.contains(m));
        let handling = marker && content.contains(HANDLING);
        let next = match state {
            State::Frames {
                chain,
                header,
                indent,
                foreign,
                handling: handled,
            } => {
                if marker {
                    (Some(State::Linked { chain, handling }), in_chain(chain))
                } else if blank {
                    (Some(state), LineRole::default())
                } else if content.trim().is_empty() || indent_of(content) > indent {
                    let role = LineRole {
                        source: true,
                        chain: Some(chain),
                        ..LineRole::default()
                    };
                    (Some(state), role)
                } else if is_exception_line(content.trim_start()) {
                    let message = State::Message {
                        chain,
                        lines: 0,
                        record: starts_record(original),
                    };
                    let role = LineRole {
                        source: false,
                        chain: Some(chain),
                        exception_of: Some(header),
                        handled_before: handled,
                    };
                    (Some(message), role)
                } else if foreign >= MAX_FOREIGN {
                    (None, LineRole::default())
                } else {
                    let state = State::Frames {
                        chain,
                        header,
                        indent,
                        foreign: foreign + 1,
                        handling: handled,
                    };
                    (Some(state), LineRole::default())
                }
            }
            State::Message {
                chain,
                lines,
                record,
            } => {
                if marker {
                    (Some(State::Linked { chain, handling }), in_chain(chain))
                } else if blank {
                    (Some(State::Ended { chain, lines: 0 }), LineRole::default())
                } else if lines >= MAX_MESSAGE
                    || content.trim_start().starts_with("File \"")
                    || (!record && starts_record(original))
                {
                    (None, LineRole::default())
                } else {
                    let state = State::Message {
                        chain,
                        lines: lines + 1,
                        record,
                    };
                    (Some(state), in_chain(chain))
                }
            }
            State::Ended { chain, lines } => {
                if marker {
                    (Some(State::Linked { chain, handling }), in_chain(chain))
                } else if blank {
                    (Some(state), LineRole::default())
                } else if lines < MAX_TAIL {
                    let state = State::Ended {
                        chain,
                        lines: lines + 1,
                    };
                    (Some(state), LineRole::default())
                } else {
                    (None, LineRole::default())
                }
            }
            State::Linked { chain, .. } => {
                if marker {
                    (Some(State::Linked { chain, handling }), in_chain(chain))
                } else if blank {
                    (Some(state), LineRole::default())
                } else {
                    (None, LineRole::default())
                }
            }
        };
        let (state, role) = next;
        match state {
            Some(s) => self.open[slot].1 = s,
            None => {
                self.open.swap_remove(slot);
            }
        }
        role
    }

    fn new_chain(&mut self) -> u32 {
        let chain = self.next_chain;
        self.next_chain = self.next_chain.wrapping_add(1);
        chain
    }

    /// Sets `rank`'s state, in its `slot` if it has one.
    fn set(&mut self, rank: Option<u32>, slot: Option<usize>, state: State) {
        match slot {
            Some(i) => self.open[i].1 = state,
            None => {
                if self.open.len() >= MAX_OPEN {
                    self.open.remove(0);
                }
                self.open.push((rank, state));
            }
        }
    }
}

fn frames(chain: u32, header: u64, indent: u8) -> State {
    State::Frames {
        chain,
        header,
        indent,
        foreign: 0,
        handling: false,
    }
}

/// How far `text` is indented (capped).
fn indent_of(text: &str) -> u8 {
    let lead = text.len() - text.trim_start().len();
    u8::try_from(lead).unwrap_or(u8::MAX)
}

fn in_chain(chain: u32) -> LineRole {
    LineRole {
        chain: Some(chain),
        ..LineRole::default()
    }
}

/// An exception group's line without its gutter (`  | `, `    | `, `  +-+---- 1 ----`), and
/// whether it had one.
fn strip_gutter(text: &str) -> (&str, bool) {
    let t = text.trim_start();
    if let Some(rest) = t.strip_prefix('|') {
        return (rest.strip_prefix(' ').unwrap_or(rest), true);
    }
    if let Some(rest) = t.strip_prefix('+') {
        // A separator (`+-+----`) names nothing; `+ Exception Group Traceback` is a header.
        let rest = rest.strip_prefix(' ').unwrap_or("");
        return (rest, true);
    }
    (text, false)
}

/// Whether `line` reads as a Python exception line: a dotted name ending in a CamelCase class,
/// then `:` or the end
/// (`ValueError: bad`, `torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:`,
/// `KeyboardInterrupt`).
fn is_exception_line(line: &str) -> bool {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    let starts_well = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    // The class name is CamelCase (`OSError`, `torch.OutOfMemoryError`); a log line's level
    // (`INFO:`) or a function (`main: loading model`) is not.
    let class = name.rsplit('.').next().unwrap_or("");
    let camel = class.starts_with(|c: char| c.is_ascii_uppercase())
        && class.contains(|c: char| c.is_ascii_lowercase());
    let rest = line[name_end..].trim_end();
    starts_well && camel && (rest.is_empty() || rest.starts_with(':'))
}

/// Whether a line as printed starts a log record: a timestamp, a level, glog's `I0301`.
fn starts_record(original: &str) -> bool {
    let b = original.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let timestamp = (b.first() == Some(&b'[') && digit(1))
        || (digit(0) && digit(1) && digit(2) && digit(3) && b.get(4) == Some(&b'-'))
        || (digit(0) && digit(1) && b.get(2) == Some(&b':'));
    let glog = matches!(b.first(), Some(b'I' | b'W' | b'E' | b'F'))
        && (1..5).all(digit)
        && b.get(5) == Some(&b' ');
    let level = ["INFO", "WARNING", "WARN", "ERROR", "DEBUG", "CRITICAL"]
        .iter()
        .any(|l| {
            original
                .strip_prefix(l)
                .is_some_and(|r| r.starts_with([' ', ':', ']', '\t']))
        });
    timestamp || glog || level
}

#[cfg(test)]
mod tests;
