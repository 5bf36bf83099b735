//! Following a log file by path: it may not exist yet (nor its directory), may appear late, be
//! truncated, rotated (renamed and recreated) or deleted.
//!
//! The follower does no waiting of its own: the event loop calls [`LogFollower::poll`] whenever
//! inotify says something changed in the log's directory (and on a slow safety-net timer, for file
//! systems that give no events), and the follower reads whatever is new. Memory is bounded by the
//! read chunk and the line cap, whatever the file size.
//!
//! Rotation: when the path stops naming the file being read (renamed away by logrotate's
//! `create` mode, or deleted), the follower reads that file to its end and keeps it open as the
//! *retired* file: a server that does not reopen its log keeps appending to it through its
//! descriptor, and those lines are still read (before the new file's, on each poll) until the
//! next rotation or [`LogFollower::finish`]. Meanwhile the new file at the path is followed from
//! its start, numbered from line 1. A rotation that happened before the follower first opened
//! the path (a loaded machine, a `watch RUN_ID` long after) is found by the launched file's
//! recorded identity ([`LogFollower::start_launched`]): that file becomes the retired file. The
//! retired file gives no inotify wake (events are routed by the log's name), so its new lines
//! arrive within the safety-net poll. A remote watch's resume point covers the file at the path
//! only.
//!
//! A log shared by runs: the follower of a launched run reads a file only up to where the run's
//! part of it ends ([`LogFollower::end_at`], by the file's identity); a launch's start is used
//! only while the bytes before it are still those measured at the launch (a copytruncate'd log
//! is read from its start); and a file found at the path later that is neither the launched one
//! nor born or written after the launch (an old file moved or linked into place) is followed
//! from its end ([`LogFollower::launched_at`]).
//!
//! Only regular files are read: anything else at the path (a FIFO, a device, a directory) is
//! reported unreadable and never opened for reading in a way that could block; files are opened
//! non-blocking and checked after opening, so a FIFO swapped in at the last moment cannot hang
//! a poll either.
//!
//! Cost: [`LogFollower::poll_each`] hands each line over borrowed from the read buffer (a line
//! cut by a read boundary from the splitter's one buffer), so following copies no line;
//! [`LogFollower::poll`] collects the same events owned.

use std::fs::File;
use std::io::{ErrorKind, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::judge::LogState;
use crate::launched_log::FileId;
use crate::lines::{LineRef, LineSplitter, RawLine};
use crate::logpath::not_a_file;

/// One read: as big as GNU grep's buffer; a bigger one reads no faster and is held for the watch.
const CHUNK: usize = 64 * 1024;
/// Most bytes read in one poll: a huge backlog is handed over in slices, which bounds memory
/// (the lines of one slice, ~4x the slice's size as observations on their way to the judge:
/// 1 MiB slices held ~9 MB of them at the peak following a big log) and lets the event loop
/// judge between slices.
pub(crate) const MAX_PER_POLL: u64 = 64 * 1024;

/// What a poll found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowEvent {
    /// A line of the log, with its number in the file, cut at the follower's line cap.
    Line(RawLine),
    /// The log's state changed (missing, readable, truncated, rotated, unreadable).
    State(LogState),
}

/// What a poll found, borrowed: a line's bytes point into the follower's read buffer, valid
/// for the call that hands it over ([`LogFollower::poll_each`]), so no line is copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowEventRef<'a> {
    /// A line of the log, with its number in the file, cut at the follower's line cap.
    Line(LineRef<'a>),
    /// The log's state changed (missing, readable, truncated, rotated, unreadable).
    State(LogState),
}

impl FollowEventRef<'_> {
    /// The event, owned.
    pub fn to_event(&self) -> FollowEvent {
        match self {
            FollowEventRef::Line(l) => FollowEvent::Line(l.to_raw()),
            FollowEventRef::State(s) => FollowEvent::State(s.clone()),
        }
    }
}

/// Where the follower hands what it found.
type Sink<'s> = dyn FnMut(FollowEventRef<'_>) + 's;

/// The file that was at the path before a rotation, still open: its writer may append to it.
#[derive(Debug)]
struct Retired {
    file: File,
    splitter: LineSplitter,
    /// Its identity (device, inode) and the bytes of it consumed: where the run's part ends.
    id: (u64, u64),
    offset: u64,
}

/// What the followed file holds at one look ([`LogFollower::held`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// (device, inode) of the file.
    pub identity: (u64, u64),
    /// Its length in bytes.
    pub len: u64,
    /// Its last modification: every byte it holds was written by then.
    pub modified: Option<std::time::SystemTime>,
}

/// Follows one log path.
#[derive(Debug)]
pub struct LogFollower {
    path: PathBuf,
    file: Option<File>,
    identity: Option<(u64, u64)>,
    offset: u64,
    splitter: LineSplitter,
    line_cap: usize,
    retired: Option<Retired>,
    last_state: Option<LogState>,
    buf: Vec<u8>,
    /// For the user, not yet taken ([`LogFollower::take_note`]).
    note: Option<String>,
    /// Where the run's part of a file ends ([`LogFollower::end_at`]): its identity and offset.
    end: Option<((u64, u64), u64)>,
    /// When the run was launched (Unix time) and the file it was launched into
    /// ([`LogFollower::launched_at`]).
    launch: Option<(f64, FileId)>,
}

impl LogFollower {
    /// A follower of `path` that keeps at most `line_cap` bytes of a line; nothing is opened
    /// before the first [`LogFollower::poll`].
    pub fn new(path: &Path, line_cap: usize) -> Self {
        LogFollower {
            path: path.to_path_buf(),
            file: None,
            identity: None,
            offset: 0,
            splitter: LineSplitter::new(line_cap),
            line_cap,
            retired: None,
            last_state: None,
            buf: vec![0; CHUNK],
            note: None,
            end: None,
            launch: None,
        }
    }

    /// Reads the file `file` only up to byte `offset`: where the run's part of a shared log ends
    /// (see [`crate::rundir::RunDir::log_part_end`]); what follows is another run's.
    pub fn end_at(&mut self, file: FileId, offset: u64) {
        self.end = Some(((file.dev, file.ino), offset));
    }

    /// The run was launched at `unix` into the file `file`: a file found at the path later that
    /// is not that file, was born before the launch and not written since (an old file moved or
    /// linked into place) holds nothing of the run's, and is followed from its end.
    pub fn launched_at(&mut self, unix: f64, file: FileId) {
        self.launch = Some((unix, file));
    }

    /// How many bytes of the file `id` may still be read from `offset` (`None`: no end known).
    fn room(&self, id: (u64, u64), offset: u64) -> Option<u64> {
        self.end
            .filter(|(end_id, _)| *end_id == id)
            .map(|(_, end)| end.saturating_sub(offset))
    }

    /// Whether `meta` is a file older than the launch (nothing written to it since), other than
    /// the launched one.
    fn older_than_launch(&self, meta: &std::fs::Metadata) -> bool {
        let Some((at, launched)) = self.launch else {
            return false;
        };
        let unix = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        };
        // Only a file provably all older: last written before the launch, and born before it
        // where the file system knows (a file written since may hold the run's lines: read).
        let written_before = meta.modified().map(unix).is_ok_and(|m| m < at);
        let born_before = meta.created().map(unix).is_ok_and(|b| b < at);
        let born_unknown = meta.created().is_err();
        !FileId::of(meta).is(&launched) && written_before && (born_before || born_unknown)
    }

    /// Resumes where an earlier follower of the same file left off: at byte `offset` (a line
    /// boundary, see [`LogFollower::resume_point`]) with line number `next_line`. A file now
    /// shorter than `offset` is treated as truncated on the next poll.
    pub fn resume_at(&mut self, offset: u64, next_line: u64) {
        if let Ok(Ok((mut f, meta))) = open_regular(&self.path) {
            if meta.len() >= offset && f.seek(SeekFrom::Start(offset)).is_ok() {
                self.identity = Some((meta.dev(), meta.ino()));
                self.offset = offset;
                self.file = Some(f);
                self.splitter.set_next_number(next_line);
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

    /// The log path being followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of the current file consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// What the file being read holds now, by its open descriptor (not its path): `None`
    /// before it is opened, or while a rotated-away file is still read (its lines come first,
    /// and its length is not this one's).
    pub fn held(&self) -> Option<Held> {
        if self.retired.is_some() {
            return None;
        }
        let meta = self.file.as_ref()?.metadata().ok()?;
        Some(Held {
            identity: (meta.dev(), meta.ino()),
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }

    /// Reads what is new. Returns true when more data is waiting (call again soon).
    pub fn poll(&mut self, out: &mut Vec<FollowEvent>) -> bool {
        self.poll_each(&mut |ev| out.push(ev.to_event()))
    }

    /// [`LogFollower::poll`], each event handed to `out` as it is found, a line borrowed.
    pub fn poll_each(&mut self, out: &mut Sink<'_>) -> bool {
        // The rotated-away file first: its lines were written before the new file's.
        let retired_more = self.read_retired(out);
        match std::fs::metadata(&self.path) {
            Ok(meta) if !meta.is_file() => {
                // The file that was here is gone: read what it still holds, then let it go, so
                // that it is not reported readable again on every poll.
                self.drain_open(out);
                if self.file.take().is_some() {
                    self.flush_partial(out);
                    self.splitter.reset();
                    self.identity = None;
                }
                let what = not_a_file(meta.file_type()).unwrap_or("not a regular file");
                self.set_state(
                    LogState::Unreadable(format!("the log path is {what}, not a regular file")),
                    out,
                );
                return retired_more;
            }
            Ok(meta) => {
                let id = (meta.dev(), meta.ino());
                if self.identity.is_some() && self.identity != Some(id) {
                    // Rotated: finish the old file (and keep it: its writer may go on), then
                    // start the new one from its beginning.
                    self.drain_open(out);
                    self.retire_current(out);
                    self.set_state(LogState::Rotated, out);
                }
                if self.file.is_none() {
                    match open_regular(&self.path) {
                        Ok(Ok((f, meta))) => {
                            self.identity = Some((meta.dev(), meta.ino()));
                            self.offset = 0;
                            if self.older_than_launch(&meta) {
                                // An old file moved or linked into place: what it holds is
                                // not the run's.
                                self.skip_to_end_of(&f);
                            }
                            self.file = Some(f);
                        }
                        Ok(Err(what)) => {
                            let reason = format!("the log path is {what}, not a regular file");
                            self.set_state(LogState::Unreadable(reason), out);
                            return retired_more;
                        }
                        Err(e) if e.kind() == ErrorKind::NotFound => {
                            self.set_missing(out);
                            return retired_more;
                        }
                        Err(e) => {
                            self.set_state(LogState::Unreadable(describe_io(&e)), out);
                            return retired_more;
                        }
                    }
                }
                if meta.len() < self.offset && self.identity == Some(id) {
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
                // Deleted, renamed away (or not yet created). Whatever the open file holds is
                // read first, and it stays open as the retired file.
                self.drain_open(out);
                if self.file.is_some() {
                    self.retire_current(out);
                }
                self.set_missing(out);
                return retired_more;
            }
            Err(e) => {
                self.set_state(LogState::Unreadable(describe_io(&e)), out);
                return retired_more;
            }
        }
        self.read_available(out) || retired_more
    }

    /// Emits held partial lines: call once the writer has exited.
    pub fn finish(&mut self, out: &mut Vec<FollowEvent>) {
        self.finish_each(&mut |ev| out.push(ev.to_event()));
    }

    /// [`LogFollower::finish`], each event handed to `out` as it is found, a line borrowed.
    pub fn finish_each(&mut self, out: &mut Sink<'_>) {
        while self.poll_each(out) {}
        if let Some(mut r) = self.retired.take() {
            r.splitter
                .finish_lines(&mut |l| out(FollowEventRef::Line(l)));
        }
        self.flush_partial(out);
    }

    /// Moves the open file into `retired` (finishing an older retired file first) and starts a
    /// fresh splitter: a file created at the path later is a new file, numbered from 1.
    fn retire_current(&mut self, out: &mut Sink<'_>) {
        if let Some(mut old) = self.retired.take() {
            loop {
                let room = self.room(old.id, old.offset);
                match read_into(&mut old.file, &mut old.splitter, &mut self.buf, out, room) {
                    Ok((n, more)) => {
                        old.offset += n;
                        if !more {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
            old.splitter
                .finish_lines(&mut |l| out(FollowEventRef::Line(l)));
        }
        let splitter = std::mem::replace(&mut self.splitter, LineSplitter::new(self.line_cap));
        if let Some(file) = self.file.take() {
            self.retired = Some(Retired {
                file,
                splitter,
                id: self.identity.unwrap_or_default(),
                offset: self.offset,
            });
        }
        self.identity = None;
        self.offset = 0;
    }

    /// Reads what the writer appended to the retired file since the last poll.
    fn read_retired(&mut self, out: &mut Sink<'_>) -> bool {
        let room = match self.retired.as_ref() {
            Some(r) => self.room(r.id, r.offset),
            None => return false,
        };
        let Some(r) = self.retired.as_mut() else {
            return false;
        };
        match read_into(&mut r.file, &mut r.splitter, &mut self.buf, out, room) {
            Ok((n, more)) => {
                r.offset += n;
                more
            }
            Err(_) => {
                // It cannot be read any more: what it held was read; let it go.
                if let Some(mut r) = self.retired.take() {
                    r.splitter
                        .finish_lines(&mut |l| out(FollowEventRef::Line(l)));
                }
                false
            }
        }
    }

    /// Positions at the end of `f` (just opened at the path), numbering its lines from there.
    fn skip_to_end_of(&mut self, f: &File) {
        let Ok(reader) = f.try_clone() else {
            return;
        };
        // The clone shares the file position: measuring leaves it at the end.
        if let Ok(Some(end)) = crate::logstart::measure_file(reader) {
            self.offset = end.offset;
            self.splitter.set_next_number(end.line);
        }
    }

    fn set_missing(&mut self, out: &mut Sink<'_>) {
        let dir_exists = self
            .path
            .parent()
            .is_none_or(|d| d.as_os_str().is_empty() || d.is_dir());
        self.set_state(LogState::Missing { dir_exists }, out);
    }

    fn set_state(&mut self, state: LogState, out: &mut Sink<'_>) {
        let changed = match (&self.last_state, &state) {
            (Some(a), b) => a != b || matches!(b, LogState::Truncated | LogState::Rotated),
            (None, _) => true,
        };
        if changed {
            out(FollowEventRef::State(state.clone()));
        }
        self.last_state = Some(state);
    }

    fn flush_partial(&mut self, out: &mut Sink<'_>) {
        self.splitter
            .finish_lines(&mut |l| out(FollowEventRef::Line(l)));
    }

    fn drain_open(&mut self, out: &mut Sink<'_>) {
        if self.file.is_some() {
            while self.read_available(out) {}
        }
    }

    fn read_available(&mut self, out: &mut Sink<'_>) -> bool {
        let room = self.identity.and_then(|id| self.room(id, self.offset));
        let Some(file) = self.file.as_mut() else {
            return false;
        };
        match read_into(file, &mut self.splitter, &mut self.buf, out, room) {
            Ok((n, more)) => {
                self.offset += n;
                if more {
                    return true;
                }
            }
            Err(e) => {
                let state = LogState::Unreadable(describe_io(&e));
                self.set_state(state, out);
                return false;
            }
        }
        if !matches!(self.last_state, Some(LogState::Readable)) {
            self.set_state(LogState::Readable, out);
        }
        false
    }
}

mod reading;
mod start;
pub use reading::describe_io;
use reading::{open_regular, read_into};

#[cfg(test)]
mod tests;
