//! Where a cell's server is asked whether it is ready, templated like its command: `[base]`'s
//! `http`, `port` and `ready_request` may hold `{port}` from a `[[slot]]`, an axis value or any
//! other variable, replaced per cell and slot. The fields that are the same for every cell
//! (`host`, `profile`, the durations, `sbatch_args`, `profile_files`) are not templated: a
//! `{name}` there is refused before anything launches, as an unknown name is, instead of being
//! probed or parsed literally (every cell `monitor_error`, the table not saying why).

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::Base;
use super::template::{expand, template_names};

/// `port` as written: a number, or a template (`"{port}"`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum PortField {
    Number(u16),
    Template(String),
}

/// A cell's own readiness address: `[base]`'s `http`, `port` and `ready_request`, templated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CellProbes {
    pub http: Option<String>,
    pub port: Option<u16>,
    pub ready_request: Option<String>,
}

/// The base's probe fields with `vars` in place; a name that is unknown, or a value that cannot
/// be used (a port that is not a number, a URL that does not parse), is an error naming the
/// field and the value.
pub(super) fn probes_of(base: &Base, vars: &BTreeMap<String, String>) -> Result<CellProbes> {
    let port = match &base.port {
        None => None,
        Some(PortField::Number(p)) => Some(*p),
        Some(PortField::Template(t)) => {
            let v = expand(t, vars, "base.port")?;
            match v.trim().parse::<u16>() {
                Ok(p) if p > 0 => Some(p),
                _ => bail!("base.port: {t:?} gives {v:?}, which is not a port number (1-65535)"),
            }
        }
    };
    let http = match &base.http {
        Some(h) => {
            let v = expand(h, vars, "base.http")?;
            if v.starts_with("http://") && crate::probe::http::Target::parse(&v).is_err() {
                bail!("base.http: {h:?} gives {v:?}, which is not a URL firedup can ask");
            }
            Some(v)
        }
        None => None,
    };
    let ready_request = match &base.ready_request {
        Some(r) => Some(expand(r, vars, "base.ready_request")?),
        None => None,
    };
    Ok(CellProbes {
        http,
        port,
        ready_request,
    })
}

/// Refuses a `{name}` in a `[base]` field that is not templated.
pub(super) fn refuse_untemplated(base: &Base) -> Result<()> {
    let mut fields: Vec<(&str, String)> = vec![];
    let mut one = |name: &'static str, v: &Option<String>| {
        if let Some(v) = v {
            fields.push((name, v.clone()));
        }
    };
    one("base.host", &base.host);
    one("base.profile", &base.profile);
    one("base.until", &base.until);
    one("base.timeout", &base.timeout);
    one("base.stall", &base.stall);
    one("base.hold", &base.hold);
    one("base.grace", &base.grace);
    fields.extend(
        base.phase_timeouts
            .iter()
            .map(|v| ("base.phase_timeouts", v.clone())),
    );
    fields.extend(
        base.sbatch_args
            .iter()
            .map(|v| ("base.sbatch_args", v.clone())),
    );
    fields.extend(
        base.profile_files
            .iter()
            .map(|v| ("base.profile_files", v.display().to_string())),
    );
    for (field, value) in fields {
        if let Some(name) = template_names(&value).next() {
            bail!(
                "{field}: {{{name}}} is not replaced there (templates work in base.command, \
                 base.env, base.cwd, base.http, base.port, base.ready_request and bench.command; \
                 {field} is the same for every cell)"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<String, String> {
        [("port", "30001"), ("name", "x"), ("slot", "1")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn http_port_and_request_are_templated_per_cell() {
        let base = Base {
            http: Some("http://127.0.0.1:{port}/health".into()),
            port: Some(PortField::Template("{port}".into())),
            ready_request: Some("chat".into()),
            ..Base::default()
        };
        let p = probes_of(&base, &vars()).unwrap();
        assert_eq!(p.http.as_deref(), Some("http://127.0.0.1:30001/health"));
        assert_eq!(p.port, Some(30001));
        assert_eq!(p.ready_request.as_deref(), Some("chat"));
        let fixed = Base {
            port: Some(PortField::Number(8000)),
            ..Base::default()
        };
        assert_eq!(probes_of(&fixed, &vars()).unwrap().port, Some(8000));
    }

    #[test]
    fn unknown_or_unusable_names_are_refused() {
        let table: &[(Base, &str)] = &[
            (
                Base {
                    http: Some("http://127.0.0.1:{nope}/health".into()),
                    ..Base::default()
                },
                "base.http: unknown variable {nope}",
            ),
            (
                Base {
                    port: Some(PortField::Template("{nope}".into())),
                    ..Base::default()
                },
                "base.port: unknown variable {nope}",
            ),
            (
                Base {
                    port: Some(PortField::Template("{name}".into())),
                    ..Base::default()
                },
                "base.port: \"{name}\" gives \"x\", which is not a port number",
            ),
            (
                Base {
                    http: Some("http://127.0.0.1:{name}/health".into()),
                    ..Base::default()
                },
                "base.http: \"http://127.0.0.1:{name}/health\" gives \"http://127.0.0.1:x/health\"",
            ),
        ];
        for (base, want) in table {
            let e = format!("{:#}", probes_of(base, &vars()).unwrap_err());
            assert!(e.starts_with(want), "{e}");
        }
        let untemplated: &[(Base, &str)] = &[
            (
                Base {
                    host: Some("gpu-{slot}".into()),
                    ..Base::default()
                },
                "base.host: {slot} is not replaced there",
            ),
            (
                Base {
                    stall: Some("{stall}".into()),
                    ..Base::default()
                },
                "base.stall: {stall} is not replaced there",
            ),
            (
                Base {
                    sbatch_args: vec!["--gres=gpu:{n}".into()],
                    ..Base::default()
                },
                "base.sbatch_args: {n} is not replaced there",
            ),
        ];
        for (base, want) in untemplated {
            let e = format!("{:#}", refuse_untemplated(base).unwrap_err());
            assert!(e.starts_with(want), "{e}");
        }
        let shell = Base {
            sbatch_args: vec!["--wrap=echo ${HOME}".into()],
            host: Some("gpu-box".into()),
            ..Base::default()
        };
        refuse_untemplated(&shell).unwrap();
    }
}
