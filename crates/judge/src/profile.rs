//! Profiles: what firedup knows about one kind of server, as data.
//!
//! A profile (TOML) says for one server: how to recognise it from its command line (`detect`), the
//! log lines that mean ready (`ready`, all must be seen), its startup phases in order (`[[phase]]`),
//! its noise lines, its own failure signatures (on top of the common catalog), where it listens and
//! how to ask it whether it is usable (`[endpoint]`), which probes count towards readiness by
//! default (`ready_probes`; with `ready_by_probe`, the probes alone when they run), and its
//! stall/timeout defaults.
//!
//! Built-in profiles are embedded in the crate. User profiles are read from files by the shell
//! (the `firedup` library) and parsed here with [`parse_checked`]; a user profile with a
//! built-in's name replaces it ([`ProfileSet::insert`]). `generic` knows nothing beyond the common catalog, so
//! `--ready-line` alone works on anything.

use std::path::PathBuf;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::classify::SignatureSpec;
use crate::mode::Mode;

mod address_url;
mod check;
mod wrappers;

pub use address_url::url;
pub use check::parse_checked;

/// One startup phase: the line that begins it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    /// The phase's name (in the timeline and `--phase-timeout NAME=...`).
    pub name: String,
    /// The regex of the line that begins it.
    pub pattern: String,
    /// Real lines that begin it (checked: each must begin this phase).
    #[serde(default)]
    pub examples: Vec<String>,
}

/// A probe that can count towards readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    /// The TCP port accepts connections, and the listener belongs to the watched process tree.
    Port,
    /// The health URL answers 2xx.
    Http,
    /// A tiny real request returns tokens.
    Request,
    /// The command sent `READY=1` on `NOTIFY_SOCKET` (sd_notify).
    Notify,
}

impl ProbeKind {
    /// The probe's name (`port`, `http`, `request`, `notify`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::Port => "port",
            ProbeKind::Http => "http",
            ProbeKind::Request => "request",
            ProbeKind::Notify => "notify",
        }
    }
}

/// The shape of the tiny real request sent by `--ready-request`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// OpenAI-compatible: `GET /v1/models` for the model id, then a 1-token `POST /v1/completions`.
    Openai,
    /// Hugging Face TGI: a 1-token `POST /generate`.
    Tgi,
}

/// Where the server listens and how to ask it whether it is usable.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointSpec {
    /// Flags whose value is the listen host (`--host 0.0.0.0`, `--host=0.0.0.0`).
    #[serde(default)]
    pub host_flags: Vec<String>,
    /// Flags whose value is the listen port (`--port 30000`, `-p 5432`).
    #[serde(default)]
    pub port_flags: Vec<String>,
    /// An environment variable holding `host:port`, `host`, `:port` or a bare port (e.g.
    /// `OLLAMA_HOST`, `LLAMA_ARG_PORT`).
    #[serde(default)]
    pub addr_env: Option<String>,
    /// The host when nothing else says (`127.0.0.1`).
    #[serde(default = "default_host")]
    pub default_host: String,
    /// The port when nothing else says.
    pub default_port: u16,
    /// Health path for the HTTP probe (e.g. `/health`); none for servers without HTTP.
    #[serde(default)]
    pub health: Option<String>,
    /// The real-request shape this server understands, for `--ready-request`.
    #[serde(default)]
    pub request: Option<RequestKind>,
    /// The scheme of its URL when it is not `http` (`redis`, `postgresql`).
    #[serde(default)]
    pub scheme: Option<String>,
}

fn default_host() -> String {
    "127.0.0.1".into()
}

/// One profile file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The profile's name (`--profile NAME`).
    pub name: String,
    /// What server it is for, in words.
    pub description: String,
    /// Regexes matched against the command line (arguments joined by spaces); any one matching
    /// selects this profile.
    #[serde(default)]
    pub detect: Vec<String>,
    /// Command lines this profile must recognise (checked by the tests and `profiles check`).
    #[serde(default)]
    pub detect_examples: Vec<String>,
    /// Log lines that mean ready (regexes; all must be seen).
    #[serde(default)]
    pub ready: Vec<String>,
    /// Probes that must also pass before `ready`, unless `--no-probe` (e.g. `["http"]`).
    #[serde(default)]
    pub ready_probes: Vec<ProbeKind>,
    /// While the profile's own readiness probes run, they alone decide readiness and the
    /// `ready` lines are not waited for (the lines are the condition under `--no-probe`, also
    /// beside a `--port` probe): for a server whose own health answer is the authority
    /// (llama-server's /health, 503 until the model is loaded) and whose ready line's wording
    /// has changed from version to version.
    #[serde(default)]
    pub ready_by_probe: bool,
    /// `ready` (server, the default) or `exit` (a job), as written: [`Profile::mode`] is the
    /// typed value. Kept as text so that a wrong value is reported by `validate` naming the field
    /// and its line, as for every other field.
    #[serde(default)]
    pub until: Option<String>,
    /// After ready, keep watching this long before the verdict (for servers that print their
    /// ready line before the last step that can still fail, like TGI's `Connected` before its bind).
    #[serde(default)]
    pub hold: Option<String>,
    /// How long the ready condition must stand, with no fatal line and no exit, before the
    /// verdict is `ready` (default 500ms; "off" for none). A `hold` replaces it.
    #[serde(default)]
    pub confirm: Option<String>,
    /// Regexes of noise lines (not kept as context).
    #[serde(default)]
    pub noise: Vec<String>,
    /// The default stall window (a duration, or `off`).
    #[serde(default)]
    pub stall: Option<String>,
    /// The default start deadline (a duration, or `off`).
    #[serde(default)]
    pub timeout: Option<String>,
    /// Where the server listens and how to probe it.
    #[serde(default)]
    pub endpoint: Option<EndpointSpec>,
    /// The startup phases, in order.
    #[serde(default, rename = "phase")]
    pub phases: Vec<PhaseSpec>,
    /// Failure signatures of this server, on top of the catalog.
    #[serde(default, rename = "signature")]
    pub signatures: Vec<SignatureSpec>,
}

impl Profile {
    /// What a watch under this profile waits for: `until = "exit"` is a job, anything else
    /// (absent, `"ready"`) a server.
    pub fn mode(&self) -> Mode {
        self.until
            .as_deref()
            .and_then(Mode::from_name)
            .unwrap_or_default()
    }
}

const BUILTIN: [&str; 11] = [
    include_str!("profiles/sglang.toml"),
    include_str!("profiles/vllm.toml"),
    include_str!("profiles/tgi.toml"),
    include_str!("profiles/llamacpp.toml"),
    include_str!("profiles/llama_cpp_python.toml"),
    include_str!("profiles/ollama.toml"),
    include_str!("profiles/triton.toml"),
    include_str!("profiles/pytorch.toml"),
    include_str!("profiles/postgres.toml"),
    include_str!("profiles/redis.toml"),
    include_str!("profiles/generic.toml"),
];

/// The TOML text of the built-in profile called `name`, as embedded.
pub fn builtin_source(name: &str) -> Option<&'static str> {
    BUILTIN
        .iter()
        .copied()
        .find(|t| toml::from_str::<Profile>(t).is_ok_and(|p| p.name == name))
}

/// Where a profile came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Embedded in firedup.
    Builtin,
    /// Read from this file.
    File(PathBuf),
}

/// All profiles that apply: built-ins, overridden by name by user profiles.
#[derive(Debug, Clone)]
pub struct ProfileSet {
    /// Each profile and where it came from, in detection order.
    pub profiles: Vec<(Profile, Origin)>,
}

/// The built-in profiles, in detection order.
pub fn builtin_profiles() -> Vec<Profile> {
    BUILTIN
        .iter()
        .map(|t| toml::from_str(t).expect("embedded profiles are valid"))
        .collect()
}

impl ProfileSet {
    /// Built-ins only.
    pub fn builtin() -> ProfileSet {
        ProfileSet {
            profiles: builtin_profiles()
                .into_iter()
                .map(|p| (p, Origin::Builtin))
                .collect(),
        }
    }

    /// Adds a profile; one with the same name replaces it.
    pub fn insert(&mut self, p: Profile, origin: Origin) {
        if let Some(slot) = self.profiles.iter_mut().find(|(q, _)| q.name == p.name) {
            *slot = (p, origin);
        } else {
            // User profiles are tried before the built-ins when detecting (they are more specific),
            // but after any user profile loaded before them.
            let at = self
                .profiles
                .iter()
                .position(|(_, o)| *o == Origin::Builtin)
                .unwrap_or(self.profiles.len());
            self.profiles.insert(at, (p, origin));
        }
    }

    /// The profile called `name`.
    pub fn by_name(&self, name: &str) -> Result<Profile, ProfileError> {
        match self.profiles.iter().find(|(p, _)| p.name == name) {
            Some((p, _)) => Ok(p.clone()),
            None => Err(ProfileError(format!(
                "unknown profile '{name}': the known profiles are {} (see `firedup profiles`)",
                self.names().join(", ")
            ))),
        }
    }

    /// The profiles' names.
    pub fn names(&self) -> Vec<String> {
        self.profiles.iter().map(|(p, _)| p.name.clone()).collect()
    }

    /// The first profile whose `detect` patterns match the command line, or `generic`.
    pub fn detect(&self, command: &[String]) -> Result<Profile, ProfileError> {
        let line = command.join(" ");
        // `runuser -u redis -- redis-server ...`: the server under its wrappers is recognised too.
        let inner = wrappers::unwrapped(command).join(" ");
        for (p, _) in &self.profiles {
            for d in &p.detect {
                let re = Regex::new(d).map_err(|e| {
                    ProfileError(format!("profile {} has a bad detect pattern: {e}", p.name))
                })?;
                if re.is_match(&line) || re.is_match(&inner) {
                    return Ok(p.clone());
                }
            }
        }
        self.by_name("generic")
    }
}

/// The built-in profile called `name`.
pub fn by_name(name: &str) -> Result<Profile, ProfileError> {
    ProfileSet::builtin().by_name(name)
}

/// The built-in profile whose `detect` pattern matches the command line, or `generic`.
pub fn detect(command: &[String]) -> Result<Profile, ProfileError> {
    ProfileSet::builtin().detect(command)
}

/// A profile that cannot be found or used, in one sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileError(pub String);

impl std::fmt::Display for ProfileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProfileError {}

/// Host and port the server listens on, from its arguments, environment and the profile defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// The host to connect to.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The URL's scheme when it is not `http` (the profile's `endpoint.scheme`: `redis`).
    pub scheme: Option<String>,
}

impl Address {
    /// The address to connect to: a wildcard bind (`0.0.0.0`, `::`) is reached on loopback.
    pub fn connect_host(&self) -> &str {
        match self.host.as_str() {
            "0.0.0.0" | "" | "*" => "127.0.0.1",
            "::" | "[::]" => "::1",
            h => h,
        }
    }

    /// `http://host:port` for the connect host (`redis://...` for a profile whose scheme is
    /// not http), as reached from the machine the server runs on.
    pub fn base_url(&self) -> String {
        url(self.scheme.as_deref(), self.connect_host(), self.port)
    }
}

/// Derives the listen address from the command line (`--port 8000`, `--port=8000`, `-p8000`) and
/// the environment, falling back to the profile's defaults.
pub fn derive_address(
    e: &EndpointSpec,
    command: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Address {
    let mut addr = Address {
        host: e.default_host.clone(),
        port: e.default_port,
        scheme: e.scheme.clone(),
    };
    if let Some(var) = &e.addr_env {
        if let Some(v) = env(var).filter(|v| !v.is_empty()) {
            let v = v
                .trim_start_matches("http://")
                .trim_start_matches("https://");
            let v = v.trim_end_matches('/');
            if let Ok(port) = v.parse::<u16>() {
                // A bare port (`PORT=8080`, `LLAMA_ARG_PORT=8080`).
                addr.port = port;
                return with_flags(addr, e, command);
            }
            match v.rsplit_once(':') {
                Some((h, p)) if p.parse::<u16>().is_ok() => {
                    if !h.is_empty() {
                        addr.host = h.trim_matches(['[', ']']).to_string();
                    }
                    addr.port = p.parse().expect("checked");
                }
                _ => addr.host = v.to_string(),
            }
        }
    }
    with_flags(addr, e, command)
}

/// Flags on the command line win over the environment and the defaults.
fn with_flags(mut addr: Address, e: &EndpointSpec, command: &[String]) -> Address {
    if let Some(h) = flag_value(command, &e.host_flags) {
        addr.host = h;
    }
    if let Some(p) = flag_value(command, &e.port_flags).and_then(|p| p.parse().ok()) {
        addr.port = p;
    }
    addr
}

/// The value of the last occurrence of any of `flags` in `command`.
pub fn flag_value(command: &[String], flags: &[String]) -> Option<String> {
    let mut found = None;
    let mut i = 0;
    while i < command.len() {
        let a = &command[i];
        for f in flags {
            if a == f {
                if let Some(v) = command.get(i + 1) {
                    found = Some(v.clone());
                }
            } else if let Some(v) = a.strip_prefix(&format!("{f}=")) {
                found = Some(v.to_string());
            } else if f.len() == 2 && !f.starts_with("--") && a.starts_with(f.as_str()) {
                // Short flags take their value glued on: `-p5432`.
                found = Some(a[2..].to_string());
            }
        }
        i += 1;
    }
    found
}

#[cfg(test)]
mod tests;
