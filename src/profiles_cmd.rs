//! `firedup profiles`: list the profiles that apply here, print one, or check a profile file.

use crate::judge::Mode;
use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Subcommand;

use crate::profile::{self, Origin, Profile, ProfileSet};

// What `firedup profiles` was asked to do besides listing: the command line's subcommand, here
// with the command so that cli.rs and this file do not import each other.
#[derive(Debug, Subcommand)]
pub enum ProfilesAction {
    /// Print one profile's TOML.
    Show {
        /// The profile's name (as `firedup profiles` lists it).
        name: String,
    },
    /// Validate a profile file: every error names its line and field.
    Check {
        /// The profile file (TOML) to check.
        file: PathBuf,
    },
}

/// Runs `firedup profiles [show NAME | check FILE]`.
pub fn profiles(action: Option<ProfilesAction>, files: &[PathBuf]) -> Result<i32> {
    match action {
        None => {
            let set = crate::profile::load_profile_set(files)?;
            print!("{}", render_list(&set));
            Ok(0)
        }
        Some(ProfilesAction::Show { name }) => {
            let set = crate::profile::load_profile_set(files)?;
            let Some((p, origin)) = set.profiles.iter().find(|(p, _)| p.name == name) else {
                set.by_name(&name)?;
                unreachable!("by_name fails for an unknown name");
            };
            match origin {
                Origin::Builtin => {
                    println!("# built-in profile {}", p.name);
                    print!("{}", profile::builtin_source(&p.name).unwrap_or_default());
                }
                Origin::File(f) => {
                    println!("# profile {} from {}", p.name, f.display());
                    print!("{}", std::fs::read_to_string(f)?);
                }
            }
            Ok(0)
        }
        Some(ProfilesAction::Check { file }) => {
            let p = profile::load_file(&file)?;
            let builtin = profile::builtin_profiles().iter().any(|b| b.name == p.name);
            println!(
                "{}: ok: profile {}{} ({} ready line(s), {} phase(s), {} signature rule(s), probes: {})",
                file.display(),
                p.name,
                if builtin {
                    " (replaces the built-in of that name)"
                } else {
                    ""
                },
                p.ready.len(),
                p.phases.len(),
                p.signatures.len(),
                probes_of(&p)
            );
            if p.detect.is_empty() {
                println!(
                    "  note: no detect patterns: it is used only with --profile {}",
                    p.name
                );
            }
            if p.ready.is_empty() && p.ready_probes.is_empty() && p.mode() != Mode::UntilExit {
                bail!(
                    "{}: profile {} has no ready lines and no ready_probes: firedup could never call it ready (add ready = [...] or until = \"exit\")",
                    file.display(),
                    p.name
                );
            }
            Ok(0)
        }
    }
}

fn probes_of(p: &Profile) -> String {
    if p.ready_probes.is_empty() {
        "none".into()
    } else {
        p.ready_probes
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join("+")
    }
}

fn render_list(set: &ProfileSet) -> String {
    let mut s = format!(
        "{:<10} {:<9} {:<8} {:<7} {}\n",
        "PROFILE", "SOURCE", "PROBES", "PORT", "PHASES"
    );
    for (p, origin) in &set.profiles {
        let source = match origin {
            Origin::Builtin => "built-in".to_string(),
            Origin::File(_) => "file".to_string(),
        };
        let port = p
            .endpoint
            .as_ref()
            .map(|e| e.default_port.to_string())
            .unwrap_or_else(|| "-".into());
        let phases = if p.phases.is_empty() {
            "-".to_string()
        } else {
            p.phases
                .iter()
                .map(|x| x.name.as_str())
                .collect::<Vec<_>>()
                .join(" → ")
        };
        s.push_str(&format!(
            "{:<10} {:<9} {:<8} {:<7} {phases}\n",
            p.name,
            source,
            probes_of(p),
            port
        ));
        s.push_str(&format!("{:<10} {}\n", "", p.description));
    }
    s.push_str("\n`firedup profiles show NAME` prints one; user profiles: --profile-file FILE or ");
    match profile::user_profile_dir() {
        Some(d) => s.push_str(&format!("{}/*.toml\n", d.display())),
        None => s.push_str("$XDG_CONFIG_HOME/firedup/profiles/*.toml\n"),
    }
    s
}
