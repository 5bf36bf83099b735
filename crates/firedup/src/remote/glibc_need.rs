//! Which C library a firedup binary needs, and which one a host has: so that copying firedup to
//! a host with an older glibc ends in one sentence saying what to do, instead of the loader's
//! "version `GLIBC_2.34' not found".
//!
//! The need is read from the binary's ELF symbol-version requirements (the `SHT_GNU_verneed`
//! section, `.gnu.version_r`): the highest `GLIBC_x.y` named there is the oldest glibc the binary
//! starts on. Only 64-bit little-endian ELF is read (the x86_64 and aarch64 binaries firedup is
//! built as); anything else is "unknown", and the copy is then judged by running it once.

use std::fmt;

/// A glibc version, `2.17` as `GlibcVersion(2, 17)`; ordered as versions are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct GlibcVersion(pub u32, pub u32);

impl fmt::Display for GlibcVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

/// Parses `2.31` (a third part, as in `2.2.5`, is ignored: no glibc release differs only there
/// in what the loader checks against it).
fn parse_version(s: &str) -> Option<GlibcVersion> {
    let mut parts = s.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some(GlibcVersion(major, minor))
}

/// The host's glibc from the first line of `getconf GNU_LIBC_VERSION` (`glibc 2.31`) or of
/// `ldd --version` (`ldd (Debian GLIBC 2.31-13+deb11u5) 2.31`): the line's last word. `None` for
/// anything else (a musl host, no answer).
pub(super) fn host_glibc(answer: &str) -> Option<GlibcVersion> {
    let line = answer.lines().find(|l| !l.trim().is_empty())?;
    let lower = line.to_lowercase();
    if !(lower.contains("glibc") || lower.contains("gnu libc")) {
        return None;
    }
    parse_version(line.split_whitespace().last()?)
}

const SHT_GNU_VERNEED: u32 = 0x6fff_fffe;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?)).ok()
}

/// The NUL-terminated string at `at` in `b`.
fn c_str(b: &[u8], at: usize) -> Option<&str> {
    let rest = b.get(at..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    std::str::from_utf8(&rest[..end]).ok()
}

/// The highest `GLIBC_x.y` the ELF binary `elf` requires; `None` when it requires none or is
/// not a 64-bit little-endian ELF this reader understands (a static binary, another format).
pub(super) fn binary_needs(elf: &[u8]) -> Option<GlibcVersion> {
    if elf.get(..4)? != b"\x7fELF" || elf.get(4) != Some(&2) || elf.get(5) != Some(&1) {
        return None;
    }
    let shoff = u64_at(elf, 0x28)?;
    let shentsize = usize::from(u16_at(elf, 0x3a)?);
    let shnum = usize::from(u16_at(elf, 0x3c)?);
    let section = |i: usize| -> Option<(u32, usize, usize, u32, u32)> {
        let h = shoff.checked_add(i.checked_mul(shentsize)?)?;
        Some((
            u32_at(elf, h + 4)?,  // sh_type
            u64_at(elf, h + 24)?, // sh_offset
            u64_at(elf, h + 32)?, // sh_size
            u32_at(elf, h + 40)?, // sh_link
            u32_at(elf, h + 44)?, // sh_info
        ))
    };
    let (_, need_off, need_size, strtab, count) = (0..shnum)
        .filter_map(section)
        .find(|s| s.0 == SHT_GNU_VERNEED)?;
    let (_, str_off, str_size, _, _) = section(usize::try_from(strtab).ok()?)?;
    let strings = elf.get(str_off..str_off.checked_add(str_size)?)?;
    let needs = elf.get(need_off..need_off.checked_add(need_size)?)?;
    let mut highest = None;
    let mut entry = 0usize;
    for _ in 0..count {
        // Elf64_Verneed: vn_version u16, vn_cnt u16, vn_file u32, vn_aux u32, vn_next u32.
        let aux_count = u16_at(needs, entry + 2)?;
        let mut aux = entry.checked_add(usize::try_from(u32_at(needs, entry + 8)?).ok()?)?;
        for _ in 0..aux_count {
            // Elf64_Vernaux: vna_hash u32, vna_flags u16, vna_other u16, vna_name u32, vna_next u32.
            let name = c_str(strings, usize::try_from(u32_at(needs, aux + 8)?).ok()?)?;
            if let Some(v) = name.strip_prefix("GLIBC_").and_then(parse_version) {
                highest = highest.max(Some(v));
            }
            aux = aux.checked_add(usize::try_from(u32_at(needs, aux + 12)?).ok()?)?;
        }
        let next = u32_at(needs, entry + 12)?;
        if next == 0 {
            break;
        }
        entry = entry.checked_add(usize::try_from(next).ok()?)?;
    }
    highest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_glibc_is_read_from_getconf_or_ldd() {
        for (answer, want) in [
            ("glibc 2.31\n", Some(GlibcVersion(2, 31))),
            (
                "ldd (Debian GLIBC 2.31-13+deb11u5) 2.31\nCopyright",
                Some(GlibcVersion(2, 31)),
            ),
            ("ldd (GNU libc) 2.28\n", Some(GlibcVersion(2, 28))),
            (
                "ldd (Ubuntu GLIBC 2.35-0ubuntu3.8) 2.35",
                Some(GlibcVersion(2, 35)),
            ),
            ("musl libc (x86_64)\nVersion 1.2.4", None),
            ("", None),
            ("glibc unknown", None),
        ] {
            assert_eq!(host_glibc(answer), want, "{answer:?}");
        }
    }

    #[test]
    fn versions_order_as_numbers_not_as_text() {
        assert!(GlibcVersion(2, 17) < GlibcVersion(2, 31));
        assert!(GlibcVersion(2, 9) < GlibcVersion(2, 17));
        assert_eq!(GlibcVersion(2, 34).to_string(), "2.34");
    }

    /// A minimal 64-bit little-endian ELF whose only content is a verneed section naming `names`
    /// (one file, libc.so.6) and its string table.
    fn elf_needing(names: &[&str]) -> Vec<u8> {
        let mut strings = b"\0libc.so.6\0".to_vec();
        let mut offsets = Vec::new();
        for n in names {
            offsets.push(strings.len() as u32);
            strings.extend_from_slice(n.as_bytes());
            strings.push(0);
        }
        let mut need = Vec::new();
        need.extend_from_slice(&1u16.to_le_bytes()); // vn_version
        need.extend_from_slice(&(names.len() as u16).to_le_bytes()); // vn_cnt
        need.extend_from_slice(&1u32.to_le_bytes()); // vn_file
        need.extend_from_slice(&16u32.to_le_bytes()); // vn_aux
        need.extend_from_slice(&0u32.to_le_bytes()); // vn_next
        for (i, off) in offsets.iter().enumerate() {
            need.extend_from_slice(&0u32.to_le_bytes()); // vna_hash
            need.extend_from_slice(&0u16.to_le_bytes()); // vna_flags
            need.extend_from_slice(&0u16.to_le_bytes()); // vna_other
            need.extend_from_slice(&off.to_le_bytes()); // vna_name
            let next: u32 = if i + 1 < offsets.len() { 16 } else { 0 };
            need.extend_from_slice(&next.to_le_bytes());
        }
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        let str_off = elf.len();
        elf.extend_from_slice(&strings);
        let need_off = elf.len();
        elf.extend_from_slice(&need);
        let shoff = elf.len();
        elf[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        elf[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        let header = |ty: u32, off: usize, size: usize, link: u32, info: u32| {
            let mut h = vec![0u8; 64];
            h[4..8].copy_from_slice(&ty.to_le_bytes());
            h[24..32].copy_from_slice(&(off as u64).to_le_bytes());
            h[32..40].copy_from_slice(&(size as u64).to_le_bytes());
            h[40..44].copy_from_slice(&link.to_le_bytes());
            h[44..48].copy_from_slice(&info.to_le_bytes());
            h
        };
        elf.extend(header(0, 0, 0, 0, 0));
        elf.extend(header(3, str_off, strings.len(), 0, 0));
        elf.extend(header(SHT_GNU_VERNEED, need_off, need.len(), 1, 1));
        elf
    }

    #[test]
    fn a_binarys_need_is_its_highest_glibc_version() {
        for (names, want) in [
            (
                &["GLIBC_2.2.5", "GLIBC_2.34", "GLIBC_2.17", "GLIBC_PRIVATE"][..],
                Some(GlibcVersion(2, 34)),
            ),
            (&["GLIBC_2.9", "GLIBC_2.17"][..], Some(GlibcVersion(2, 17))),
            (&["GCC_3.0"][..], None),
            (&[][..], None),
        ] {
            assert_eq!(binary_needs(&elf_needing(names)), want, "{names:?}");
        }
    }

    #[test]
    fn what_is_not_an_elf_this_reader_knows_needs_nothing_known() {
        for bytes in [
            &b""[..],
            b"#!/bin/sh\n",
            b"\x7fELF\x01\x01",
            &[0x7f, b'E', b'L', b'F', 2, 1, 0],
        ] {
            assert_eq!(binary_needs(bytes), None);
        }
    }

    #[test]
    fn this_test_program_needs_some_glibc() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(binary_needs(&me).is_some_and(|v| v >= GlibcVersion(2, 2)));
    }
}
