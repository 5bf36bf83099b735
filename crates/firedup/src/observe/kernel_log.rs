//! The kernel log's messages written since a point, read from `/dev/kmsg`.
//!
//! Opened and set at its end, the reader sees only the records the kernel logs afterwards. That is
//! what makes a kernel line evidence about a process watched from then on, without comparing
//! clocks: the kernel log's timestamps and the processes' clocks part on a virtual machine
//! restored from a snapshot, and a line about an earlier process that had the same pid looked new
//! (CI: a `python3` OOM-killed by one test, its pid reused by a later `sh -c 'exit 137'`).
//!
//! Reading needs the right to read the kernel log (root, or `kernel.dmesg_restrict=0`); without it
//! there is no reader and no kernel evidence.

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;

/// The kernel log from the moment it was opened on.
#[derive(Debug)]
pub(crate) struct KernelLogTail {
    file: File,
}

impl KernelLogTail {
    /// Opens the kernel log at its end; `None` when it cannot be read here.
    pub(crate) fn open() -> Option<KernelLogTail> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/kmsg")
            .ok()?;
        file.seek(SeekFrom::End(0)).ok()?;
        Some(KernelLogTail { file })
    }

    /// Hands over the message of every record logged since the last call (never blocks).
    pub(crate) fn read_new(&mut self, each: &mut dyn FnMut(&str)) {
        // One record per read; a record is at most about 8 KiB (the kernel's limit is 8192 - 1
        // bytes of text plus the header).
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match self.file.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    if let Some(message) = record_message(&buf[..n]) {
                        each(message);
                    }
                }
                // Records overwritten before they were read: the next read goes on after them.
                Err(e) if e.kind() == ErrorKind::BrokenPipe => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}

/// The message of one `/dev/kmsg` record: `PRIORITY,SEQUENCE,MICROSECONDS,FLAGS[,...];MESSAGE`,
/// then continuation lines (` KEY=VALUE`) that are not the message.
fn record_message(record: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(record).ok()?;
    let (_, rest) = text.split_once(';')?;
    Some(rest.split('\n').next().unwrap_or(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_gives_its_message_alone() {
        let cases: &[(&[u8], Option<&str>)] = &[
            (
                b"3,1234,812345678,-;Memory cgroup out of memory: Killed process 7 (python3) total-vm:1kB\n",
                Some("Memory cgroup out of memory: Killed process 7 (python3) total-vm:1kB"),
            ),
            (
                b"6,88,1000,c,caller=T12;usb 1-1: new device\n SUBSYSTEM=usb\n DEVICE=c189:1\n",
                Some("usb 1-1: new device"),
            ),
            (b"no header at all\n", None),
            (b"\xff\xfe;not text", None),
        ];
        for (record, want) in cases {
            assert_eq!(record_message(record), *want, "{record:?}");
        }
    }

    #[test]
    fn a_reader_opened_now_sees_nothing_older() {
        // Where the kernel log can be read at all (root here and in CI), a fresh reader starts at
        // its end: whatever the machine logged before is not handed over.
        let Some(mut tail) = KernelLogTail::open() else {
            eprintln!("skipped: the kernel log cannot be read here");
            return;
        };
        let mut seen = Vec::new();
        tail.read_new(&mut |m| seen.push(m.to_string()));
        // Another process may log meanwhile, but never the boot banner, the log's first record.
        assert!(
            !seen.iter().any(|m| m.starts_with("Linux version")),
            "{seen:?}"
        );
    }
}
