//! `firedup completions bash|zsh|fish` and `firedup man`: a shell's completion script and the
//! man page (roff), both generated from the clap definitions in `cli.rs`, so they never disagree
//! with `--help`. Both print to stdout (`firedup man | man -l -`).
//!
//! The man page is one page: the top-level command as clap_mangen renders it, then one section
//! per visible subcommand (its synopsis, description, options and notes), so `man firedup` covers
//! every flag of every subcommand. Hidden (internal `__*`) commands appear in neither. `cli.rs`
//! hands its clap command in (this file does not name the CLI's types).

use std::io::Write;

use anyhow::Result;
use clap_complete::Shell;

/// The shells `firedup completions` writes for (the contract's list).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

impl CompletionShell {
    fn shell(self) -> Shell {
        match self {
            CompletionShell::Bash => Shell::Bash,
            CompletionShell::Zsh => Shell::Zsh,
            CompletionShell::Fish => Shell::Fish,
        }
    }
}

/// Print the completion script for `shell` for the command line `cmd` on stdout.
pub fn completions(cmd: clap::Command, shell: CompletionShell) -> Result<i32> {
    let mut cmd = without_internal_commands(cmd);
    let mut out = Vec::new();
    clap_complete::generate(shell.shell(), &mut cmd, "firedup", &mut out);
    write_stdout(&out)
}

/// The command line as a user sees it: clap_complete offers hidden subcommands too, so the
/// internal `__*` ones are left out here (and from `help`'s list of names with them).
fn without_internal_commands(cmd: clap::Command) -> clap::Command {
    let visible: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    let mut user_facing = clap::Command::new("firedup")
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(cmd.is_subcommand_required_set())
        .subcommands(visible);
    if let Some(about) = cmd.get_about() {
        user_facing = user_facing.about(about.clone());
    }
    user_facing
}

/// Print the man page (roff) of the command line `cmd` on stdout.
pub fn man(cmd: clap::Command) -> Result<i32> {
    write_stdout(&man_page(cmd)?)
}

/// The whole man page: the top-level page, then a section per visible subcommand (those
/// sections replace clap_mangen's list of `firedup-run(1)` pages, which are not installed).
fn man_page(mut cmd: clap::Command) -> Result<Vec<u8>> {
    cmd.build();
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    for sub in visible_subcommands(&cmd) {
        subcommand_section(&mut out, sub, &format!("firedup {}", sub.get_name()))?;
    }
    // The top-level notes are the verdicts and their exit codes.
    let mut notes = Vec::new();
    man.render_extra_section(&mut notes)?;
    out.extend_from_slice(
        String::from_utf8_lossy(&notes)
            .replacen(".SH EXTRA", ".SH \"EXIT STATUS\"", 1)
            .as_bytes(),
    );
    man.render_version_section(&mut out)?;
    Ok(out)
}

/// The subcommands a user can call: not the internal `__*` ones, not clap's `help`.
fn visible_subcommands(cmd: &clap::Command) -> impl Iterator<Item = &clap::Command> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
}

/// One subcommand's section (`.SH "FIREDUP RUN"`), its parts as subsections, then its own
/// subcommands (`profiles show`) the same way.
fn subcommand_section(out: &mut Vec<u8>, sub: &clap::Command, path: &str) -> Result<()> {
    let sub = sub.clone().bin_name(path);
    let man = clap_mangen::Man::new(sub.clone());
    let mut part = Vec::new();
    man.render_synopsis_section(&mut part)?;
    man.render_description_section(&mut part)?;
    if sub.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut part)?;
    }
    if sub.get_after_help().is_some() || sub.get_after_long_help().is_some() {
        man.render_extra_section(&mut part)?;
    }
    writeln!(out, ".SH \"{}\"", path.to_uppercase())?;
    // The parts come as sections of their own; inside this one they are subsections.
    let part = String::from_utf8_lossy(&part)
        .replace("\n.SH ", "\n.SS ")
        .replace(".SS EXTRA", ".SS NOTES");
    let part = part
        .strip_prefix(".SH ")
        .map_or(part.clone(), |p| format!(".SS {p}"));
    out.extend_from_slice(part.as_bytes());
    for nested in visible_subcommands(&sub) {
        subcommand_section(out, nested, &format!("{path} {}", nested.get_name()))?;
    }
    Ok(())
}

fn write_stdout(bytes: &[u8]) -> Result<i32> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(bytes)?;
    stdout.flush()?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::CommandFactory;

    /// Every visible argument of every visible subcommand says what it does: the man page and
    /// `--help` are only as good as these descriptions.
    #[test]
    fn every_flag_of_every_subcommand_has_a_description() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in visible_subcommands(cmd) {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut cmd = Cli::command();
        cmd.build();
        let mut missing = Vec::new();
        walk(&cmd, "firedup", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
    }
}
