//! Reading a log file: opening only a regular file without blocking, and reading what it holds
//! now into the line splitter, up to a poll's share and to where the run's part ends.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::{FollowEventRef, MAX_PER_POLL, Sink};
use crate::lines::LineSplitter;
use crate::logpath::not_a_file;

/// Opens `path` for reading without blocking (a FIFO would block an ordinary open) and only if
/// it is a regular file: `Err` with the kind of thing it is otherwise.
pub(super) fn open_regular(
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

/// Reads what `file` holds now (at most [`MAX_PER_POLL`], and at most `room` bytes) into
/// `splitter`: the bytes read and whether more is waiting.
pub(super) fn read_into(
    file: &mut File,
    splitter: &mut LineSplitter,
    buf: &mut [u8],
    out: &mut Sink<'_>,
    room: Option<u64>,
) -> std::io::Result<(u64, bool)> {
    let mut read_now = 0u64;
    loop {
        // Not past where the run's part of the file ends.
        let want = room.map_or(buf.len(), |r| (r - read_now).min(buf.len() as u64) as usize);
        if want == 0 {
            return Ok((read_now, false));
        }
        match file.read(&mut buf[..want]) {
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
