//! Expanding a matrix into its cells: the Cartesian product of the axes, minus `[[exclude]]`
//! rules, plus `[[include]]` cells.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};

use super::axis::{secret_axis, value_text};
use super::{Axis, AxisKind, Cell};

/// The cells: the Cartesian product in axis order (the first axis varies slowest), minus
/// excluded ones, plus included ones (which may use values outside the axes).
pub(super) fn expand_cells(
    axes: &[Axis],
    exclude: &[BTreeMap<String, toml::Value>],
    include: &[BTreeMap<String, toml::Value>],
) -> Result<Vec<Cell>> {
    let rule = |r: &BTreeMap<String, toml::Value>, what: &str| -> Result<Vec<(usize, String)>> {
        r.iter()
            .map(|(k, v)| {
                let Some(ai) = axes.iter().position(|a| a.name == *k) else {
                    let names: Vec<&str> = axes.iter().map(|a| a.name.as_str()).collect();
                    bail!("{what}: no axis named {k:?} (axes: {})", names.join(", "));
                };
                let flag = matches!(axes[ai].kind, AxisKind::Flag(_));
                Ok((
                    ai,
                    value_text(v, flag).with_context(|| format!("{what}.{k}"))?,
                ))
            })
            .collect()
    };
    let excludes = exclude
        .iter()
        .map(|r| rule(r, "exclude"))
        .collect::<Result<Vec<_>>>()?;
    let mut rows: Vec<Vec<String>> = vec![vec![]];
    for a in axes {
        rows = rows
            .into_iter()
            .flat_map(|r| {
                a.values.iter().map(move |v| {
                    let mut r = r.clone();
                    r.push(v.clone());
                    r
                })
            })
            .collect();
    }
    rows.retain(|r| {
        !excludes
            .iter()
            .any(|ex| ex.iter().all(|(ai, v)| r[*ai] == *v))
    });
    for inc in include {
        let given = rule(inc, "include")?;
        if given.len() != axes.len() {
            bail!("include: give a value for every axis ({} axes)", axes.len());
        }
        let mut r = vec![String::new(); axes.len()];
        for (ai, v) in given {
            r[ai] = v;
        }
        if !rows.contains(&r) {
            rows.push(r);
        }
    }
    // A secret axis's values are numbered in order of first appearance, never shown.
    let mut seen: Vec<Vec<String>> = vec![Vec::new(); axes.len()];
    for r in &rows {
        for (ai, v) in r.iter().enumerate() {
            if !seen[ai].contains(v) {
                seen[ai].push(v.clone());
            }
        }
    }
    Ok(rows
        .into_iter()
        .enumerate()
        .map(|(index, values)| {
            let shown: Vec<String> = axes
                .iter()
                .enumerate()
                .zip(&values)
                .map(|((ai, a), v)| {
                    if secret_axis(a) {
                        let n = seen[ai].iter().position(|x| x == v).unwrap_or(0) + 1;
                        format!("<redacted #{n}>")
                    } else {
                        v.clone()
                    }
                })
                .collect();
            let pairs: Vec<String> = axes
                .iter()
                .zip(&shown)
                .map(|(a, v)| format!("{}={v}", a.name))
                .collect();
            Cell {
                index,
                key: pairs.join(";"),
                label: pairs.join(" "),
                values,
                shown,
            }
        })
        .collect())
}
