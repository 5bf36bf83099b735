//! Checking a profile file: parsing it and everything that can be checked without running it
//! (names, regexes, durations, `until`, phases, probes and their endpoint, detect examples, that
//! each signature example resolves to its signature and that each phase example begins its
//! phase). Errors name the line and the field.

use regex::Regex;

use super::{ProbeKind, Profile};
use crate::mode::Mode;

/// Parses a profile and checks everything that can be checked without running it. Errors read
/// `LINE: field FIELD: what is wrong` (the caller prefixes the file name).
pub fn parse_checked(text: &str) -> std::result::Result<Profile, String> {
    let p: Profile = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_of_offset(text, s.start)).unwrap_or(0);
        let msg = e.message().trim().to_string();
        format!("{line}: {msg}")
    })?;
    validate(&p, text)?;
    Ok(p)
}

fn line_of_offset(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The line of `needle` in the file, for error messages about values: written as a TOML string
/// (`'RE'`, `"RE"`) or as a key (`stall =`) first, outside comments, so that a value that also
/// occurs inside another (`.*` in `'Uvicorn.*running'`) or in a comment is not taken for it.
fn line_of_value(text: &str, needle: &str) -> usize {
    let basic = needle.replace('\\', "\\\\").replace('"', "\\\"");
    let forms = [format!("'{needle}'"), format!("\"{basic}\"")];
    let is_key = |l: &str| {
        l.trim_start()
            .strip_prefix(needle)
            .is_some_and(|rest| rest.trim_start().starts_with('='))
    };
    // A comment is no value's line.
    let find = |hit: &dyn Fn(&str) -> bool| {
        text.lines()
            .position(|l| !l.trim_start().starts_with('#') && hit(l))
            .map(|i| i + 1)
    };
    find(&|l: &str| forms.iter().any(|f| l.contains(f.as_str())))
        .or_else(|| find(&is_key))
        .or_else(|| find(&|l: &str| l.contains(needle)))
        .unwrap_or(0)
}

fn validate(p: &Profile, text: &str) -> std::result::Result<(), String> {
    // Every mistake is reported, each at its own line: one round trip, not one per mistake.
    let mut errors: Vec<(usize, String)> = Vec::new();
    let err = |field: String, value: &str, what: String| {
        let line = line_of_value(text, value);
        (line, format!("{line}: field {field}: {what}"))
    };
    if p.name.is_empty()
        || !p
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        errors.push(err(
            "name".into(),
            "name",
            format!(
                "'{}' is not a valid profile name (letters, digits, _ and -)",
                p.name
            ),
        ));
    }
    let regex_fields = p
        .detect
        .iter()
        .enumerate()
        .map(|(i, r)| (format!("detect[{i}]"), r))
        .chain(
            p.ready
                .iter()
                .enumerate()
                .map(|(i, r)| (format!("ready[{i}]"), r)),
        )
        .chain(
            p.noise
                .iter()
                .enumerate()
                .map(|(i, r)| (format!("noise[{i}]"), r)),
        )
        .chain(
            p.phases
                .iter()
                .map(|ph| (format!("phase {}: pattern", ph.name), &ph.pattern)),
        )
        .chain(p.signatures.iter().flat_map(|s| {
            s.patterns
                .iter()
                .enumerate()
                .map(move |(i, r)| (format!("signature {}: patterns[{i}]", s.name), r))
        }));
    for (field, re) in regex_fields {
        if let Err(e) = Regex::new(re) {
            let msg = e.to_string();
            let msg = msg.lines().last().unwrap_or("").trim();
            errors.push(err(field, re, format!("invalid regex '{re}': {msg}")));
        }
    }
    for (i, re) in p.ready.iter().enumerate() {
        if let Some(why) = crate::classify::matches_every_line(re) {
            errors.push(err(format!("ready[{i}]"), re, format!("'{re}' {why}")));
        }
    }
    for s in &p.signatures {
        if crate::verdict::Signature::from_name(&s.name).is_none() {
            errors.push(err(
                "signature.name".into(),
                &s.name,
                format!(
                    "unknown signature '{}': use one of {}",
                    s.name,
                    crate::verdict::Signature::ALL
                        .iter()
                        .map(|x| x.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    for (field, v) in [
        ("stall", &p.stall),
        ("timeout", &p.timeout),
        ("hold", &p.hold),
        ("confirm", &p.confirm),
    ] {
        if let Some(v) = v {
            if v != "off" {
                if let Err(e) = crate::duration::parse_duration(v) {
                    errors.push(err(field.into(), field, e.to_string()));
                }
            }
        }
    }
    if let Some(u) = &p.until {
        if Mode::from_name(u).is_none() {
            errors.push(err(
                "until".into(),
                "until",
                format!("'{u}' must be \"ready\" or \"exit\""),
            ));
        }
    }
    let mut names = std::collections::HashSet::new();
    for ph in &p.phases {
        if ph.name == "ready" || !names.insert(ph.name.as_str()) {
            errors.push(err(
                "phase.name".into(),
                &ph.name,
                format!("phase '{}' is reserved or repeated", ph.name),
            ));
        }
    }
    if p.ready_probes.iter().any(|k| *k != ProbeKind::Notify) && p.endpoint.is_none() {
        errors.push(err(
            "ready_probes".into(),
            "ready_probes",
            "port, http and request probes need an [endpoint] section".into(),
        ));
    }
    if p.ready_probes.contains(&ProbeKind::Http)
        && p.endpoint.as_ref().is_some_and(|e| e.health.is_none())
    {
        errors.push(err(
            "ready_probes".into(),
            "ready_probes",
            "the http probe needs endpoint.health".into(),
        ));
    }
    if let Some(e) = &p.endpoint {
        if let Some(h) = &e.health {
            if !h.starts_with('/') {
                errors.push(err(
                    "endpoint.health".into(),
                    h,
                    format!("'{h}' must be a path starting with /"),
                ));
            }
        }
    }
    // Detection examples must select this profile by its own patterns.
    for ex in &p.detect_examples {
        let hit = p
            .detect
            .iter()
            .any(|d| Regex::new(d).is_ok_and(|r| r.is_match(ex)));
        if !hit {
            errors.push(err(
                "detect_examples".into(),
                ex,
                format!("'{ex}' is not matched by any detect pattern"),
            ));
        }
    }
    // The examples below need every pattern compiled and every signature known.
    if !errors.is_empty() {
        return Err(joined(errors));
    }
    // Signature examples must resolve to their signature, phase examples begin their phase.
    let c = crate::classify::Classifier::new(&crate::classify::ClassifierSpec {
        signatures: p.signatures.clone(),
        phases: p
            .phases
            .iter()
            .map(|x| (x.name.clone(), x.pattern.clone()))
            .collect(),
        ..Default::default()
    })
    .map_err(|e| e.to_string())?;
    for (i, ph) in p.phases.iter().enumerate() {
        for ex in &ph.examples {
            if c.classify(ex).phase != Some(i) {
                errors.push(err(
                    format!("phase {}: examples", ph.name),
                    ex,
                    format!("example '{ex}' does not begin phase {}", ph.name),
                ));
            }
        }
    }
    for s in &p.signatures {
        for ex in &s.examples {
            let got = c.classify(ex).strongest().and_then(|h| h.signature);
            if got.map(|g| g.as_str()) != Some(s.name.as_str()) {
                errors.push(err(
                    format!("signature {}: examples", s.name),
                    ex,
                    format!("example '{ex}' does not match its own patterns"),
                ));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(joined(errors))
    }
}

/// The errors in the order of their lines, one per line of the message.
fn joined(mut errors: Vec<(usize, String)>) -> String {
    errors.sort_by_key(|(line, _)| *line);
    let lines: Vec<String> = errors.into_iter().map(|(_, e)| e).collect();
    lines.join("\n")
}
