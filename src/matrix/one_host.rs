//! A matrix cell is one run on one host (`--host HOST`, `base.host`): a multi-node group as a
//! cell (several hosts, as `run --host A --host B` takes them) is not supported yet, and is
//! refused before anything starts, with what to do instead, whether the hosts come as
//! `--host` given more than once, a list in the file, or a comma- or space-separated string
//! (never one SSH alias).

use anyhow::{Result, bail};
use serde::{Deserialize, Deserializer};

/// Why, and what to do instead.
pub(crate) const REFUSED: &str = "a matrix cell is one run on one host; a multi-node group as a cell is not supported yet: run each configuration as its own `firedup run --host A --host B ... -- COMMAND` (a group, one verdict naming the node) and see them side by side with `firedup history`";

/// The one host of every cell, from `--host` given `given.len()` times.
pub(crate) fn from_flags(given: &[String]) -> Result<Option<String>> {
    match given {
        [] => Ok(None),
        [one] => checked(one).map(Some),
        several => bail!("--host given {} times: {REFUSED}", several.len()),
    }
}

/// `host` as one SSH host: a string naming several is refused.
fn checked(host: &str) -> Result<String> {
    if host.trim().contains([',', ' ', '\t']) {
        bail!("host {host:?} names several hosts: {REFUSED}");
    }
    Ok(host.to_string())
}

/// `base.host` in a matrix file: a string, or a list of one (a longer list is refused).
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        One(String),
        List(Vec<String>),
    }
    let hosts = match Option::<Given>::deserialize(d)? {
        None => return Ok(None),
        Some(Given::One(h)) => vec![h],
        Some(Given::List(l)) => l,
    };
    match hosts.as_slice() {
        [] => Ok(None),
        [one] => checked(one).map(Some).map_err(serde::de::Error::custom),
        several => Err(serde::de::Error::custom(format!(
            "base.host lists {} hosts: {REFUSED}",
            several.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_host_is_taken_and_several_are_refused_saying_what_to_do() {
        // (--host values) → the host, or None when refused
        let cases: [(&[&str], Option<Option<&str>>); 5] = [
            (&[], Some(None)),
            (&["gpu-a"], Some(Some("gpu-a"))),
            (&["gpu-a", "gpu-b"], None),
            (&["gpu-a,gpu-b"], None),
            (&["gpu-a gpu-b"], None),
        ];
        for (given, want) in cases {
            let given: Vec<String> = given.iter().map(|s| s.to_string()).collect();
            match (from_flags(&given), want) {
                (Ok(got), Some(w)) => assert_eq!(got.as_deref(), w, "{given:?}"),
                (Err(e), None) => assert!(e.to_string().contains("firedup run --host A --host B")),
                (got, _) => panic!("{given:?}: {got:?}"),
            }
        }
    }
}
