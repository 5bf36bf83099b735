//! Where the run's server actually listens, when that is not the loopback address firedup would
//! probe: a server bound to `::1` only is never answered on 127.0.0.1 (and one bound to
//! 127.0.0.1 never on `::1`), so probing the address the profile or `--port` implies would wait
//! until `timed_out` for a server that is up.
//!
//! Contract of [`relocated`]: for a loopback address that no listener in this machine's socket
//! table (`/proc/net/tcp`, `/proc/net/tcp6`) answers, the address a listener of the run holds on
//! the same port (the watched tree's, or another process of the run's: [`Ours`]), reached as a
//! connection reaches it (`::` on `[::1]`, `0.0.0.0` on 127.0.0.1); loopback and wildcard
//! listeners before others. `None` (probe where told) when the address is not a loopback, when
//! something answers it already (whoever holds it: the owner check says whose), or when no
//! listener of the run is on the port. [`relocated_url`] is the same for an `http://` URL.

use std::collections::HashSet;
use std::net::SocketAddr;

use super::http::Target;
use super::tcp::{self, Ours};

/// The address the run listens on instead of `addr` (see the module doc).
pub fn relocated(addr: SocketAddr, ours: &Ours) -> Option<SocketAddr> {
    if !addr.ip().is_loopback() {
        return None;
    }
    let listeners = tcp::read_listeners().ok()?;
    if !tcp::answering(&listeners, addr).is_empty() {
        return None;
    }
    let on_port: Vec<tcp::Listener> = listeners
        .into_iter()
        .filter(|l| l.port == addr.port())
        .collect();
    if on_port.is_empty() {
        return None;
    }
    let held: HashSet<u64> = ours
        .tree
        .iter()
        .filter_map(|&pid| tcp::socket_inodes(pid).ok())
        .flatten()
        .collect();
    let of_run = |l: &tcp::Listener| {
        held.contains(&l.inode)
            || ours.run_id.is_some_and(|id| {
                holders(l.inode)
                    .into_iter()
                    .any(|pid| crate::process::is_of_run(pid, id))
            })
    };
    let mut found: Vec<&tcp::Listener> = on_port.iter().filter(|l| of_run(l)).collect();
    found.sort_by_key(|l| !(l.addr.is_loopback() || l.addr.is_unspecified()));
    found
        .first()
        .map(|l| tcp::reachable(SocketAddr::new(l.addr, l.port)))
        .filter(|at| *at != addr)
}

/// `host` (an address, as a port probe is given it) replaced by the address the run listens on
/// on `port` (see [`relocated`]); `None` when it stays as it is.
pub fn relocated_host(host: &str, port: u16, ours: &Ours) -> Option<String> {
    let ip = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()?;
    relocated(SocketAddr::new(ip, port), ours).map(|at| at.ip().to_string())
}

/// The processes holding the socket `inode`.
fn holders(inode: u64) -> Vec<u32> {
    crate::process::all_processes()
        .into_iter()
        .map(|(pid, _)| pid)
        .filter(|&pid| tcp::socket_inodes(pid).is_ok_and(|s| s.contains(&inode)))
        .collect()
}

/// `url` with its host replaced by the address the run listens on (see [`relocated`]); `None`
/// when it stays as it is (or does not parse: the probe says so itself).
pub fn relocated_url(url: &str, ours: &Ours) -> Option<String> {
    let target = Target::parse(url).ok()?;
    let ip = target.host.parse().ok()?;
    let at = relocated(SocketAddr::new(ip, target.port), ours)?;
    let scheme_end = url.find("://")? + 3;
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    // Credentials stay as they are; only the address after them changes.
    let userinfo = authority.rfind('@').map_or("", |at| &authority[..=at]);
    Some(format!(
        "{}{userinfo}{at}{}",
        &url[..scheme_end],
        &rest[authority_end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_run_listening_on_the_other_loopback_is_probed_there() {
        let Ok(v6) = TcpListener::bind("[::1]:0") else {
            return; // no IPv6 loopback on this machine
        };
        let port = v6.local_addr().unwrap().port();
        let me = [std::process::id()];
        let nobody = [u32::MAX];
        let v4: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let v6_at: SocketAddr = format!("[::1]:{port}").parse().unwrap();
        let table: [(SocketAddr, &[u32], Option<SocketAddr>, &str); 4] = [
            (v4, &me, Some(v6_at), "ours on ::1 only: probed there"),
            (
                v4,
                &nobody,
                None,
                "not the run's listener: probed where told",
            ),
            (v6_at, &me, None, "something answers the address already"),
            (
                format!("192.0.2.1:{port}").parse().unwrap(),
                &me,
                None,
                "not a loopback",
            ),
        ];
        for (addr, tree, want, why) in table {
            assert_eq!(relocated(addr, &Ours::tree(tree)), want, "{why}");
        }
        assert_eq!(
            relocated_url(
                &format!("http://u:p@127.0.0.1:{port}/v1/models?x=1"),
                &Ours::tree(&me)
            ),
            Some(format!("http://u:p@[::1]:{port}/v1/models?x=1"))
        );
        assert_eq!(
            relocated_url(&format!("http://127.0.0.1:{port}"), &Ours::tree(&me)),
            Some(format!("http://[::1]:{port}"))
        );
        assert_eq!(relocated_url("not a url", &Ours::tree(&me)), None);
        assert_eq!(
            relocated_host("127.0.0.1", port, &Ours::tree(&me)).as_deref(),
            Some("::1")
        );
        assert_eq!(relocated_host("localhost", port, &Ours::tree(&me)), None);
    }
}
