//! Unit tests of the log follower (follow.rs): late, truncated, rotated and deleted logs, chunking.

use super::*;
use crate::launched_log::{FileId, FoundAt};
use crate::logstart::LogStart;
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
    assert_eq!(lines(&out), vec!["b"]);
    assert!(matches!(
        states(&out).last(),
        Some(LogState::Missing { .. })
    ));
    // The writer still holds the deleted file: what it appends is read, and the partial
    // line is ended when the writer is done.
    w.write_all(b" line\nmore").unwrap();
    out.clear();
    f.poll(&mut out);
    assert_eq!(lines(&out), vec!["partial line"]);
    out.clear();
    f.finish(&mut out);
    assert_eq!(lines(&out), vec!["more"]);
}

fn numbered(events: &[FollowEvent]) -> Vec<(u64, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            FollowEvent::Line(l) => Some((l.number, String::from_utf8_lossy(&l.bytes).into())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_writer_that_keeps_its_descriptor_after_rename_and_create_is_still_read() {
    // logrotate's `create` mode: the log is renamed and a new empty file put at the path;
    // a server that does not reopen keeps writing into the renamed file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut w = std::fs::File::create(&path).unwrap();
    w.write_all(b"shard 1/4\n").unwrap();
    let mut f = LogFollower::new(&path, 1024);
    let mut out = Vec::new();
    f.poll(&mut out);
    std::fs::rename(&path, dir.path().join("log.1")).unwrap();
    std::fs::write(&path, b"").unwrap();
    w.write_all(b"shard 2/4\n").unwrap();
    out.clear();
    f.poll(&mut out);
    assert_eq!(numbered(&out), vec![(2, "shard 2/4".to_string())]);
    assert!(states(&out).contains(&LogState::Rotated), "{out:?}");
    // Later writes through the old descriptor keep coming, numbered as the old file's.
    w.write_all(b"shard 3/4\n").unwrap();
    out.clear();
    f.poll(&mut out);
    assert_eq!(numbered(&out), vec![(3, "shard 3/4".to_string())]);
    // And the new file at the path is followed from its line 1.
    let mut w2 = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    w2.write_all(b"reopened\n").unwrap();
    w.write_all(b"shard 4/4\n").unwrap();
    out.clear();
    f.poll(&mut out);
    assert_eq!(
        numbered(&out),
        vec![(4, "shard 4/4".to_string()), (1, "reopened".to_string())]
    );
}

#[test]
fn a_second_rotation_finishes_the_first_retired_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut w1 = std::fs::File::create(&path).unwrap();
    w1.write_all(b"one\n").unwrap();
    let mut f = LogFollower::new(&path, 1024);
    let mut out = Vec::new();
    f.poll(&mut out);
    std::fs::rename(&path, dir.path().join("log.1")).unwrap();
    let mut w2 = std::fs::File::create(&path).unwrap();
    w2.write_all(b"two\n").unwrap();
    f.poll(&mut out);
    w1.write_all(b"one-tail").unwrap();
    std::fs::rename(&path, dir.path().join("log.2")).unwrap();
    std::fs::write(&path, b"three\n").unwrap();
    out.clear();
    f.poll(&mut out);
    // The first file's held partial line is ended when a newer rotation retires it.
    assert_eq!(lines(&out), vec!["one-tail", "three"]);
    w2.write_all(b"two-more\n").unwrap();
    out.clear();
    f.poll(&mut out);
    assert_eq!(lines(&out), vec!["two-more"]);
}

#[test]
fn skip_existing_reads_only_what_is_appended_numbered_as_the_files_lines() {
    // It used to set the offset without seeking: the whole file was read anyway.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    std::fs::write(&path, b"old READY\nold\n").unwrap();
    let mut f = LogFollower::new(&path, 1024);
    f.skip_existing();
    let mut w = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    w.write_all(b"new READY\n").unwrap();
    let mut out = Vec::new();
    f.poll(&mut out);
    assert_eq!(numbered(&out), vec![(3, "new READY".to_string())]);
}

#[test]
fn a_fifo_or_device_at_the_path_is_unreadable_and_never_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for path in [fifo.as_path(), Path::new("/dev/zero")] {
        let mut f = LogFollower::new(path, 1024);
        f.skip_existing();
        f.resume_at(0, 1);
        let mut out = Vec::new();
        assert!(!f.poll(&mut out));
        assert!(
            matches!(&states(&out)[..], [LogState::Unreadable(r)] if r.contains("not a regular file")),
            "{}: {out:?}",
            path.display()
        );
        assert!(lines(&out).is_empty());
    }
}

#[test]
fn start_at_skips_what_the_file_held_before_the_launch_and_keeps_its_line_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    std::fs::write(&path, b"old READY\nold OOM\n").unwrap();
    let start = crate::logstart::measure(&path).unwrap().unwrap();
    let mut w = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    w.write_all(b"new loading\n").unwrap();
    let mut f = LogFollower::new(&path, 1024);
    f.start_at(&start);
    let mut out = Vec::new();
    f.poll(&mut out);
    assert_eq!(numbered(&out), vec![(3, "new loading".to_string())]);
    // A file that is no longer the one launched into is read from its start.
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, b"after rotation\n").unwrap();
    let mut f = LogFollower::new(&path, 1024);
    f.start_at(&start);
    out.clear();
    f.poll(&mut out);
    assert_eq!(numbered(&out), vec![(1, "after rotation".to_string())]);
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

/// A launch into `path` that held `before` (its start recorded as the launch records it), then
/// wrote `launched`: the file's identity and where the launch's output begins.
fn launch_into(path: &Path, before: &[u8], launched: &[u8]) -> (FileId, Option<LogStart>) {
    std::fs::write(path, before).unwrap();
    let start = crate::logstart::measure(path).unwrap();
    let id = FileId::of(&std::fs::metadata(path).unwrap());
    let mut w = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    w.write_all(launched).unwrap();
    (id, start)
}

fn open_found(p: &Path) -> Option<(File, FoundAt)> {
    Some((File::open(p).unwrap(), FoundAt::Path(p.to_path_buf())))
}

#[test]
fn start_launched_reads_the_launched_file_wherever_the_rotation_left_it() {
    // (what the path holds at the first look, found by identity?, lines read, note says)
    enum AtPath {
        Launched,
        NewFile,
        Nothing,
    }
    let cases: [(&str, AtPath, bool, &[(u64, &str)], Option<&str>); 5] = [
        (
            "not rotated: the launched file, from the launch's start",
            AtPath::Launched,
            true,
            &[(3, "launched line"), (4, "written later")],
            None,
        ),
        (
            "renamed + created: the launched file, then the new one from line 1",
            AtPath::NewFile,
            true,
            &[
                (3, "launched line"),
                (4, "written later"),
                (1, "new file line"),
            ],
            Some("rotated before firedup followed it"),
        ),
        (
            "deleted, nothing created: the launched file as it is held",
            AtPath::Nothing,
            true,
            &[(3, "launched line"), (4, "written later")],
            Some("rotated before firedup followed it"),
        ),
        (
            "renamed + created, the launched file nowhere: the new file, said so",
            AtPath::NewFile,
            false,
            &[(1, "new file line")],
            Some("what the run wrote to the old file after the rotation is not judged"),
        ),
        (
            "deleted, the launched file nowhere: nothing, said so",
            AtPath::Nothing,
            false,
            &[],
            Some("not judged"),
        ),
    ];
    for (what, at_path, findable, want_lines, want_note) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        let (id, start) = launch_into(&path, b"old READY\nold OOM\n", b"launched line\n");
        let rotated = dir.path().join("app.log.1");
        match at_path {
            AtPath::Launched => std::fs::copy(&path, &rotated).map(|_| ()).unwrap(),
            AtPath::NewFile => {
                std::fs::rename(&path, &rotated).unwrap();
                std::fs::write(&path, b"new file line\n").unwrap();
            }
            AtPath::Nothing => std::fs::rename(&path, &rotated).unwrap(),
        }
        // The writer, still at it, appends through its descriptor.
        let launched_now = match at_path {
            AtPath::Launched => &path,
            _ => &rotated,
        };
        let mut writer = std::fs::OpenOptions::new()
            .append(true)
            .open(launched_now)
            .unwrap();
        let mut f = LogFollower::new(&path, 1024);
        f.start_launched(id, start, || {
            if findable {
                open_found(launched_now)
            } else {
                None
            }
        });
        let note = f.take_note();
        writer.write_all(b"written later\n").unwrap();
        let mut out = Vec::new();
        f.poll(&mut out);
        f.finish(&mut out);
        let got = numbered(&out);
        let want: Vec<(u64, String)> = want_lines
            .iter()
            .map(|(n, l)| (*n, l.to_string()))
            .collect();
        assert_eq!(got, want, "{what}");
        match (&note, want_note) {
            (None, None) => {}
            (Some(n), Some(w)) => assert!(n.contains(w), "{what}: {n}"),
            _ => panic!("{what}: note {note:?}, want {want_note:?}"),
        }
    }
}

#[test]
fn start_launched_pins_the_launched_file_so_a_later_rotation_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.log");
    let (id, start) = launch_into(&path, b"", b"one\n");
    assert_eq!(start, None, "an empty log records no start");
    let mut f = LogFollower::new(&path, 1024);
    f.start_launched(id, start, || panic!("the path names the launched file"));
    assert_eq!(f.take_note(), None);
    // Rotated after the follower's first look but before its first read: still the launched
    // file's lines first, then the new file's.
    let mut writer = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::fs::rename(&path, dir.path().join("app.log.1")).unwrap();
    std::fs::write(&path, b"fresh\n").unwrap();
    writer.write_all(b"two\n").unwrap();
    let mut out = Vec::new();
    f.poll(&mut out);
    f.poll(&mut out);
    assert_eq!(
        numbered(&out),
        vec![(1, "one".into()), (2, "two".into()), (1, "fresh".into())]
    );
    assert!(states(&out).contains(&LogState::Rotated));
}

#[test]
fn start_launched_reads_a_launched_file_truncated_below_the_start_from_its_beginning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.log");
    let (id, start) = launch_into(&path, b"a long line from before the launch\n", b"");
    let rotated = dir.path().join("app.log.1");
    std::fs::rename(&path, &rotated).unwrap();
    std::fs::write(&rotated, b"short\n").unwrap(); // truncated in place, rewritten
    assert!(FileId::of(&std::fs::metadata(&rotated).unwrap()).is(&id));
    let mut f = LogFollower::new(&path, 1024);
    f.start_launched(id, start, || open_found(&rotated));
    assert!(f.take_note().is_some());
    assert_eq!(f.take_note(), None, "once");
    let mut out = Vec::new();
    f.finish(&mut out);
    assert_eq!(numbered(&out), vec![(1, "short".into())]);
}
