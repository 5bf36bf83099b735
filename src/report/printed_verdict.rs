//! The verdict as printed on stdout: the final block (its verdict word coloured on a colour
//! terminal: green for ready/succeeded, red for a failure, yellow for a watch that could not
//! decide; never with NO_COLOR set, TERM=dumb, or stdout not a terminal, so a pipe or a file gets
//! no escape codes), or the JSON verdict, with the `--then` command's status beside it.
//!
//! The colour is plain SGR codes: no colour crate is a dependency of this binary (indicatif's
//! own styling is for the progress display on stderr).

use std::io::IsTerminal;

use super::render_final;
use crate::verdict::{Outcome, Verdict};

/// Whether stdout takes colour: a terminal, NO_COLOR unset or empty (no-color.org: a non-empty
/// value turns colour off), TERM not `dumb`.
fn stdout_takes_colour() -> bool {
    std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

/// The verdict's word in capitals (`READY`), coloured when stdout takes colour.
pub fn verdict_word(v: Verdict) -> String {
    coloured_word(v, stdout_takes_colour())
}

/// The word, with its SGR colour when `colour`.
fn coloured_word(v: Verdict, colour: bool) -> String {
    let word = v.as_str().to_uppercase();
    if !colour {
        return word;
    }
    let sgr = match v {
        Verdict::Ready | Verdict::Succeeded => "1;32",
        Verdict::Stalled | Verdict::TimedOut | Verdict::MonitorError => "1;33",
        _ => "1;31",
    };
    format!("\x1b[{sgr}m{word}\x1b[0m")
}

/// The `then:` line: CMD's status, and, when it failed, that firedup's exit code stays the
/// verdict's.
pub fn then_line(cmd: &str, code: i32, verdict_code: i32) -> String {
    let cmd = crate::secrets::redact_text(cmd);
    if code == 0 {
        format!("  then:    '{cmd}' exited 0")
    } else {
        format!(
            "  then:    '{cmd}' FAILED: exit code {code} (firedup exits {verdict_code}, the verdict's code; CMD's is the JSON's then.exit_code)"
        )
    }
}

/// Prints the verdict: the final block, or the JSON verdict under `--json` (with the `--then`
/// command's exit when one ran).
pub fn print_outcome(json: bool, o: &Outcome, teardown: Option<&str>, then: Option<(&str, i32)>) {
    if json {
        let mut v = serde_json::to_value(o).unwrap_or_default();
        if let (Some((cmd, code)), Some(map)) = (then, v.as_object_mut()) {
            map.insert(
                "then".into(),
                serde_json::json!({"command": crate::secrets::redact_text(cmd), "exit_code": code}),
            );
            if code != 0 {
                eprintln!(
                    "firedup: --then '{}' failed with exit code {code}; firedup exits {}, the verdict's code",
                    crate::secrets::redact_text(cmd),
                    o.verdict.exit_code()
                );
            }
        }
        println!("{v}");
    } else {
        print!("{}", render_final(o, teardown));
        if let Some((cmd, code)) = then {
            println!("{}", then_line(cmd, code, o.verdict.exit_code()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_word_is_coloured_only_when_asked() {
        let table: &[(Verdict, bool, &str)] = &[
            (Verdict::Ready, true, "\x1b[1;32mREADY\x1b[0m"),
            (Verdict::Succeeded, true, "\x1b[1;32mSUCCEEDED\x1b[0m"),
            (Verdict::Failed, true, "\x1b[1;31mFAILED\x1b[0m"),
            (
                Verdict::NeverStarted,
                true,
                "\x1b[1;31mNEVER_STARTED\x1b[0m",
            ),
            (Verdict::Stalled, true, "\x1b[1;33mSTALLED\x1b[0m"),
            (Verdict::Ready, false, "READY"),
            (Verdict::Failed, false, "FAILED"),
        ];
        for (v, colour, want) in table {
            assert_eq!(coloured_word(*v, *colour), *want, "{v:?} {colour}");
        }
    }
}
