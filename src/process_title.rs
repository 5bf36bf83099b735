//! This process's command line as others read it (`/proc/PID/cmdline`: `ps`, `pgrep -f`).
//!
//! The kernel reads a process's command line from its own memory, the argument strings the
//! program was started with, between the addresses `/proc/self/stat` gives (`arg_start`,
//! `arg_end`). [`set`] overwrites that area in place, as PostgreSQL and OpenSSH's
//! `setproctitle` do: the new text, then NUL bytes to the end, so nothing of the old arguments
//! can be read. The area does not grow: a title longer than the arguments is cut.
//!
//! Only for a process that has read its arguments for good: `std::env::args` reads the same
//! memory.

use std::fs;
use std::sync::OnceLock;

/// Where the arguments are, read once (see [`prepare`]).
static AREA: OnceLock<Option<(usize, usize)>> = OnceLock::new();

/// Reads where the arguments are now, so that [`set`] reads nothing (it runs on the way from a
/// verdict to the caller: `/proc/self/stat` is ~20 us, issue 28).
pub(crate) fn prepare() {
    AREA.get_or_init(argument_area);
}

/// Overwrites this process's command line with `title` (see the module doc). Does nothing where
/// the area cannot be found.
pub(crate) fn set(title: &str) {
    let Some((start, end)) = *AREA.get_or_init(argument_area) else {
        return;
    };
    let len = end - start;
    if len == 0 {
        return;
    }
    let text = title.as_bytes();
    let kept = text.len().min(len - 1);
    // SAFETY: [start, end) is this process's argument area, mapped and writable (the initial
    // stack), as the kernel reports it for this very process. Nothing else in firedup reads it
    // after the arguments were parsed (see the module doc).
    unsafe {
        let area = start as *mut u8;
        std::ptr::copy_nonoverlapping(text.as_ptr(), area, kept);
        std::ptr::write_bytes(area.add(kept), 0, len - kept);
    }
}

/// `arg_start` and `arg_end` of this process (fields 48 and 49 of `/proc/self/stat`).
fn argument_area() -> Option<(usize, usize)> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    parse_argument_area(&stat)
}

/// The fields after the command name, which may hold spaces and parentheses: read from the last
/// `)`. Field 3 (the state) is the first after it.
fn parse_argument_area(stat: &str) -> Option<(usize, usize)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(48 - 3);
    let start: usize = fields.next()?.parse().ok()?;
    let end: usize = fields.next()?.parse().ok()?;
    (start != 0 && end >= start).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_argument_area_is_read_past_a_command_name_with_spaces_and_parentheses() {
        // A real line of this form: 52 fields, the command name "a) b".
        let mut fields: Vec<String> = (3..=52).map(|n| n.to_string()).collect();
        fields[48 - 3] = "140737488347000".into();
        fields[49 - 3] = "140737488347100".into();
        let stat = format!("1234 (a) b) {}", fields.join(" "));
        assert_eq!(
            parse_argument_area(&stat),
            Some((140_737_488_347_000, 140_737_488_347_100))
        );
        assert_eq!(parse_argument_area("1234 (x) S 1 2"), None);
    }

    #[test]
    fn this_process_has_an_argument_area_that_holds_its_command_line() {
        let (start, end) = argument_area().expect("arg_start and arg_end");
        let cmdline = fs::read("/proc/self/cmdline").unwrap();
        assert_eq!(end - start, cmdline.len());
    }
}
