//! Where judging starts in a log that already holds something.
//!
//! Contract: firedup judges only what the watched server wrote.
//!
//! - `run` appends to its `--log`: what the file held before the launch (yesterday's `ready` line,
//!   another run's OOM) is never judged. The launch records [`LogStart`] (byte offset, the file's
//!   line number there, and the file's identity) in the run's `meta.json`; `run` and every later
//!   `watch RUN_ID` start reading there, so line numbers stay the file's own (`less +N` finds
//!   them) while older lines are skipped. A file at the path that is no longer the one launched
//!   into (rotated since) is read from its start: all of it is newer than the launch.
//! - `watch --log PATH` on a log that already holds bytes needs to know whether they are the
//!   server's. Neither blind default is safe: judging them can give a false `ready` or `failed`
//!   from an older run; skipping them can miss the `ready` line of a server that is already up
//!   (a false `stalled` or `timed_out`). So: `--from-start` judges them, `--from-end` skips them;
//!   without either, an empty or missing log needs no choice, and a log last written before the
//!   watched process started holds nothing of it (it is skipped); a log born after the watched
//!   process started, which that process holds open at its end (its write position is the file's
//!   size: `nohup server > log &`), is all its own (judged from the start); anything else is
//!   refused with a sentence naming both flags.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{Result, usage};
use serde::{Deserialize, Serialize};

/// Where a launch's output begins in its log file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogStart {
    /// Bytes the file held before the launch.
    pub offset: u64,
    /// The file's line number at `offset` (1 + the newlines before it).
    pub line: u64,
    /// The file's identity (device), so a later reader knows the path still names the same file.
    pub dev: u64,
    /// The file's identity (inode number), with `dev`.
    pub ino: u64,
    /// A hash of the (at most 64) bytes just before `offset`: a file truncated
    /// (copytruncate) and written past `offset` again no longer holds them there
    /// ([`LogStart::still_in`]). `None` from an older firedup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
}

/// How many bytes before a launch's start are remembered ([`LogStart::before`]).
pub(crate) const BEFORE: usize = 64;

/// FNV-1a: a hash with no seed, stable across builds (it is stored in `meta.json`).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl LogStart {
    /// Whether the open log `f` still holds, just before `offset`, the bytes it held at the
    /// launch: `false` when it was truncated since (shorter than `offset`, or written past it
    /// again after a truncation). Without a recorded hash, only the length can tell.
    pub fn still_in(&self, f: &fs::File) -> bool {
        use std::os::unix::fs::FileExt;
        if f.metadata().map_or(true, |m| m.len() < self.offset) {
            return false;
        }
        let Some(want) = self.before else {
            return true;
        };
        let n = (self.offset as usize).min(BEFORE);
        let mut buf = vec![0u8; n];
        f.read_exact_at(&mut buf, self.offset - n as u64)
            .is_ok_and(|()| fnv1a(&buf) == want)
    }
}

/// Measures the end of `log` before a launch appends to it; `None` when it is missing or empty
/// (the launch's output starts at byte 0).
pub(crate) fn measure(log: &Path) -> Result<Option<LogStart>> {
    // Opened without blocking and checked after opening: a FIFO at the path is no log.
    let Ok(f) = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(log)
    else {
        return Ok(None);
    };
    measure_file(f)
}

/// [`measure`] on the log a launch opened (for appending): the same file is read again through
/// its descriptor (`/proc/self/fd/N`), never by its path.
pub(crate) fn measure_open(log: &fs::File) -> Result<Option<LogStart>> {
    use std::os::fd::AsRawFd;
    let Ok(f) = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(format!("/proc/self/fd/{}", log.as_raw_fd()))
    else {
        return Ok(None);
    };
    measure_file(f)
}

/// [`measure`] on an open file, read from its current position (its start) to its end.
pub(crate) fn measure_file(mut f: fs::File) -> Result<Option<LogStart>> {
    let meta = f.metadata()?;
    if !meta.is_file() || meta.len() == 0 {
        return Ok(None);
    }
    let offset = meta.len();
    let mut newlines = 0u64;
    let mut left = offset;
    let mut buf = vec![0u8; 256 * 1024];
    let mut tail: Vec<u8> = Vec::with_capacity(2 * BEFORE);
    while left > 0 {
        let want = buf.len().min(left as usize);
        let n = match f.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        newlines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        tail.extend_from_slice(&buf[n.saturating_sub(BEFORE)..n]);
        tail.drain(..tail.len().saturating_sub(BEFORE));
        left -= n as u64;
    }
    Ok(Some(LogStart {
        offset,
        line: newlines + 1,
        dev: meta.dev(),
        ino: meta.ino(),
        before: Some(fnv1a(&tail)),
    }))
}

/// What is known of the watched process, for where judging starts in its log.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct WriterSeen {
    /// The Unix time at which it started.
    pub started: Option<f64>,
    /// Its write positions in the log (one per descriptor it holds open on it for writing).
    pub positions: Vec<u64>,
}

impl WriterSeen {
    /// What `/proc` says of `pid` and `log`.
    pub(crate) fn of(pid: u32, log: &Path) -> WriterSeen {
        WriterSeen {
            started: process_started_unix(pid),
            positions: crate::process::write_positions(pid, log),
        }
    }
}

/// Whether `watch --log` skips what the log already holds (`true`: from the end), and a note
/// for the user when that was decided without a flag. `writer` is what is known of the watched
/// process, when one is known.
pub(crate) fn attach_from_end(
    log: &Path,
    writer: Option<&WriterSeen>,
    from_start: bool,
    from_end: bool,
) -> Result<(bool, Option<String>)> {
    let writer_started = writer.and_then(|w| w.started);
    if from_start || from_end {
        return Ok((from_end, None));
    }
    let Ok(meta) = fs::metadata(log) else {
        return Ok((false, None));
    };
    if !meta.is_file() || meta.len() == 0 {
        return Ok((false, None));
    }
    let modified = meta.mtime() as f64 + meta.mtime_nsec() as f64 / 1e9;
    // A margin for the clocks' granularity (process start times are in 10 ms ticks).
    if let Some(started) = writer_started {
        if modified < started - 0.05 {
            let note = format!(
                "{} was last written before the process started: judging only what is written from now on",
                log.display()
            );
            return Ok((true, Some(note)));
        }
        // Born after the process started, and the process's write position is the file's end:
        // every byte is its own (`nohup server > log &`: the shell's child created the file before
        // it became the server). Not for a file born earlier: it may hold an older run's bytes
        // before the position (`>>`), or a truncation cannot be told from an older run's.
        let born = meta.created().ok().and_then(|t| {
            t.duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs_f64())
        });
        let at_end = writer.is_some_and(|w| {
            !w.positions.is_empty() && w.positions.iter().all(|p| *p == meta.len())
        });
        if at_end && born.is_some_and(|b| b >= started - 0.05) {
            let note = format!(
                "{} was created after the process started and ends where it writes: judging it from the start",
                log.display()
            );
            return Ok((false, Some(note)));
        }
    }
    usage!(
        "{} already holds {} bytes, which may be an earlier run's: add --from-start to judge them too, or --from-end to judge only what is written from now on",
        log.display(),
        meta.len()
    )
}

/// The Unix time at which `pid` started, from its start ticks and the system's uptime.
pub(crate) fn process_started_unix(pid: u32) -> Option<f64> {
    let st = crate::process::stat(pid)?;
    let uptime: f64 = fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    // SAFETY: sysconf with a valid name.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as f64 } else { 100.0 };
    let age = uptime - st.start_ticks as f64 / hz;
    // The wall clock read here rather than through `rundir` (which stores a `LogStart`), so
    // the two modules do not import each other.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    Some(now - age)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measure_counts_the_lines_before_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        assert_eq!(measure(&p).unwrap(), None, "missing");
        fs::write(&p, b"").unwrap();
        assert_eq!(measure(&p).unwrap(), None, "empty");
        for (content, line) in [
            (&b"one\n"[..], 2),
            (b"one\ntwo\n", 3),
            (b"one\ntwo", 2),
            (b"a\r\nb\rc\n", 3),
        ] {
            fs::write(&p, content).unwrap();
            let s = measure(&p).unwrap().unwrap();
            assert_eq!(
                (s.offset, s.line),
                (content.len() as u64, line),
                "{content:?}"
            );
        }
    }

    #[test]
    fn attach_needs_a_choice_only_for_content_that_may_be_the_servers() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let now = crate::rundir::now_unix();
        // Missing and empty: nothing to choose.
        assert_eq!(
            attach_from_end(&p, None, false, false).unwrap(),
            (false, None)
        );
        fs::write(&p, b"").unwrap();
        assert_eq!(
            attach_from_end(&p, None, false, false).unwrap(),
            (false, None)
        );
        fs::write(&p, b"old ready\n").unwrap();
        // The flags decide.
        assert_eq!(
            attach_from_end(&p, None, true, false).unwrap(),
            (false, None)
        );
        assert_eq!(
            attach_from_end(&p, None, false, true).unwrap(),
            (true, None)
        );
        // Content, no process known: refused, naming both flags.
        let e = attach_from_end(&p, None, false, false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--from-start") && e.contains("--from-end"),
            "{e}"
        );
        let started = |at: f64, positions: Vec<u64>| WriterSeen {
            started: Some(at),
            positions,
        };
        // Written after the process started: may be its own, refused.
        assert!(attach_from_end(&p, Some(&started(now - 60.0, vec![])), false, false).is_err());
        // Last written before the process started: none of it is the process's.
        let (end, note) =
            attach_from_end(&p, Some(&started(now + 60.0, vec![])), false, false).unwrap();
        assert!(end && note.is_some());
        // Born after the process started and written by it to its end: all its own. Not when
        // its position is elsewhere (another writer wrote the rest), nor for a file born first.
        let len = fs::metadata(&p).unwrap().len();
        let born_after = fs::metadata(&p).unwrap().created().is_ok();
        for (writer, own) in [
            (started(now - 60.0, vec![len]), born_after),
            (started(now - 60.0, vec![len, len]), born_after),
            (started(now - 60.0, vec![len - 1]), false),
            (started(now - 60.0, vec![len, 1]), false),
            (started(now - 60.0, vec![]), false),
        ] {
            let got = attach_from_end(&p, Some(&writer), false, false);
            assert_eq!(got.is_ok(), own, "{writer:?}: {got:?}");
            if let Ok((end, note)) = got {
                assert!(!end && note.is_some(), "{writer:?}");
            }
        }
        // A file born before the process, written since: refused although the position is at
        // its end (a `>>` log that held an older run's lines).
        let older = dir.path().join("older");
        fs::write(&older, b"x\n").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let w = WriterSeen {
            started: Some(crate::rundir::now_unix() - 0.1),
            positions: vec![4],
        };
        fs::write(&older, b"x\ny\n").unwrap();
        assert!(attach_from_end(&older, Some(&w), false, false).is_err());
    }

    #[test]
    fn this_process_started_in_the_past() {
        let t = process_started_unix(std::process::id()).unwrap();
        let now = crate::rundir::now_unix();
        assert!(t <= now + 1.0 && t > now - 24.0 * 3600.0, "{t} vs {now}");
    }
}
