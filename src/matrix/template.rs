//! Templates: `{name}` replaced by its variable (an axis value, a `vars` entry, `{slot}`,
//! `{cell}`); only `{identifier}` is a template, so JSON and the shell's `${VAR}` are left alone,
//! and an unknown name is an error naming where it was written.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use regex::Regex;

fn template_re() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    // A `$` in front is the shell's `${VAR}`, left to the shell.
    RE.get_or_init(|| Regex::new(r"(\$?)\{([A-Za-z_][A-Za-z0-9_.-]*)\}").expect("valid regex"))
}

/// Replaces `{name}` by its variable; an unknown name is an error naming `what`.
pub fn expand(text: &str, vars: &BTreeMap<String, String>, what: &str) -> Result<String> {
    let mut missing = None;
    let out = template_re().replace_all(text, |c: &regex::Captures<'_>| {
        if !c[1].is_empty() {
            return c[0].to_string();
        }
        match vars.get(&c[2]) {
            Some(v) => v.clone(),
            None => {
                missing.get_or_insert_with(|| c[2].to_string());
                c[0].to_string()
            }
        }
    });
    if let Some(m) = missing {
        let known: Vec<&str> = vars.keys().map(String::as_str).collect();
        bail!(
            "{what}: unknown variable {{{m}}} (known: {})",
            known.join(", ")
        );
    }
    Ok(out.into_owned())
}

/// The `{name}`s written in `text` (the shell's `${VAR}` left out).
pub fn template_names(text: &str) -> impl Iterator<Item = &str> {
    template_re()
        .captures_iter(text)
        .filter(|c| c[1].is_empty())
        .filter_map(|c| c.get(2).map(|m| m.as_str()))
}
