//! Profiles: what firedup knows about one kind of server, as data (TOML embedded in the binary):
//! how to recognise it from its command line, its readiness lines, startup phases, noise, extra
//! failure signatures and default stall/timeout. `generic` knows nothing beyond the common catalog,
//! so `--ready-line` alone works on anything.

use anyhow::{Context, Result, bail};
use regex::Regex;
use serde::Deserialize;

use crate::classify::SignatureSpec;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    pub name: String,
    pub pattern: String,
}

/// One profile file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub detect: Option<String>,
    #[serde(default)]
    pub ready: Vec<String>,
    #[serde(default)]
    pub noise: Vec<String>,
    #[serde(default)]
    pub stall: Option<String>,
    #[serde(default)]
    pub timeout: Option<String>,
    #[serde(default, rename = "phase")]
    pub phases: Vec<PhaseSpec>,
    #[serde(default, rename = "signature")]
    pub signatures: Vec<SignatureSpec>,
}

const BUILTIN: [&str; 3] = [
    include_str!("profiles/generic.toml"),
    include_str!("profiles/redis.toml"),
    include_str!("profiles/postgres.toml"),
];

/// The built-in profiles.
pub fn builtin_profiles() -> Vec<Profile> {
    BUILTIN
        .iter()
        .map(|t| toml::from_str(t).expect("embedded profiles are valid"))
        .collect()
}

/// The profile called `name`.
pub fn by_name(name: &str) -> Result<Profile> {
    let all = builtin_profiles();
    match all.iter().find(|p| p.name == name) {
        Some(p) => Ok(p.clone()),
        None => bail!(
            "unknown profile '{name}': the built-in profiles are {}",
            all.iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The profile whose `detect` pattern matches the command line, or `generic`.
pub fn detect(command: &[String]) -> Result<Profile> {
    let line = command.join(" ");
    for p in builtin_profiles() {
        if let Some(d) = &p.detect {
            let re = Regex::new(d)
                .with_context(|| format!("profile {} has a bad detect pattern", p.name))?;
            if re.is_match(&line) {
                return Ok(p);
            }
        }
    }
    by_name("generic")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_servers_from_their_command_lines() {
        let table: &[(&[&str], &str)] = &[
            (&["redis-server", "--port", "7000"], "redis"),
            (&["/usr/bin/redis-server", "/etc/redis.conf"], "redis"),
            (
                &[
                    "setpriv",
                    "--reuid=postgres",
                    "/usr/lib/postgresql/15/bin/postgres",
                    "-D",
                    "/d",
                ],
                "postgres",
            ),
            (&["python3", "-m", "http.server"], "generic"),
            (&["redis-cli", "ping"], "generic"),
        ];
        for (cmd, want) in table {
            let cmd: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
            assert_eq!(detect(&cmd).unwrap().name, *want, "{cmd:?}");
        }
    }

    #[test]
    fn profile_examples_resolve_to_their_signature() {
        for p in builtin_profiles() {
            let c = crate::classify::Classifier::new(&crate::classify::ClassifierSpec {
                signatures: p.signatures.clone(),
                ready_lines: p.ready.clone(),
                noise: p.noise.clone(),
                phases: p
                    .phases
                    .iter()
                    .map(|x| (x.name.clone(), x.pattern.clone()))
                    .collect(),
                ..Default::default()
            })
            .unwrap();
            for s in &p.signatures {
                for e in &s.examples {
                    let got = c
                        .classify(e)
                        .strongest()
                        .and_then(|h| h.signature)
                        .map(|s| s.as_str().to_string());
                    assert_eq!(got.as_deref(), Some(s.name.as_str()), "{}: {e}", p.name);
                }
            }
        }
    }

    #[test]
    fn unknown_profile_names_the_known_ones() {
        let err = by_name("nope").unwrap_err().to_string();
        assert!(err.contains("generic") && err.contains("redis"), "{err}");
    }
}
