//! `firedup completions bash|zsh|fish` and `firedup man` through the real binary: the scripts
//! name the subcommands and their flags and are accepted by their shell where it is installed;
//! the man page is roff with NAME and SYNOPSIS, covers every subcommand, and renders cleanly.

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::Env;

fn stdout_of(args: &[&str]) -> String {
    let run = Env::new().firedup(args);
    assert_eq!(run.code, 0, "firedup {args:?} failed: {}", run.stderr);
    run.stdout
}

/// Where `program` is installed, if it is.
fn installed(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `shell` with `flags` on `script` (a file), returning whether it accepted it and its stderr.
fn shell_accepts(shell: &str, flags: &[&str], script: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("completion");
    std::fs::write(&file, script).unwrap();
    let out = Command::new(shell).args(flags).arg(&file).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const SUBCOMMANDS: &[&str] = &[
    "run",
    "watch",
    "stop",
    "ps",
    "logs",
    "matrix",
    "history",
    "show",
    "compare",
    "completions",
    "man",
];

#[test]
fn the_bash_script_completes_subcommands_and_flags_and_bash_accepts_it() {
    let script = stdout_of(&["completions", "bash"]);
    for name in SUBCOMMANDS {
        assert!(script.contains(name), "no {name} in the bash script");
    }
    for flag in ["--until", "--json", "--profile", "--timeout", "--stall"] {
        assert!(script.contains(flag), "no {flag} in the bash script");
    }
    assert!(
        !script.contains("__supervise"),
        "internal commands are offered"
    );
    let (ok, err) = shell_accepts("bash", &["-n"], &script);
    assert!(ok, "bash -n refused the script: {err}");
}

#[test]
fn the_zsh_and_fish_scripts_name_the_flags_and_their_shells_accept_them() {
    let zsh = stdout_of(&["completions", "zsh"]);
    assert!(zsh.starts_with("#compdef firedup"), "{}", &zsh[..80]);
    let fish = stdout_of(&["completions", "fish"]);
    assert!(fish.contains("complete -c firedup"));
    for script in [&zsh, &fish] {
        for needle in ["until", "watch", "compare", "completions"] {
            assert!(script.contains(needle), "no {needle}");
        }
    }
    // Where the shells are installed they check the syntax too.
    if installed("zsh") {
        let (ok, err) = shell_accepts("zsh", &["-n"], &zsh);
        assert!(ok, "zsh -n refused the script: {err}");
    }
    if installed("fish") {
        let (ok, err) = shell_accepts("fish", &["--no-execute"], &fish);
        assert!(ok, "fish --no-execute refused the script: {err}");
    }
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let run = Env::new().firedup(&["completions", "tcsh"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}

#[test]
fn the_man_page_is_roff_with_a_section_per_subcommand_and_every_flag() {
    let page = stdout_of(&["man"]);
    assert!(page.contains(".TH firedup 1"), "no title: {}", &page[..200]);
    for section in [
        ".SH NAME",
        ".SH SYNOPSIS",
        ".SH DESCRIPTION",
        ".SH \"EXIT STATUS\"",
    ] {
        assert!(page.contains(section), "no {section}");
    }
    for name in SUBCOMMANDS {
        let heading = format!(".SH \"FIREDUP {}\"", name.to_uppercase());
        assert!(page.contains(&heading), "no section {heading}");
    }
    // Flags of several subcommands, as roff writes them (`-` escaped).
    for flag in [
        "until",
        "ready\\-line",
        "log\\-grace",
        "older\\-than",
        "sbatch\\-arg",
    ] {
        assert!(
            page.contains(&format!("\\fB\\-\\-{flag}\\fR")),
            "no --{flag}"
        );
    }
    assert!(!page.contains("__supervise"), "internal commands listed");
    assert!(
        !page.contains("firedup\\-run(1)"),
        "names pages that do not exist"
    );
}

#[test]
fn groff_renders_the_man_page_without_warnings() {
    if !installed("groff") {
        eprintln!("groff is not installed: the roff is checked by content only");
        return;
    }
    let page = stdout_of(&["man"]);
    let mut groff = Command::new("groff")
        // -P-cbou: plain text, no overstriking, so the headings read as words.
        .args(["-man", "-Tutf8", "-ww", "-P-cbou"])
        .env("MANWIDTH", "80")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    groff
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = groff.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("NAME") && text.contains("SYNOPSIS"), "{text}");
    assert!(text.contains("FIREDUP RUN"), "{text}");
}
