//! Reading the log, each line stamped with when the log is known to have held it: the log's own
//! order, not the moment firedup got round to reading it (issue 24, item 4).
//!
//! Why: a reader that falls behind (a log written at hundreds of MB/s, handed over in slices of
//! [`crate::follow`]'s read limit) or that did not run for a while (firedup stopped with Ctrl-Z,
//! its machine paused) reads lines long after they were written. Stamped with the time of the
//! read, a READY line written before the deadline would be judged after it (`timed_out` with
//! READY in the file), and the time of readiness reported would be firedup's, not the server's.
//!
//! How: before each read the length of the open file is noted with the time (a mark); the bytes
//! below a mark were written by its time, so a slice is stamped with the earliest mark that
//! covers its end. The file's modification time bounds every byte it holds as well, which dates
//! what a late attach finds already written (`watch RUN_ID` of a server that printed READY a
//! minute ago is ready at that minute, not at the attach). Stamps never go backwards, and never
//! later than the read. While a slice leaves more unread ([`LogReader::backlog`]), nothing else
//! is observed and the judge is not ticked: no deadline is decided before the log has been read
//! to its end.

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime};

use super::ObserveSettings;
use super::followed_line::follow_observation;
use crate::follow::{FollowEventRef, LogFollower};
use crate::judge::Observation;
use crate::launched_log;
use crate::target::Target;

/// The follower of `target`'s log, set to begin where the watch begins: this run's part of a
/// log shared over time, from its launch's start (or where a remote watch resumes, or the end).
pub(super) fn follower_for(target: &Target, settings: &ObserveSettings) -> LogFollower {
    let mut follower = LogFollower::new(&target.log, settings.line_cap);
    // A log shared over time: this run's part of it, and no older file put at its path.
    if let (Some(run), Some((id, _))) = (&target.run, target.launched_log()) {
        if let Ok(meta) = run.meta() {
            follower.launched_at(meta.started_at, id);
        }
        if let Some(end) = run.log_part_end(&id) {
            follower.end_at(id, end);
        }
    }
    if let Some((offset, line)) = settings.resume {
        follower.resume_at(offset, line);
    } else if let Some((id, start)) = target
        .launched_log()
        .filter(|_| target.log_start.is_some() || !settings.from_end)
    {
        let find = || launched_log::find_launched(id, &target.run_id, &target.log);
        follower.start_launched(id, start, find);
    } else if settings.from_end {
        follower.skip_existing();
    }
    follower
}

/// How far a file's modification time may lag the write it records: one tick of the kernel's
/// coarse clock (4 ms at 250 Hz, 10 ms at 100 Hz).
const MODIFIED_GRAIN: Duration = Duration::from_millis(10);

/// The length a file had at a time.
#[derive(Debug, Clone, Copy)]
struct Mark {
    identity: (u64, u64),
    len: u64,
    at: Duration,
}

/// The follower and the marks that date what it reads.
#[derive(Debug)]
pub(super) struct LogReader {
    follower: LogFollower,
    /// Time zero of the stamps.
    start: Instant,
    /// Marks of the file being read, oldest (and shortest) first; those the reading has passed
    /// are dropped.
    marks: VecDeque<Mark>,
    last_stamp: Duration,
    backlog: bool,
    /// The latest time by which everything the file held has been read (the latest mark the
    /// reading has passed).
    through: Option<Duration>,
}

impl LogReader {
    pub(super) fn new(follower: LogFollower, start: Instant) -> LogReader {
        LogReader {
            follower,
            start,
            marks: VecDeque::new(),
            last_stamp: Duration::ZERO,
            backlog: false,
            through: None,
        }
    }

    /// The note the follower left (see [`LogFollower::take_note`]), once.
    pub(super) fn take_note(&mut self) -> Option<String> {
        self.follower.take_note()
    }

    /// See [`LogFollower::resume_point`].
    pub(super) fn resume_point(&self) -> (u64, u64) {
        self.follower.resume_point()
    }

    /// The last read stopped at its size limit: more is waiting.
    pub(super) fn backlog(&self) -> bool {
        self.backlog
    }

    /// While behind: the latest time by which all the log held has been read, so a deadline up
    /// to then may be decided (a log written faster than it is read forever still gets its
    /// verdicts). `None` before any such time is known.
    pub(super) fn read_through(&self) -> Option<Duration> {
        self.through
    }

    /// Reads one slice of what is new; its observations, stamped, go to `out`. Returns whether
    /// a line was read.
    pub(super) fn read(&mut self, out: &mut Vec<(Duration, Observation)>) -> bool {
        self.mark();
        let from = out.len();
        self.backlog = self
            .follower
            .poll_each(&mut |ev| out.push((Duration::ZERO, follow_observation(ev))));
        self.emit(from, out)
    }

    /// Reads the log to its end and flushes a partial last line (the writer is gone);
    /// `lines_only` leaves out the file's state changes.
    pub(super) fn finish(&mut self, lines_only: bool, out: &mut Vec<(Duration, Observation)>) {
        self.mark();
        let from = out.len();
        self.follower.finish_each(&mut |ev| {
            if !lines_only || matches!(ev, FollowEventRef::Line(_)) {
                out.push((Duration::ZERO, follow_observation(ev)));
            }
        });
        self.backlog = false;
        self.emit(from, out);
    }

    /// Stamps the observations read into `out` from `from` on (each with when the bytes read
    /// were known to be in the file: known only once they are read; pushed straight into `out`,
    /// with no batch of their own to allocate at every read); whether a line is among them.
    fn emit(&mut self, from: usize, out: &mut [(Duration, Observation)]) -> bool {
        let observed = &mut out[from..];
        if observed.is_empty() {
            return false;
        }
        let at = self.stamp();
        let mut lines = false;
        for (stamp, o) in observed {
            *stamp = at;
            lines |= matches!(o, Observation::Line { .. });
        }
        lines
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Notes the open file's length now.
    fn mark(&mut self) {
        let Some(held) = self.follower.held() else {
            return;
        };
        let at = self.now();
        // Another file, or this one truncated (copytruncate): the old marks date other bytes.
        if self
            .marks
            .back()
            .is_some_and(|m| m.identity != held.identity || held.len < m.len)
        {
            self.marks.clear();
        }
        if self.marks.back().is_none_or(|m| held.len > m.len) {
            self.marks.push_back(Mark {
                identity: held.identity,
                len: held.len,
                at,
            });
        }
    }

    /// When the bytes read so far were known to be in the file: the earliest mark that covers
    /// them, or the file's modification time, or now.
    fn stamp(&mut self) -> Duration {
        let now = self.now();
        let mut at = now;
        if let Some(held) = self.follower.held() {
            let end = self.follower.offset();
            self.marks
                .retain(|m| m.identity == held.identity && m.len <= held.len);
            if let Some(m) = self.marks.iter().rev().find(|m| m.len <= end) {
                self.through = Some(m.at);
            }
            while self.marks.front().is_some_and(|m| m.len < end) {
                self.marks.pop_front();
            }
            if let Some(m) = self.marks.front() {
                at = at.min(m.at);
            }
            // A modification time in the future (another clock) says nothing.
            let age = held
                .modified
                .and_then(|m| SystemTime::now().duration_since(m).ok());
            if let (true, Some(age)) = (held.len >= end, age) {
                // The kernel stamps a file with its coarse clock (the last tick): the write
                // came at most a tick after that.
                at = at.min(now.saturating_sub(age) + MODIFIED_GRAIN);
            }
        }
        at = at.max(self.last_stamp);
        self.last_stamp = at;
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lines_at(out: &[(Duration, Observation)]) -> Vec<(Duration, String)> {
        out.iter()
            .filter_map(|(at, o)| match o {
                Observation::Line { text, .. } => Some((*at, text.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_backlog_is_stamped_with_when_the_file_held_it_not_with_when_it_was_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.log");
        let mut f = std::fs::File::create(&path).unwrap();
        // More than one slice of the follower's read limit, then READY.
        let filler = format!("{}\n", "x".repeat(1023));
        for _ in 0..3 * 1024 {
            f.write_all(filler.as_bytes()).unwrap();
        }
        f.write_all(b"READY\n").unwrap();
        let mut reader = LogReader::new(LogFollower::new(&path, 4096), Instant::now());
        let mut out = Vec::new();
        assert!(reader.read(&mut out));
        assert!(reader.backlog());
        let first_slice = lines_at(&out).last().unwrap().0;
        // Time passes before the rest is read.
        std::thread::sleep(Duration::from_millis(500));
        out.clear();
        while reader.backlog() {
            reader.read(&mut out);
        }
        let lines = lines_at(&out);
        let (ready_at, text) = lines.last().unwrap();
        assert_eq!(text, "READY");
        // The whole file was there (and so dated) by the first look, not half a second later
        // (the margin: the two clocks a stamp is computed from are read one after the other).
        assert!(
            *ready_at < first_slice + Duration::from_millis(250),
            "{lines:?}"
        );
        // Stamps never go backwards.
        assert!(lines.windows(2).all(|w| w[0].0 <= w[1].0));
    }

    #[test]
    fn a_reader_that_never_catches_up_still_says_up_to_when_it_has_read_everything() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.log");
        let mut f = std::fs::File::create(&path).unwrap();
        let filler = format!("{}\n", "x".repeat(1023));
        // One slice of the follower's reads (a poll's limit).
        let write_slice = |f: &mut std::fs::File| {
            for _ in 0..crate::follow::MAX_PER_POLL / 1024 {
                f.write_all(filler.as_bytes()).unwrap();
            }
        };
        for _ in 0..3 {
            write_slice(&mut f);
        }
        let mut reader = LogReader::new(LogFollower::new(&path, 4096), Instant::now());
        let mut out = Vec::new();
        // Each read takes one slice while the writer keeps ahead: the backlog never ends.
        for _ in 0..4 {
            reader.read(&mut out);
            write_slice(&mut f);
            assert!(reader.backlog());
        }
        // Yet what the file held at an earlier look has all been read: the judge may be
        // ticked up to then (without it, no deadline would ever be decided).
        let through = reader.read_through().expect("a time read through");
        assert!(through <= reader.now(), "{through:?}");
    }

    #[test]
    fn what_a_late_attach_finds_written_is_dated_by_the_files_modification_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.log");
        std::fs::write(&path, "loading\nREADY\n").unwrap();
        let written = SystemTime::now() - Duration::from_secs(40);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(written)
            .unwrap();
        // The watch's clock counts from a launch 60 s ago.
        let start = Instant::now() - Duration::from_secs(60);
        let mut reader = LogReader::new(LogFollower::new(&path, 4096), start);
        let mut out = Vec::new();
        reader.read(&mut out);
        let lines = lines_at(&out);
        assert_eq!(lines.len(), 2, "{lines:?}");
        // 20 s after the launch, not at the read 60 s after it (the margin: the two clocks a
        // stamp is computed from are read one after the other).
        let at = lines[1].0.as_secs_f64();
        assert!((15.0..25.0).contains(&at), "{lines:?}");
    }
}
