use super::*;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, symlink};

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Gives `path` itself (not what a symlink points to) to uid 4242, when this test runs as root.
fn give_away(path: &Path) -> bool {
    if rustix::process::geteuid().as_raw() != 0 {
        return false;
    }
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: lchown with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::lchown(c.as_ptr(), 4242, 4242) }, 0);
    true
}

#[test]
fn what_is_opened_and_what_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("mine"), b"old\n").unwrap();
    symlink(d.join("mine"), d.join("my-link")).unwrap();
    symlink("dangling-target", d.join("my-dangling")).unwrap();
    symlink("my-link", d.join("link-to-link")).unwrap();
    mkfifo(&d.join("fifo"));
    std::fs::write(d.join("theirs"), b"theirs\n").unwrap();
    symlink(d.join("mine"), d.join("their-link")).unwrap();
    let as_root = give_away(&d.join("theirs")) && give_away(&d.join("their-link"));
    std::fs::create_dir(d.join("loop")).unwrap();
    symlink("a", d.join("loop/b")).unwrap();
    symlink("b", d.join("loop/a")).unwrap();
    // (path, purpose, Ok(created) or Err(words of the refusal))
    let mut table: Vec<(PathBuf, Purpose, std::result::Result<bool, &str>)> = vec![
        (d.join("new.log"), Purpose::Log, Ok(true)),
        (d.join("mine"), Purpose::Log, Ok(false)),
        (d.join("my-link"), Purpose::Log, Ok(false)),
        (d.join("link-to-link"), Purpose::Log, Ok(false)),
        (d.join("my-dangling"), Purpose::Log, Ok(true)),
        (d.join("fifo"), Purpose::Log, Err("FIFO")),
        (d.join("fifo"), Purpose::Events, Err("no reader")),
        (d.to_path_buf(), Purpose::Log, Err("cannot open")),
        ("/dev/null".into(), Purpose::Log, Err("a character device")),
        ("/dev/null".into(), Purpose::Events, Ok(false)),
        (d.join("loop/a"), Purpose::Log, Err("more than")),
        (d.join("no-dir/x.log"), Purpose::Log, Err("cannot open")),
    ];
    if as_root {
        table.push((
            d.join("theirs"),
            Purpose::Log,
            Err("belongs to another user"),
        ));
        table.push((
            d.join("theirs"),
            Purpose::Events,
            Err("belongs to another user"),
        ));
        table.push((
            d.join("their-link"),
            Purpose::Log,
            Err("symlink owned by another user"),
        ));
        table.push((
            d.join("their-link"),
            Purpose::Events,
            Err("symlink owned by another user"),
        ));
    }
    for (path, purpose, want) in table {
        let got = open_for_writing(&path, purpose);
        match (want, got) {
            (Ok(created), Ok(o)) => assert_eq!(o.created, created, "{}", path.display()),
            (Err(words), Err(e)) => {
                let e = crate::error::chain(&e);
                assert!(e.contains(words), "{}: {e}", path.display());
                assert!(e.contains(&path.display().to_string()), "{e}");
            }
            (want, got) => panic!("{} {purpose:?}: want {want:?}, got {got:?}", path.display()),
        }
    }
    assert_eq!(
        std::fs::read(d.join("mine")).unwrap(),
        b"old\n",
        "untouched"
    );
    assert!(
        d.join("dangling-target").is_file(),
        "created through the user's own link"
    );
    if as_root {
        assert_eq!(std::fs::metadata(d.join("theirs")).unwrap().uid(), 4242);
    }
}

#[test]
fn a_log_is_appended_to_and_events_start_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, b"before\n").unwrap();
    let mut log = open_for_writing(&path, Purpose::Log).unwrap().file;
    log.write_all(b"after\n").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"before\nafter\n");
    let mut events = open_for_writing(&path, Purpose::Events).unwrap().file;
    events.write_all(b"{}\n").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"{}\n");
}

#[test]
fn held_descriptors_are_named_by_their_paths() {
    for (path, fd) in [
        ("/dev/stdout", Some(1)),
        ("/dev/stderr", Some(2)),
        ("/dev/fd/7", Some(7)),
        ("/proc/self/fd/9", Some(9)),
        ("/dev/fdx", None),
        ("/tmp/x", None),
    ] {
        assert_eq!(held_descriptor(Path::new(path)), fd, "{path}");
    }
}
