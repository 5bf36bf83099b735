//! A reader that stops reading is not an error: `firedup history | head -1` ends quietly.
//!
//! Rust ignores SIGPIPE, so a write to a pipe whose reader has gone fails with `EPIPE`: `println!`
//! panics ("failed printing to stdout: Broken pipe") and a `write!` returns an `io::Error` of kind
//! `BrokenPipe`. Rather than a special case in every command, the entry point catches both
//! (see `cli::main`): no message, and the exit status a writer killed by SIGPIPE would have had
//! (141, visible under `set -o pipefail`), like `git log | head -1`.

use std::any::Any;
use std::io::ErrorKind;

/// 128 + SIGPIPE: how a shell reports a writer whose reader went away.
pub const EXIT_CODE: i32 = 128 + libc::SIGPIPE;

/// Makes the panic hook silent for a print to a closed pipe; every other panic is reported by
/// the hook that was there before.
pub fn install() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.payload_as_str().is_some_and(is_closed_pipe_message) {
            previous(info);
        }
    }));
}

/// Whether a panic's payload is the standard library's failed print to a closed pipe.
pub fn is_closed_pipe_panic(payload: &(dyn Any + Send)) -> bool {
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    is_closed_pipe_message(text)
}

fn is_closed_pipe_message(text: &str) -> bool {
    (text.starts_with("failed printing to stdout") || text.starts_with("failed printing to stderr"))
        && text.contains(&std::io::Error::from_raw_os_error(libc::EPIPE).to_string())
}

/// Whether an error is (or was caused by) a write to a closed pipe.
pub fn is_closed_pipe_error(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        // The library's own error shows an I/O failure through (not as) its source.
        let io = match cause.downcast_ref::<firedup::error::Error>() {
            Some(firedup::error::Error::Os(io) | firedup::error::Error::Io { source: io, .. }) => {
                Some(io)
            }
            _ => cause.downcast_ref::<std::io::Error>(),
        };
        io.is_some_and(|io| io.kind() == ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_print_to_a_closed_pipe_is_quiet() {
        let table = [
            // What the standard library says (strerror of EPIPE on Linux).
            ("failed printing to stdout: Broken pipe (os error 32)", true),
            ("failed printing to stderr: Broken pipe (os error 32)", true),
            (
                "failed printing to stdout: No space left on device (os error 28)",
                false,
            ),
            ("index out of bounds: Broken pipe (os error 32)", false),
            ("", false),
        ];
        for (text, quiet) in table {
            assert_eq!(is_closed_pipe_message(text), quiet, "{text}");
            let boxed: Box<dyn Any + Send> = Box::new(text.to_string());
            assert_eq!(is_closed_pipe_panic(boxed.as_ref()), quiet, "{text}");
        }
    }

    #[test]
    fn a_closed_pipe_anywhere_in_the_chain_counts() {
        let pipe = anyhow::Error::from(std::io::Error::from(ErrorKind::BrokenPipe));
        assert!(is_closed_pipe_error(&pipe.context("writing the table")));
        let other = anyhow::Error::from(std::io::Error::from(ErrorKind::NotFound));
        assert!(!is_closed_pipe_error(&other));
        assert!(!is_closed_pipe_error(&anyhow::anyhow!("Broken pipe")));
    }
}
