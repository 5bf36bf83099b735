//! Parallel cells must not share a port.
//!
//! With `--parallel`, any cell may run in one slot while other cells run in the other slots, so
//! two slots whose cells use the same port would put one cell's server on the other's port: the
//! second cannot bind, and its probes would find the first's server. [`clash`] finds such a pair
//! before anything starts, and the matrix refuses to run (a usage error) saying how to give each
//! slot its own port. A cell's ports are the server's own listen port (from its flags or its
//! profile's default) and the ports its probes ask on this machine; a cell with no known address
//! uses none as far as firedup can tell.

use crate::plan::Plan;

/// The ports one cell uses when it runs in one slot.
#[derive(Debug, Clone, PartialEq)]
pub struct CellPorts {
    pub slot: usize,
    /// The cell's position in the matrix's cells.
    pub cell: usize,
    pub ports: Vec<u16>,
}

/// Two runs that may be at once and share a port: `(first, second, port)`, indexes into
/// `cells`. Runs in the same slot never overlap; one cell in two slots overlaps only when the
/// cell runs more than once (`repeat_at_once`).
pub fn clash(cells: &[CellPorts], repeat_at_once: bool) -> Option<(usize, usize, u16)> {
    for (i, a) in cells.iter().enumerate() {
        for (j, b) in cells.iter().enumerate().skip(i + 1) {
            if a.slot == b.slot || (a.cell == b.cell && !repeat_at_once) {
                continue;
            }
            if let Some(p) = a.ports.iter().find(|p| b.ports.contains(p)) {
                return Some((i, j, *p));
            }
        }
    }
    None
}

/// The ports a cell's plan uses on this machine, sorted and without repeats.
pub fn ports_of(plan: &Plan) -> Vec<u16> {
    let mut ports: Vec<u16> = plan.address.iter().map(|a| a.port).collect();
    ports.extend(plan.probes.port.iter().map(|(_, p)| *p));
    let urls = plan
        .probes
        .http
        .iter()
        .chain(plan.probes.request.iter().map(|(base, _)| base));
    for url in urls {
        if let Ok(t) = crate::probe::http::Target::parse(url) {
            if is_this_machine(&t.host) {
                ports.push(t.port);
            }
        }
    }
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// A host name that means this machine without a lookup.
fn is_this_machine(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(slot: usize, cell: usize, ports: &[u16]) -> CellPorts {
        CellPorts {
            slot,
            cell,
            ports: ports.to_vec(),
        }
    }

    #[test]
    fn only_runs_that_can_overlap_clash() {
        let table: Vec<(&str, Vec<CellPorts>, bool, Option<(usize, usize, u16)>)> = vec![
            (
                "two slots, one default port",
                vec![
                    c(0, 0, &[8000]),
                    c(0, 1, &[8000]),
                    c(1, 0, &[8000]),
                    c(1, 1, &[8000]),
                ],
                false,
                Some((0, 3, 8000)),
            ),
            (
                "each slot its own port",
                vec![
                    c(0, 0, &[8000]),
                    c(0, 1, &[8000]),
                    c(1, 0, &[8001]),
                    c(1, 1, &[8001]),
                ],
                false,
                None,
            ),
            (
                "one slot: cells run one at a time",
                vec![c(0, 0, &[8000]), c(0, 1, &[8000])],
                false,
                None,
            ),
            (
                "one cell, run once, in either slot",
                vec![c(0, 0, &[8000]), c(1, 0, &[8000])],
                false,
                None,
            ),
            (
                "one cell repeated: its runs can overlap",
                vec![c(0, 0, &[8000]), c(1, 0, &[8000])],
                true,
                Some((0, 1, 8000)),
            ),
            (
                "no known ports",
                vec![c(0, 0, &[]), c(1, 1, &[])],
                false,
                None,
            ),
        ];
        for (name, cells, repeat, want) in table {
            assert_eq!(clash(&cells, repeat), want, "{name}");
        }
    }

    #[test]
    fn hosts_of_this_machine_are_known_without_a_lookup() {
        for (host, want) in [
            ("localhost", true),
            ("127.0.0.1", true),
            ("::1", true),
            ("0.0.0.0", true),
            ("gpu-box", false),
            ("10.0.0.5", false),
        ] {
            assert_eq!(is_this_machine(host), want, "{host}");
        }
    }
}
