//! One axis of a matrix: checked as written (exactly one of env, flag, arg, var; values as text;
//! `stop_on` names a verdict or signature), or parsed from an `--axis` flag.

use anyhow::{Context, Result, bail};

use super::{Axis, AxisDef, AxisKind};

const FLAG_VALUES: [&str; 2] = ["off", "on"];

/// A value as a string: TOML strings as they are, numbers and booleans as written (`true` is
/// `on` for a flag axis).
pub(super) fn value_text(v: &toml::Value, flag: bool) -> Result<String> {
    Ok(match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) if flag => (if *b { "on" } else { "off" }).to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        other => bail!("a value must be a string, number or boolean, not {other}"),
    })
}

impl AxisDef {
    pub(super) fn check(&self, i: usize) -> Result<Axis> {
        let kinds = [
            self.env.clone().map(AxisKind::Env),
            self.flag.clone().map(AxisKind::Flag),
            self.arg.clone().map(AxisKind::Arg),
            self.var.clone().map(AxisKind::Var),
        ];
        let mut given = kinds.into_iter().flatten();
        let (Some(kind), None) = (given.next(), given.next()) else {
            bail!("axis {}: give exactly one of env, flag, arg or var", i + 1);
        };
        // `--mem-fraction-static` is named `mem-fraction-static`, usable as `{mem-fraction-static}`.
        let default_name = match &kind {
            AxisKind::Env(n) | AxisKind::Flag(n) | AxisKind::Arg(n) | AxisKind::Var(n) => {
                n.trim_start_matches('-').to_string()
            }
        };
        let name = self.name.clone().unwrap_or(default_name);
        if name.is_empty() {
            bail!("axis {}: the name is empty", i + 1);
        }
        let flag = matches!(kind, AxisKind::Flag(_));
        let mut values = self
            .values
            .iter()
            .map(|v| value_text(v, flag))
            .collect::<Result<Vec<_>>>()
            .with_context(|| format!("axis {name}"))?;
        if flag && values.is_empty() {
            values = FLAG_VALUES.iter().map(|s| s.to_string()).collect();
        }
        if values.is_empty() {
            bail!("axis {name}: no values");
        }
        if flag {
            if let Some(v) = values.iter().find(|v| !FLAG_VALUES.contains(&v.as_str())) {
                bail!("axis {name}: a flag axis takes on/off (or true/false), not {v:?}");
            }
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(dup) = values.iter().find(|v| !seen.insert(*v)) {
            bail!("axis {name}: value {dup:?} is given twice");
        }
        for s in &self.stop_on {
            let known = crate::verdict::Signature::from_name(s).is_some()
                || crate::verdict::Verdict::from_name(s).is_some();
            if !known {
                bail!("axis {name}: stop_on {s:?} is neither a verdict nor a signature");
            }
        }
        if !self.stop_on.is_empty() && !self.ordered {
            bail!("axis {name}: stop_on needs ordered = true");
        }
        Ok(Axis {
            name,
            kind,
            values,
            ordered: self.ordered,
            stop_on: self.stop_on.clone(),
        })
    }
}

/// Parses `--axis` flags: `env:NAME=v1,v2`, `flag:--x`, `arg:--x=v1,v2`, `var:NAME=v1,v2`; a
/// trailing `+ordered` makes the axis ordered.
pub fn parse_axis_flag(s: &str) -> Result<AxisDef> {
    let bad = || {
        anyhow::anyhow!(
            "--axis {s:?}: write env:NAME=V1,V2 or flag:--FLAG or arg:--ARG=V1,V2 or var:NAME=V1,V2 (add +ordered for an ordered axis)"
        )
    };
    let (s2, ordered) = match s.strip_suffix("+ordered") {
        Some(rest) => (rest, true),
        None => (s, false),
    };
    let (kind, rest) = s2.split_once(':').ok_or_else(bad)?;
    let split_values = |rest: &str| -> Result<(String, Vec<toml::Value>)> {
        let (name, vals) = rest.split_once('=').ok_or_else(bad)?;
        if name.is_empty() || vals.is_empty() {
            return Err(bad());
        }
        Ok((
            name.to_string(),
            vals.split(',')
                .map(|v| toml::Value::String(v.to_string()))
                .collect(),
        ))
    };
    let mut def = AxisDef {
        ordered,
        ..Default::default()
    };
    match kind {
        "env" => {
            let (n, v) = split_values(rest)?;
            def.env = Some(n);
            def.values = v;
        }
        "arg" => {
            let (n, v) = split_values(rest)?;
            def.arg = Some(n);
            def.values = v;
        }
        "var" => {
            let (n, v) = split_values(rest)?;
            def.var = Some(n);
            def.values = v;
        }
        "flag" if !rest.is_empty() && !rest.contains('=') => def.flag = Some(rest.to_string()),
        _ => return Err(bad()),
    }
    Ok(def)
}

/// Whether an axis's values are secrets: an env var or flag whose name looks like one.
pub(super) fn secret_axis(a: &Axis) -> bool {
    match &a.kind {
        AxisKind::Env(n) | AxisKind::Arg(n) | AxisKind::Var(n) => {
            crate::secrets::looks_secret(&n.trim_start_matches('-').replace('-', "_"))
        }
        AxisKind::Flag(_) => false,
    }
}
