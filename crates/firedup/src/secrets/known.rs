//! Secret values firedup knows by name, redacted wherever they appear in text it shows or
//! stores: a server that prints its own `--api-key`, an env dump that shows
//! `MY_SERVICE_PASSWD`, a `server_args=` line with `api_key='...'`, all from the one place
//! the value came from.
//!
//! Learnt from the launch (the `--env` values and the command's flag values whose name says
//! secret: [`learn_launch`]) and from firedup's own environment (what the server inherits), once,
//! on first use. Process-wide: every place that redacts text (`redact_values`) sees them.

use std::sync::{OnceLock, RwLock};

use super::looks_secret;

/// Shorter values are not taken as known secrets: a word like `user` or `tty` (systemd's
/// `XDG_SESSION_CLASS`) would be cut out of every line. Shorter secrets still go by the name
/// forms (`key=value`, `--flag value`) and shapes.
const MIN_LEN: usize = 6;

fn store() -> &'static RwLock<Vec<String>> {
    static KNOWN: OnceLock<RwLock<Vec<String>>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        let mut v = Vec::new();
        for (k, val) in std::env::vars_os() {
            if let (Some(k), Some(val)) = (k.to_str(), val.to_str()) {
                if looks_secret(k) {
                    add(&mut v, val);
                }
            }
        }
        RwLock::new(v)
    })
}

/// Adds `value` as a secret, unless it is too short or says no more than a path or a socket
/// (`SSH_AUTH_SOCK=/tmp/ssh-x/agent.1`: a name that says AUTH, a value that is no secret).
fn add(known: &mut Vec<String>, value: &str) {
    let value = value.trim();
    if value.chars().count() < MIN_LEN
        || value.starts_with('/')
        || value.starts_with("unix:")
        || value == super::REDACTED
        || known.iter().any(|k| k == value)
    {
        return;
    }
    known.push(value.to_string());
    // Longest first: a secret that contains another is replaced whole.
    known.sort_by_key(|k| std::cmp::Reverse(k.len()));
}

/// Learns the secret values of a launch: `env` values whose name says secret, and the values of
/// the command's secret-named flags (`--api-key K`, `--hf-token=T`).
pub fn learn_launch(env: &[(String, String)], command: &[String]) {
    let Ok(mut known) = store().write() else {
        return;
    };
    for (k, v) in env {
        if looks_secret(k) {
            add(&mut known, v);
        }
    }
    for v in super::secret_flag_values(command) {
        add(&mut known, v);
    }
}

/// `text` with every known secret value replaced, or None when it holds none.
pub(super) fn replace_known(text: &str) -> Option<String> {
    let known = store().read().ok()?;
    if !known.iter().any(|k| text.contains(k.as_str())) {
        return None;
    }
    let mut out = text.to_string();
    for k in known.iter() {
        if out.contains(k.as_str()) {
            out = out.replace(k.as_str(), super::REDACTED);
        }
    }
    Some(out)
}
