//! The log follower driven through a real temp file: appends, truncations, rotations (rename and
//! create) and deletions, with a poll after each. The lines it reports must be the lines a plain
//! splitter gives for what each file generation held, numbered from 1 in every new file, and it
//! must never panic.
//!
//! Input: a sequence of operations, each a tag byte and its arguments (see `Op::parse`).
#![no_main]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use firedup::follow::{FollowEvent, LogFollower};
use firedup::lines::{LineSplitter, RawLine};
use libfuzzer_sys::fuzz_target;

const CAP: usize = 16;

#[derive(Debug)]
enum Op<'a> {
    Append(&'a [u8]),
    /// Truncate to this fraction (/256) of the current length.
    Truncate(u8),
    /// Rename to `.1` and create a new file holding these bytes.
    Rotate(&'a [u8]),
    Delete,
}

impl<'a> Op<'a> {
    fn parse(mut input: &'a [u8]) -> Vec<Op<'a>> {
        let mut ops = Vec::new();
        while let [tag, rest @ ..] = input {
            input = rest;
            let bytes = |input: &mut &'a [u8]| -> &'a [u8] {
                let (n, rest) = match input {
                    [n, rest @ ..] => ((*n as usize % 48).min(rest.len()), rest),
                    [] => (0, *input),
                };
                *input = &rest[n..];
                &rest[..n]
            };
            let op = match tag % 8 {
                0..=3 => Op::Append(bytes(&mut input)),
                4 => match input {
                    [k, rest @ ..] => {
                        input = rest;
                        Op::Truncate(*k)
                    }
                    [] => break,
                },
                5 | 6 => Op::Rotate(bytes(&mut input)),
                _ => Op::Delete,
            };
            ops.push(op);
            if ops.len() >= 48 {
                break;
            }
        }
        ops
    }
}

fn scratch() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temp dir"))
        .path()
}

fn poll_all(f: &mut LogFollower, out: &mut Vec<RawLine>) {
    let mut events = Vec::new();
    while f.poll(&mut events) {}
    collect(events, out);
}

fn collect(events: Vec<FollowEvent>, out: &mut Vec<RawLine>) {
    out.extend(events.into_iter().filter_map(|e| match e {
        FollowEvent::Line(l) => Some(l),
        FollowEvent::State(_) => None,
    }));
}

fuzz_target!(|input: &[u8]| {
    static N: AtomicU64 = AtomicU64::new(0);
    let path: PathBuf = scratch().join(format!("log{}", N.fetch_add(1, Ordering::Relaxed)));
    let rotated = path.with_extension("1");
    let mut follower = LogFollower::new(&path, CAP);
    let mut model = LineSplitter::new(CAP);
    // The file renamed away or deleted stays open (its writer may still append): its held
    // partial line is emitted at the next rotation or at the end, as the follower documents.
    let mut retired: Option<LineSplitter> = None;
    let (mut got, mut want) = (Vec::new(), Vec::new());
    let mut content: Option<Vec<u8>> = None;
    let mut emit = |l: RawLine| want.push(l);

    poll_all(&mut follower, &mut got);
    for op in Op::parse(input) {
        match op {
            Op::Append(b) => {
                if content.is_none() {
                    // A new file: numbering starts again.
                    model.reset();
                }
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .unwrap();
                f.write_all(b).unwrap();
                content.get_or_insert_with(Vec::new).extend_from_slice(b);
                model.push(b, &mut emit);
            }
            Op::Truncate(k) => {
                let Some(c) = content.as_mut() else { continue };
                let len = c.len() * k as usize / 256;
                if len == c.len() {
                    continue;
                }
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .set_len(len as u64)
                    .unwrap();
                c.truncate(len);
                model.finish(&mut emit);
                model.reset();
                model.push(c, &mut emit);
            }
            Op::Rotate(b) => {
                if content.is_some() {
                    std::fs::rename(&path, &rotated).unwrap();
                    if let Some(mut old) = retired.take() {
                        old.finish(&mut emit);
                    }
                    retired = Some(std::mem::replace(&mut model, LineSplitter::new(CAP)));
                }
                std::fs::write(&path, b).unwrap();
                content = Some(b.to_vec());
                model.reset();
                model.push(b, &mut emit);
            }
            Op::Delete => {
                if content.take().is_some() {
                    std::fs::remove_file(&path).unwrap();
                    if let Some(mut old) = retired.take() {
                        old.finish(&mut emit);
                    }
                    retired = Some(std::mem::replace(&mut model, LineSplitter::new(CAP)));
                }
            }
        }
        poll_all(&mut follower, &mut got);
    }
    let mut events = Vec::new();
    follower.finish(&mut events);
    collect(events, &mut got);
    if let Some(mut old) = retired.take() {
        old.finish(&mut emit);
    }
    model.finish(&mut emit);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&rotated);
    assert_eq!(
        got, want,
        "the follower's lines differ from the file generations' lines"
    );
});
