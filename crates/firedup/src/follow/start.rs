//! Where a follower starts: at a launch's start in its log (checked against truncation), at the
//! end of what a file holds, or with the launched file found again after a rotation.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;

use super::reading::open_regular;
use super::{LogFollower, Retired};
use crate::launched_log::{FileId, FoundAt};
use crate::lines::LineSplitter;
use crate::logstart::LogStart;

impl LogFollower {
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
        if let Ok(Ok((f, meta))) = open_regular(&self.path) {
            if (meta.dev(), meta.ino()) == (start.dev, start.ino) {
                if start.still_in(&f) {
                    self.resume_at(start.offset, start.line);
                } else {
                    // Truncated (copytruncate) and written again since: all of it is newer.
                    self.resume_at(0, 1);
                }
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
        if let Ok(Ok((f, meta))) = open_regular(&self.path) {
            if FileId::of(&meta).is(&launched) {
                // Truncated (copytruncate) and written again since: all of it is newer.
                let (offset, line) = match start {
                    Some(s) if !s.still_in(&f) => (0, 1),
                    _ => (offset, line),
                };
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
            && start.is_none_or(|s| s.still_in(&file))
            && file.seek(SeekFrom::Start(offset)).is_ok();
        let consumed = if from_start {
            splitter.set_next_number(line);
            offset
        } else {
            let _ = file.seek(SeekFrom::Start(0));
            0
        };
        self.retired = Some(Retired {
            file,
            splitter,
            id: (launched.dev, launched.ino),
            offset: consumed,
        });
        Some(format!(
            "{log} was rotated before firedup followed it: reading the file the run was launched into ({at}) as well as the new {log}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::FollowEvent;
    use super::*;
    use std::io::Write;
    use std::path::Path;

    fn numbered(f: &mut LogFollower) -> Vec<(u64, String)> {
        let mut out = Vec::new();
        f.poll(&mut out);
        f.finish(&mut out);
        out.iter()
            .filter_map(|e| match e {
                FollowEvent::Line(l) => {
                    Some((l.number, String::from_utf8_lossy(&l.bytes).into_owned()))
                }
                _ => None,
            })
            .collect()
    }

    fn append(path: &Path, bytes: &[u8]) {
        let mut w = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap();
        w.write_all(bytes).unwrap();
    }

    fn now() -> f64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    }

    fn lines(want: &[(u64, &str)]) -> Vec<(u64, String)> {
        want.iter().map(|(n, l)| (*n, l.to_string())).collect()
    }

    #[test]
    fn a_runs_part_of_a_shared_log_ends_where_it_was_recorded_to_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared.log");
        std::fs::write(&path, b"earlier run\n").unwrap();
        let start = crate::logstart::measure(&path).unwrap();
        let id = FileId::of(&std::fs::metadata(&path).unwrap());
        append(&path, b"this run\n");
        let end = std::fs::metadata(&path).unwrap().len();
        append(&path, b"next run\n");
        // (end known?, lines read)
        for (end, want) in [
            (Some(end), lines(&[(2, "this run")])),
            (None, lines(&[(2, "this run"), (3, "next run")])),
        ] {
            let mut f = LogFollower::new(&path, 1024);
            if let Some(end) = end {
                f.end_at(id, end);
            }
            f.start_launched(id, start, || None);
            assert_eq!(numbered(&mut f), want, "end {end:?}");
        }
    }

    #[test]
    fn a_log_truncated_and_written_past_the_launchs_start_is_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        std::fs::write(&path, b"old\n").unwrap();
        let start = crate::logstart::measure(&path).unwrap().unwrap();
        let id = FileId::of(&std::fs::metadata(&path).unwrap());
        append(&path, b"before the truncation\n");
        // copytruncate: the same file, emptied, then written further than the old start.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
        append(&path, b"FATAL after the truncation\n");
        let want = lines(&[(1, "FATAL after the truncation")]);
        let mut f = LogFollower::new(&path, 1024);
        f.start_launched(id, Some(start), || None);
        assert_eq!(numbered(&mut f), want, "start_launched");
        let mut f = LogFollower::new(&path, 1024);
        f.start_at(&start);
        assert_eq!(numbered(&mut f), want, "start_at");
        // Not truncated: from the launch's start.
        let p2 = dir.path().join("kept.log");
        std::fs::write(&p2, b"old\n").unwrap();
        let start = crate::logstart::measure(&p2).unwrap().unwrap();
        append(&p2, b"new\n");
        let mut f = LogFollower::new(&p2, 1024);
        f.start_at(&start);
        assert_eq!(numbered(&mut f), lines(&[(2, "new")]));
    }

    #[test]
    fn an_old_file_moved_into_place_after_a_rotation_is_followed_from_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        let old = dir.path().join("old.log");
        std::fs::write(&old, b"old READY line\n").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let launched_at = now();
        append(&path, b"launched line\n");
        let id = FileId::of(&std::fs::metadata(&path).unwrap());
        // Rotated, and an older file moved into place.
        let rotated = dir.path().join("app.log.1");
        std::fs::rename(&path, &rotated).unwrap();
        std::fs::rename(&old, &path).unwrap();
        let mut f = LogFollower::new(&path, 1024);
        f.launched_at(launched_at, id);
        f.start_launched(id, None, || {
            Some((
                File::open(&rotated).unwrap(),
                FoundAt::Path(rotated.clone()),
            ))
        });
        let mut out = Vec::new();
        f.poll(&mut out);
        append(&path, b"written after\n");
        let got = numbered(&mut f);
        let mut all: Vec<(u64, String)> = out
            .iter()
            .filter_map(|e| match e {
                FollowEvent::Line(l) => {
                    Some((l.number, String::from_utf8_lossy(&l.bytes).into_owned()))
                }
                _ => None,
            })
            .collect();
        all.extend(got);
        assert_eq!(
            all,
            lines(&[(1, "launched line"), (2, "written after")]),
            "the old file's own lines are not the run's"
        );
    }
}
