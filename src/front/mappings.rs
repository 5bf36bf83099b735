//! The front lets go, while it waits, of the file pages its start mapped (issue 28).
//!
//! The front is a copy of the process at the start of `main`: the program's and the C library's
//! code, read-only data and relocation tables that the dynamic loader and the start touched,
//! about 4 MB of file pages mapped in its page tables (`perf record` of the front on the 2-core
//! VM: most of its last run, from its wake to its exit, was `exit_mmap` taking those pages down,
//! about 0.3 ms that the caller waits for). Every one of them is a clean copy of a file the kernel
//! can map again, so the front drops them right after the split, while the server starts and
//! nobody waits; its exit then takes down only the few pages its wait touched since.
//!
//! Only a mapping of a file that is private, not writable, and holds no page of its own
//! (`Anonymous: 0 kB` in `/proc/self/smaps`: the loader's relocated data, a written page, is
//! anonymous) is dropped: for those, `MADV_DONTNEED` only forgets what a fault gets back
//! unchanged. The front is single-threaded (it was forked before any thread existed), so nothing
//! else touches its memory between the read of `smaps` and the advice. What the wait runs after
//! that is faulted in again (about 0.5 MB: the kernel maps 64 KiB around each fault of a file,
//! `MADV_RANDOM` or not, BENCHMARKS.md).

/// An address range, `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Range {
    pub(super) start: usize,
    pub(super) end: usize,
}

/// The mappings of `smaps` (the text of `/proc/PID/smaps`) that may be dropped: private, not
/// writable, of a file (an inode), with no anonymous page, with pages resident.
pub(super) fn sheddable(smaps: &str) -> Vec<Range> {
    let mut out = Vec::new();
    let mut current: Option<(Range, bool)> = None;
    let mut rss_kb = 0u64;
    let mut anon_kb = None;
    let mut close = |current: Option<(Range, bool)>, rss_kb: u64, anon_kb: Option<u64>| {
        if let Some((range, eligible)) = current {
            if eligible && rss_kb > 0 && anon_kb == Some(0) {
                out.push(range);
            }
        }
    };
    for line in smaps.lines() {
        if let Some(header) = mapping_header(line) {
            close(current.take(), rss_kb, anon_kb);
            current = Some(header);
            rss_kb = 0;
            anon_kb = None;
        } else if let Some(kb) = field_kb(line, "Rss:") {
            rss_kb = kb;
        } else if let Some(kb) = field_kb(line, "Anonymous:") {
            anon_kb = Some(kb);
        }
    }
    close(current, rss_kb, anon_kb);
    out
}

/// A mapping's first line (`start-end perms offset dev inode [path]`): its range, and whether
/// its kind may be dropped (private, not writable, a file's).
fn mapping_header(line: &str) -> Option<(Range, bool)> {
    let mut words = line.split_ascii_whitespace();
    let (start, end) = words.next()?.split_once('-')?;
    let range = Range {
        start: usize::from_str_radix(start, 16).ok()?,
        end: usize::from_str_radix(end, 16).ok()?,
    };
    let perms = words.next()?.as_bytes();
    let (_offset, _dev) = (words.next()?, words.next()?);
    let inode: u64 = words.next()?.parse().ok()?;
    if perms.len() != 4 || range.end <= range.start {
        return None;
    }
    let eligible = perms[1] != b'w' && perms[3] == b'p' && inode != 0;
    Some((range, eligible))
}

/// The value of a `Name:   N kB` line of smaps.
fn field_kb(line: &str, name: &str) -> Option<u64> {
    line.strip_prefix(name)?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

/// Drops this process's sheddable mappings. Call only while one thread runs.
pub(super) fn shed() {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return;
    };
    for r in sheddable(&smaps) {
        let (addr, len) = (r.start as *mut libc::c_void, r.end - r.start);
        // SAFETY: a private read-only file mapping of this process with no anonymous page (read
        // above, with no other thread to change it since): its pages are the file's, and a fault
        // maps them again as they were. A failure (a locked mapping) leaves the pages in place.
        unsafe {
            libc::madvise(addr, len, libc::MADV_DONTNEED);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(header: &str, rss: u64, anon: u64) -> String {
        format!(
            "{header}\nSize:               8 kB\nRss:             {rss} kB\nPss:               4 kB\nAnonymous:       {anon} kB\nVmFlags: rd mr mw me\n"
        )
    }

    #[test]
    fn only_clean_private_read_only_file_mappings_are_dropped() {
        let cases: &[(&str, u64, u64, bool)] = &[
            // the program's code and read-only data
            (
                "5616-5617 r-xp 002b5000 fe:00 5319262  /usr/bin/firedup",
                1316,
                0,
                true,
            ),
            (
                "5610-5611 r--p 00000000 fe:00 5319262  /usr/bin/firedup",
                944,
                0,
                true,
            ),
            // relocated (RELRO): read-only now, but written by the loader
            (
                "5618-5619 r--p 00b63000 fe:00 5319262  /usr/bin/firedup",
                388,
                388,
                false,
            ),
            // writable data of a file
            (
                "561a-561b rw-p 00bc3000 fe:00 5319262  /usr/bin/firedup",
                24,
                0,
                false,
            ),
            // shared mapping of a file
            ("561c-561d r--s 00000000 fe:00 77  /dev/shm/x", 8, 0, false),
            // anonymous memory, the heap, the stack, the vdso
            ("561e-561f rw-p 00000000 00:00 0  [heap]", 8, 8, false),
            ("7fc3-7fc4 r-xp 00000000 00:00 0  [vdso]", 4, 0, false),
            // nothing resident
            (
                "7fc5-7fc6 r-xp 00010000 fe:00 326603  /usr/lib/libm.so.6",
                0,
                0,
                false,
            ),
        ];
        for &(header, rss, anon, want) in cases {
            let got = sheddable(&mapping(header, rss, anon));
            assert_eq!(!got.is_empty(), want, "{header} rss {rss} anon {anon}");
        }
    }

    #[test]
    fn each_mapping_is_judged_by_its_own_fields() {
        let text = [
            mapping("1000-3000 r-xp 00000000 fe:00 9  /bin/a", 8, 0),
            mapping("3000-4000 r--p 00002000 fe:00 9  /bin/a", 4, 4),
            mapping("4000-6000 r--p 00003000 fe:00 9  /bin/a", 8, 0),
        ]
        .concat();
        assert_eq!(
            sheddable(&text),
            [
                Range {
                    start: 0x1000,
                    end: 0x3000
                },
                Range {
                    start: 0x4000,
                    end: 0x6000
                }
            ]
        );
    }

    #[test]
    fn a_mapping_without_its_anonymous_field_is_kept() {
        let text = "1000-3000 r-xp 00000000 fe:00 9  /bin/a\nRss: 8 kB\n";
        assert!(sheddable(text).is_empty());
    }

    #[test]
    fn this_process_has_sheddable_code_and_keeps_its_relocated_data() {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let shed = sheddable(&smaps);
        assert!(
            !shed.is_empty(),
            "the test binary's code is a clean file mapping"
        );
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.to_str().unwrap();
        for line in smaps
            .lines()
            .filter(|l| l.ends_with(exe) && l.contains("rw-p"))
        {
            let (range, _) = mapping_header(line).unwrap();
            assert!(!shed.contains(&range), "writable data kept: {line}");
        }
    }
}
