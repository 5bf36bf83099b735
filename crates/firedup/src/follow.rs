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
//! Only regular files are read: anything else at the path (a FIFO, a device, a directory) is
//! reported unreadable and never opened for reading in a way that could block; files are opened
//! non-blocking and checked after opening, so a FIFO swapped in at the last moment cannot hang
//! a poll either.
//!
//! Cost: [`LogFollower::poll_each`] hands each line over borrowed from the read buffer (a line
//! cut by a read boundary from the splitter's one buffer), so following copies no line;
//! [`LogFollower::poll`] collects the same events owned.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::judge::LogState;
use crate::launched_log::{FileId, FoundAt};
use crate::lines::{LineRef, LineSplitter, RawLine};
use crate::logpath::not_a_file;
use crate::logstart::LogStart;

const CHUNK: usize = 256 * 1024;
/// Most bytes read in one poll: a huge backlog is handed over in slices, which bounds memory
/// (the lines of one slice) and lets the event loop judge between slices.
const MAX_PER_POLL: u64 = 1024 * 1024;

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
}

/// Opens `path` for reading without blocking (a FIFO would block an ordinary open) and only if
/// it is a regular file: `Err` with the kind of thing it is otherwise.
fn open_regular(
    path: &Path,
) -> std::io::Result<std::result::Result<(File, std::fs::Metadata), &'static str>> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = f.metadata()?;
    Ok(match not_a_file(meta.file_type()) {
        Some(what) => Err(what),
        None => Ok((f, meta)),
    })
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
        }
    }

    /// Starts reading at the current end of an existing file (attach without replaying history),
    /// numbering the lines that follow as the file's lines.
    pub fn skip_existing(&mut self) {
        if let Ok(Some(end)) = crate::logstart::measure(&self.path) {
            self.start_at(&end);
        }
    }

    /// Starts where a launch's output begins (`LogStart`, recorded at launch): at its offset, numbered as the
    /// file's lines, if the path still names the file launched into; otherwise (rotated since)
    /// from the start of the file there now, all of which is newer than the launch.
    pub fn start_at(&mut self, start: &LogStart) {
        if let Ok(Ok((_, meta))) = open_regular(&self.path) {
            if (meta.dev(), meta.ino()) == (start.dev, start.ino) {
                self.resume_at(start.offset, start.line);
            }
        }
    }

    /// Starts with the file a launch wrote its output to, `launched` (recorded at launch, see
    /// [`crate::launched_log`]), from where the launch's output begins in it (`start`; byte 0,
    /// line 1 without one). While the path names that file, it is opened now (a rotation from
    /// here on is seen by [`LogFollower::poll`]). Otherwise the log was rotated before this
    /// follower first looked: the command may still be writing to the file it has open, so that
    /// file, as `find` finds it by its identity, is read as the retired file (the lines written
    /// before the rotation first), and the file now at the path is followed from its start as a
    /// new file. When the path did not name the launched file, a note for the user
    /// ([`LogFollower::take_note`]) says where it was found, or that it was not and its lines
    /// since the rotation cannot be judged.
    pub fn start_launched(
        &mut self,
        launched: FileId,
        start: Option<LogStart>,
        find: impl FnOnce() -> Option<(File, FoundAt)>,
    ) {
        self.note = self.open_launched(launched, start, find);
    }

    /// The note [`LogFollower::start_launched`] left, once.
    pub fn take_note(&mut self) -> Option<String> {
        self.note.take()
    }

    fn open_launched(
        &mut self,
        launched: FileId,
        start: Option<LogStart>,
        find: impl FnOnce() -> Option<(File, FoundAt)>,
    ) -> Option<String> {
        let (offset, line) = start.map_or((0, 1), |s| (s.offset, s.line));
        if let Ok(Ok((_, meta))) = open_regular(&self.path) {
            if FileId::of(&meta).is(&launched) {
                self.resume_at(offset, line);
                return None;
            }
        }
        let log = self.path.display();
        let Some((mut file, at)) = find() else {
            return Some(format!(
                "{log} is not the file this run was launched into, and that file is neither in its directory nor open in a process of the run: following the file now at {log}; what the run wrote to the old file after the rotation is not judged"
            ));
        };
        let mut splitter = LineSplitter::new(self.line_cap);
        // A file shorter than the launch's start was truncated since: all of it is newer.
        let from_start = file.metadata().is_ok_and(|m| m.len() >= offset)
            && file.seek(SeekFrom::Start(offset)).is_ok();
        if from_start {
            splitter.set_next_number(line);
        } else {
            let _ = file.seek(SeekFrom::Start(0));
        }
        self.retired = Some(Retired { file, splitter });
        Some(format!(
            "{log} was rotated before firedup followed it: reading the file the run was launched into ({at}) as well as the new {log}"
        ))
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
                            self.file = Some(f);
                            self.identity = Some((meta.dev(), meta.ino()));
                            self.offset = 0;
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
            while read_into(&mut old.file, &mut old.splitter, &mut self.buf, out)
                .is_ok_and(|(_, more)| more)
            {}
            old.splitter
                .finish_lines(&mut |l| out(FollowEventRef::Line(l)));
        }
        let splitter = std::mem::replace(&mut self.splitter, LineSplitter::new(self.line_cap));
        if let Some(file) = self.file.take() {
            self.retired = Some(Retired { file, splitter });
        }
        self.identity = None;
        self.offset = 0;
    }

    /// Reads what the writer appended to the retired file since the last poll.
    fn read_retired(&mut self, out: &mut Sink<'_>) -> bool {
        let Some(r) = self.retired.as_mut() else {
            return false;
        };
        match read_into(&mut r.file, &mut r.splitter, &mut self.buf, out) {
            Ok((_, more)) => more,
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
        let Some(file) = self.file.as_mut() else {
            return false;
        };
        match read_into(file, &mut self.splitter, &mut self.buf, out) {
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

/// Reads what `file` holds now (at most [`MAX_PER_POLL`]) into `splitter`: the bytes read and
/// whether more is waiting.
fn read_into(
    file: &mut File,
    splitter: &mut LineSplitter,
    buf: &mut [u8],
    out: &mut Sink<'_>,
) -> std::io::Result<(u64, bool)> {
    let mut read_now = 0u64;
    loop {
        match file.read(buf) {
            Ok(0) => return Ok((read_now, false)),
            Ok(n) => {
                read_now += n as u64;
                splitter.push_lines(&buf[..n], &mut |l| out(FollowEventRef::Line(l)));
                if read_now >= MAX_PER_POLL {
                    return Ok((read_now, true));
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            // Non-blocking open: nothing more now (only a non-regular file would say so).
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok((read_now, false)),
            Err(e) => return Err(e),
        }
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
mod tests;
