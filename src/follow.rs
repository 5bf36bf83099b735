//! Following a log file by path: it may not exist yet (nor its directory), may appear late, be
//! truncated, rotated (renamed and recreated) or deleted.
//!
//! The follower does no waiting of its own: the event loop calls [`LogFollower::poll`] whenever
//! inotify says something changed in the log's directory (and on a slow safety-net timer, for file
//! systems that give no events), and the follower reads whatever is new. Memory is bounded by the
//! read chunk and the line cap, whatever the file size.

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::judge::LogState;
use crate::lines::{LineSplitter, RawLine};

const CHUNK: usize = 256 * 1024;
/// Most bytes read in one poll: a huge backlog is handed over in slices, which bounds memory
/// (the lines of one slice) and lets the event loop judge between slices.
const MAX_PER_POLL: u64 = 1024 * 1024;

/// What a poll found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowEvent {
    Line(RawLine),
    State(LogState),
}

/// Follows one log path.
#[derive(Debug)]
pub struct LogFollower {
    path: PathBuf,
    file: Option<File>,
    identity: Option<(u64, u64)>,
    offset: u64,
    splitter: LineSplitter,
    last_state: Option<LogState>,
    buf: Vec<u8>,
}

impl LogFollower {
    pub fn new(path: &Path, line_cap: usize) -> Self {
        LogFollower {
            path: path.to_path_buf(),
            file: None,
            identity: None,
            offset: 0,
            splitter: LineSplitter::new(line_cap),
            last_state: None,
            buf: vec![0; CHUNK],
        }
    }

    /// Starts reading at the current end of an existing file (attach without replaying history).
    pub fn skip_existing(&mut self) {
        if let Ok(meta) = std::fs::metadata(&self.path) {
            if meta.is_file() {
                if let Ok(f) = File::open(&self.path) {
                    self.identity = Some((meta.dev(), meta.ino()));
                    self.offset = meta.len();
                    self.file = Some(f);
                }
            }
        }
    }

    /// Resumes where an earlier follower of the same file left off: at byte `offset` (a line
    /// boundary, see [`LogFollower::resume_point`]) with line number `next_line`. A file now
    /// shorter than `offset` is treated as truncated on the next poll.
    pub fn resume_at(&mut self, offset: u64, next_line: u64) {
        if let Ok(meta) = std::fs::metadata(&self.path) {
            if meta.is_file() {
                if let Ok(mut f) = File::open(&self.path) {
                    if meta.len() >= offset && f.seek(SeekFrom::Start(offset)).is_ok() {
                        self.identity = Some((meta.dev(), meta.ino()));
                        self.offset = offset;
                        self.file = Some(f);
                        self.splitter.set_next_number(next_line);
                    }
                }
            }
        }
    }

    /// Where a new follower would resume to produce exactly the lines not yet emitted: the byte
    /// offset of the last line boundary and the number of the next line.
    pub fn resume_point(&self) -> (u64, u64) {
        (
            self.offset.saturating_sub(self.splitter.held_bytes()),
            self.splitter.next_number(),
        )
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of the current file consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads what is new. Returns true when more data is waiting (call again soon).
    pub fn poll(&mut self, out: &mut Vec<FollowEvent>) -> bool {
        match std::fs::metadata(&self.path) {
            Ok(meta) if meta.is_dir() => {
                // The file that was here is gone: read what it still holds, then let it go, so
                // that it is not reported readable again on every poll.
                self.drain_open(out);
                if self.file.take().is_some() {
                    self.flush_partial(out);
                    self.splitter.reset();
                    self.identity = None;
                }
                self.set_state(
                    LogState::Unreadable("the log path is a directory".into()),
                    out,
                );
                return false;
            }
            Ok(meta) => {
                let id = (meta.dev(), meta.ino());
                if self.identity.is_some() && self.identity != Some(id) {
                    // Rotated: finish the old file, then start the new one from its beginning.
                    self.drain_open(out);
                    self.flush_partial(out);
                    self.file = None;
                    self.identity = None;
                    self.offset = 0;
                    self.splitter.reset();
                    self.set_state(LogState::Rotated, out);
                }
                if self.file.is_none() {
                    match File::open(&self.path) {
                        Ok(f) => {
                            self.file = Some(f);
                            self.identity = Some(id);
                            self.offset = 0;
                        }
                        Err(e) if e.kind() == ErrorKind::NotFound => {
                            self.set_missing(out);
                            return false;
                        }
                        Err(e) => {
                            self.set_state(LogState::Unreadable(describe_io(&e)), out);
                            return false;
                        }
                    }
                }
                if meta.len() < self.offset {
                    self.flush_partial(out);
                    self.offset = 0;
                    if let Some(f) = self.file.as_mut() {
                        let _ = f.seek(SeekFrom::Start(0));
                    }
                    self.splitter.reset();
                    self.set_state(LogState::Truncated, out);
                }
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                // Deleted (or not yet created). Whatever the open file still holds is read first.
                self.drain_open(out);
                if self.file.is_some() {
                    self.flush_partial(out);
                    // A file created at this path later is a new file: numbered from 1.
                    self.splitter.reset();
                }
                self.file = None;
                self.identity = None;
                self.set_missing(out);
                return false;
            }
            Err(e) => {
                self.set_state(LogState::Unreadable(describe_io(&e)), out);
                return false;
            }
        }
        self.read_available(out)
    }

    /// Emits a held partial line: call once the writer has exited.
    pub fn finish(&mut self, out: &mut Vec<FollowEvent>) {
        while self.poll(out) {}
        self.flush_partial(out);
    }

    fn set_missing(&mut self, out: &mut Vec<FollowEvent>) {
        let dir_exists = self
            .path
            .parent()
            .is_none_or(|d| d.as_os_str().is_empty() || d.is_dir());
        self.set_state(LogState::Missing { dir_exists }, out);
    }

    fn set_state(&mut self, state: LogState, out: &mut Vec<FollowEvent>) {
        let changed = match (&self.last_state, &state) {
            (Some(a), b) => a != b || matches!(b, LogState::Truncated | LogState::Rotated),
            (None, _) => true,
        };
        if changed {
            out.push(FollowEvent::State(state.clone()));
        }
        self.last_state = Some(state);
    }

    fn flush_partial(&mut self, out: &mut Vec<FollowEvent>) {
        self.splitter
            .finish(&mut |l| out.push(FollowEvent::Line(l)));
    }

    fn drain_open(&mut self, out: &mut Vec<FollowEvent>) {
        if self.file.is_some() {
            while self.read_available(out) {}
        }
    }

    fn read_available(&mut self, out: &mut Vec<FollowEvent>) -> bool {
        let Some(file) = self.file.as_mut() else {
            return false;
        };
        let mut read_now = 0u64;
        loop {
            match file.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => {
                    self.offset += n as u64;
                    read_now += n as u64;
                    let splitter = &mut self.splitter;
                    splitter.push(&self.buf[..n], &mut |l| out.push(FollowEvent::Line(l)));
                    if read_now >= MAX_PER_POLL {
                        return true;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    let state = LogState::Unreadable(describe_io(&e));
                    self.set_state(state, out);
                    return false;
                }
            }
        }
        if !matches!(self.last_state, Some(LogState::Readable)) {
            self.set_state(LogState::Readable, out);
        }
        false
    }
}

/// One phrase for an I/O error, as a person would say it.
pub fn describe_io(e: &std::io::Error) -> String {
    match e.kind() {
        ErrorKind::PermissionDenied => "permission denied".into(),
        ErrorKind::NotFound => "no such file".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lines(events: &[FollowEvent]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                FollowEvent::Line(l) => Some(String::from_utf8_lossy(&l.bytes).into_owned()),
                _ => None,
            })
            .collect()
    }

    fn states(events: &[FollowEvent]) -> Vec<LogState> {
        events
            .iter()
            .filter_map(|e| match e {
                FollowEvent::State(s) => Some(s.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn missing_then_appears_then_grows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/server.log");
        let mut f = LogFollower::new(&path, 1024);
        let mut out = Vec::new();
        f.poll(&mut out);
        assert_eq!(states(&out), vec![LogState::Missing { dir_exists: false }]);
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let mut w = std::fs::File::create(&path).unwrap();
        w.write_all(b"one\ntw").unwrap();
        out.clear();
        f.poll(&mut out);
        assert_eq!(lines(&out), vec!["one"]);
        assert_eq!(states(&out), vec![LogState::Readable]);
        w.write_all(b"o\n").unwrap();
        out.clear();
        f.poll(&mut out);
        assert_eq!(lines(&out), vec!["two"]);
    }

    #[test]
    fn truncation_restarts_from_the_top() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, b"aaaa\nbbbb\n").unwrap();
        let mut f = LogFollower::new(&path, 1024);
        let mut out = Vec::new();
        f.poll(&mut out);
        std::fs::write(&path, b"c\n").unwrap();
        out.clear();
        f.poll(&mut out);
        assert_eq!(states(&out)[0], LogState::Truncated);
        assert_eq!(lines(&out), vec!["c"]);
    }

    #[test]
    fn rotation_reads_the_old_file_to_its_end_then_the_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut w = std::fs::File::create(&path).unwrap();
        w.write_all(b"first\n").unwrap();
        let mut f = LogFollower::new(&path, 1024);
        let mut out = Vec::new();
        f.poll(&mut out);
        w.write_all(b"last of old\n").unwrap();
        std::fs::rename(&path, dir.path().join("log.1")).unwrap();
        std::fs::write(&path, b"new\n").unwrap();
        out.clear();
        f.poll(&mut out);
        assert_eq!(lines(&out), vec!["last of old", "new"]);
        assert!(states(&out).contains(&LogState::Rotated));
    }

    #[test]
    fn deleted_while_open_keeps_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut w = std::fs::File::create(&path).unwrap();
        w.write_all(b"a\n").unwrap();
        let mut f = LogFollower::new(&path, 1024);
        let mut out = Vec::new();
        f.poll(&mut out);
        w.write_all(b"b\npartial").unwrap();
        std::fs::remove_file(&path).unwrap();
        out.clear();
        f.poll(&mut out);
        assert_eq!(lines(&out), vec!["b", "partial"]);
        assert!(matches!(
            states(&out).last(),
            Some(LogState::Missing { .. })
        ));
    }

    #[test]
    fn a_file_recreated_after_deletion_is_numbered_from_one() {
        // Found by the `follow` fuzz target: the new file's lines were numbered on from the old one.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, b"one\ntwo\n").unwrap();
        let mut f = LogFollower::new(&path, 1024);
        let mut out = Vec::new();
        f.poll(&mut out);
        std::fs::remove_file(&path).unwrap();
        f.poll(&mut out);
        std::fs::write(&path, b"fresh\n").unwrap();
        out.clear();
        f.poll(&mut out);
        let numbered: Vec<(u64, String)> = out
            .iter()
            .filter_map(|e| match e {
                FollowEvent::Line(l) => Some((l.number, String::from_utf8_lossy(&l.bytes).into())),
                _ => None,
            })
            .collect();
        assert_eq!(numbered, vec![(1, "fresh".to_string())]);
    }

    #[test]
    fn a_log_replaced_by_a_directory_stays_unreadable() {
        // Found by tests/faults.rs (log/replaced_by_a_directory): the old file, still open, was
        // reported readable again on every poll, so the log never stayed unreadable long enough
        // for `monitor_error`.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, b"loading\n").unwrap();
        let mut f = LogFollower::new(&path, 1024);
        let mut out = Vec::new();
        f.poll(&mut out);
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        out.clear();
        f.poll(&mut out);
        assert!(matches!(states(&out).last(), Some(LogState::Unreadable(_))));
        for _ in 0..3 {
            out.clear();
            f.poll(&mut out);
            assert!(!states(&out).contains(&LogState::Readable), "{out:?}");
        }
    }

    #[test]
    fn a_directory_is_unreadable_not_missing() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = LogFollower::new(dir.path(), 1024);
        let mut out = Vec::new();
        f.poll(&mut out);
        assert!(matches!(&states(&out)[0], LogState::Unreadable(r) if r.contains("directory")));
    }
}
