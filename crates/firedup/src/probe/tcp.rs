//! TCP port probe: does `host:port` accept connections, and is the listener the watched process's?
//!
//! Contract of [`probe`]:
//! - the host does not resolve → `Fault` ("cannot resolve host ...");
//! - refused, reset, or no answer within the timeout → `NotYet`;
//! - permission denied, network or host unreachable, any other connect error → `Fault`;
//! - a local host with a `tree`, whose listener this machine's socket table already shows: judged
//!   by its owner (below) without connecting, so servers that log every connection are not
//!   flooded;
//! - connected, and the host is not local or no `tree` is given → `Up`;
//! - connected to a local host with a `tree`: the listener answering that address is looked up in
//!   `/proc/net/tcp` and `/proc/net/tcp6` (socket inode), then in `/proc/PID/fd` (`socket:[inode]`).
//!   Held by a process of the tree → `Up`; held by another process → `Foreign` naming it (or saying
//!   firedup cannot see it). A listener firedup cannot find at all (another network namespace, no
//!   `/proc`) gives `Up` with the detail saying the owner was not checked: "someone else is on your
//!   port" must only be said when it is known.
//!
//! A process outside the tree that is a process of the run by `process::membership`'s rule (a
//! daemon that forked away, a `setsid` grandchild: below the run's supervisor, or escaped with the
//! run owner's uid) counts as the run's own. Carrying the run's `FIREDUP_RUN_ID` alone never does:
//! another user's process that sets it is someone else on the port.
//!
//! [`owner_at`] is the same owner check without a connection, for the HTTP and request probes
//! (`super::owner`). [`listener_pids`] answers "who listens on this port" for teardown checks.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use super::ProbeOutcome;
use crate::duration::format_duration;

/// Who counts as the watched server when its listener is looked up: the process tree, and any
/// process of the run (`process::of_run`).
#[derive(Debug, Clone, Copy)]
pub struct Ours<'a> {
    /// Pids of the watched process tree.
    pub tree: &'a [u32],
    /// The run's id, whose processes ([`crate::process::of_run`]) count as the server's too;
    /// `None`: the tree only.
    pub run_id: Option<&'a str>,
}

impl<'a> Ours<'a> {
    /// Only the process tree (no run marker to look for).
    pub fn tree(tree: &'a [u32]) -> Self {
        Ours { tree, run_id: None }
    }
}

/// Connects to `host:port` within `timeout`. When `tree` is given and the host is local, a listener
/// that belongs to no process of `tree` is `Foreign`.
pub fn probe(host: &str, port: u16, tree: Option<&Ours>, timeout: Duration) -> ProbeOutcome {
    let start = Instant::now();
    let addrs = match super::resolve(host, port, timeout) {
        Ok(a) => a,
        Err(detail) => return ProbeOutcome::Fault { detail },
    };
    // A listener this machine's socket table already shows is judged without connecting: a
    // server that logs every connection (Postgres: "incomplete startup packet") must not get a
    // line per probe. Only when the table shows none (nothing listens yet, or the server is in
    // another network namespace) does the probe connect, and a refused connect logs nothing.
    if let (Some(tree), Some(first)) = (tree, addrs.first()) {
        if is_local(first.ip()) {
            let peer = reachable(*first);
            if is_listed(peer) {
                return judge_owner(
                    peer,
                    tree,
                    format!("{} listens", show(peer)),
                    start.elapsed(),
                );
            }
        }
    }
    let (stream, latency) = match connect_any(host, port, &addrs, start + timeout, timeout) {
        Ok(c) => c,
        Err(outcome) => return outcome,
    };
    // The peer address is what the kernel actually reached (a connect to 0.0.0.0 lands on
    // 127.0.0.1), so it is the one to match against the listeners.
    let peer = stream.peer_addr().unwrap_or(addrs[0]);
    drop(stream);
    let accepts = format!("{} accepts connections", show(peer));
    let Some(tree) = tree else {
        return ProbeOutcome::Up {
            detail: accepts,
            latency,
            ours: false,
        };
    };
    if !is_local(peer.ip()) {
        return ProbeOutcome::Up {
            detail: format!("{accepts} (a remote host: its owner is not checked)"),
            latency,
            ours: false,
        };
    }
    judge_owner(peer, tree, accepts, latency)
}

/// Whether this machine's socket table shows a listener that would answer `peer`.
fn is_listed(peer: SocketAddr) -> bool {
    read_listeners().is_ok_and(|l| !answering(&l, peer).is_empty())
}

/// `peer` with a wildcard address replaced by loopback, where a connection to it lands.
pub(super) fn reachable(peer: SocketAddr) -> SocketAddr {
    let ip = match peer.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::from([127, 0, 0, 1]),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, peer.port())
}

/// Who holds the listener that would answer `addr`, when `addr` is on this machine and the
/// socket table shows one (`None` otherwise: nothing listens yet, another network namespace, or
/// a host that is not this machine, whose owner cannot be checked). `Some(Foreign)` when a
/// process that is not `ours` holds it (or one firedup cannot see while every process of the
/// tree is readable, so it is not the tree's); `Some(Up)` when it is ours; `Some(Fault)` when a
/// process of the tree cannot be read (a server started through `sudo` may well be the owner).
pub fn owner_at(addr: SocketAddr, ours: &Ours) -> Option<ProbeOutcome> {
    if !is_local(addr.ip()) {
        return None;
    }
    let peer = reachable(addr);
    is_listed(peer).then(|| judge_owner(peer, ours, show(peer), Duration::ZERO))
}

/// Up when the tree holds the listener answering `peer`; otherwise who does.
fn judge_owner(peer: SocketAddr, ours: &Ours, accepts: String, latency: Duration) -> ProbeOutcome {
    let port = peer.port();
    match owner(peer, ours) {
        Owner::Tree(pid) => ProbeOutcome::Up {
            detail: format!("{accepts}, held by pid {pid} of the watched process tree"),
            latency,
            ours: true,
        },
        Owner::Marked(pid) => ProbeOutcome::Up {
            detail: format!(
                "{accepts}, held by pid {pid}, a process of this run outside the watched tree"
            ),
            latency,
            ours: true,
        },
        Owner::Unchecked(why) => ProbeOutcome::Up {
            detail: format!("{accepts} (its owner is not checked: {why})"),
            latency,
            ours: false,
        },
        Owner::Other(pid) => ProbeOutcome::Foreign {
            detail: format!(
                "port {port} is answered by pid {pid} ({}), not by the watched process",
                shown_command(pid)
            ),
        },
        Owner::Invisible => ProbeOutcome::Foreign {
            detail: format!(
                "port {port} is answered by a process firedup cannot see (another user's or a \
                 container's), not by the watched process"
            ),
        },
        Owner::Unreadable(pid) => ProbeOutcome::Fault {
            detail: format!(
                "cannot read the sockets of pid {pid} of the watched process tree (permission \
                 denied), so who answers port {port} is unknown"
            ),
        },
    }
}

/// Pids of the processes holding a listening TCP socket on `port` (any address, IPv4 or IPv6),
/// sorted. Processes whose `/proc/PID/fd` firedup cannot read are missing, so an empty list means
/// "no visible listener", which is what "is the port free" needs short of a bind.
pub fn listener_pids(port: u16) -> Vec<u32> {
    let inodes: HashSet<u64> = read_listeners()
        .unwrap_or_default()
        .into_iter()
        .filter(|l| l.port == port)
        .map(|l| l.inode)
        .collect();
    if inodes.is_empty() {
        return Vec::new();
    }
    let mut pids: Vec<u32> = all_pids()
        .into_iter()
        .filter(|&pid| socket_inodes(pid).is_ok_and(|s| !s.is_disjoint(&inodes)))
        .collect();
    pids.sort_unstable();
    pids
}

/// The inodes of the sockets listening on `port` (any address), sorted: they identify a listener
/// even when its owner cannot be found (a process of another user).
pub fn listener_inodes(port: u16) -> Vec<u64> {
    let mut inodes: Vec<u64> = read_listeners()
        .unwrap_or_default()
        .into_iter()
        .filter(|l| l.port == port)
        .map(|l| l.inode)
        .collect();
    inodes.sort_unstable();
    inodes.dedup();
    inodes
}

/// One listening socket from `/proc/net/tcp` or `/proc/net/tcp6`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    /// The local address it listens on (`0.0.0.0` or `::` for every address).
    pub addr: IpAddr,
    /// The local port.
    pub port: u16,
    /// The socket's inode, which finds its owner through `/proc/PID/fd`.
    pub inode: u64,
}

/// The listening sockets (state `0A`) in the text of `/proc/net/tcp` or `/proc/net/tcp6`. Lines
/// that do not parse (the header, a truncated read) are skipped.
///
/// The kernel prints each address as 32-bit words in host byte order (`%08X` of the raw network
/// bytes), so `0100007F` is 127.0.0.1 on a little-endian machine; the port is printed as a
/// number.
pub fn parse_listeners(text: &str) -> Vec<Listener> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Listener> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 10 || fields[3] != "0A" {
        return None;
    }
    let (addr, port) = fields[1].split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let inode: u64 = fields[9].parse().ok()?;
    let addr = match addr.len() {
        8 => IpAddr::from(word(addr)?),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_mut(4).enumerate() {
                chunk.copy_from_slice(&word(&addr[i * 8..i * 8 + 8])?);
            }
            IpAddr::from(bytes)
        }
        _ => return None,
    };
    Some(Listener { addr, port, inode })
}

/// Four address bytes from one `%08X` word (see [`parse_listeners`]).
fn word(hex: &str) -> Option<[u8; 4]> {
    u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes)
}

/// Every listening socket of this network namespace.
pub(super) fn read_listeners() -> Result<Vec<Listener>, String> {
    let mut found = Vec::new();
    let mut read_any = false;
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        // tcp6 is missing on a kernel without IPv6: that is no error.
        if let Ok(text) = fs::read_to_string(file) {
            read_any = true;
            found.extend(parse_listeners(&text));
        }
    }
    if read_any {
        Ok(found)
    } else {
        Err("/proc/net/tcp is not readable".into())
    }
}

/// The listeners that would take a connection to `peer`: the kernel prefers a socket bound to the
/// exact address over a wildcard one, and an IPv4 wildcard over a dual-stack IPv6 one.
pub fn answering(listeners: &[Listener], peer: SocketAddr) -> Vec<Listener> {
    let on_port = || listeners.iter().filter(|l| l.port == peer.port());
    let ip = canonical(peer.ip());
    let tiers: [&dyn Fn(&Listener) -> bool; 3] = [
        &|l| canonical(l.addr) == ip,
        &|l| l.addr.is_unspecified() && l.addr.is_ipv4() == ip.is_ipv4(),
        &|l| l.addr.is_unspecified() && l.addr.is_ipv6(),
    ];
    for tier in tiers {
        let found: Vec<Listener> = on_port().filter(|l| tier(l)).copied().collect();
        if !found.is_empty() {
            return found;
        }
    }
    Vec::new()
}

/// An IPv4-mapped IPv6 address (`::ffff:127.0.0.1`, how a dual-stack socket shows IPv4) as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

enum Owner {
    Tree(u32),
    /// Outside the tree, but a process of the run (`process::of_run`).
    Marked(u32),
    Other(u32),
    /// A listener exists but no readable process holds it.
    Invisible,
    /// Not found, and a process of the tree could not be read: it may be the owner.
    Unreadable(u32),
    /// No listener to check (the reason, as a clause).
    Unchecked(String),
}

fn owner(peer: SocketAddr, ours: &Ours) -> Owner {
    let tree = ours.tree;
    let listeners = match read_listeners() {
        Ok(l) => l,
        Err(why) => return Owner::Unchecked(why),
    };
    let inodes: HashSet<u64> = answering(&listeners, peer)
        .into_iter()
        .map(|l| l.inode)
        .collect();
    if inodes.is_empty() {
        return Owner::Unchecked(format!(
            "no listener on port {} in /proc/net/tcp, maybe another network namespace",
            peer.port()
        ));
    }
    let mut unreadable = None;
    for &pid in tree {
        match socket_inodes(pid) {
            Ok(held) if !held.is_disjoint(&inodes) => return Owner::Tree(pid),
            Ok(_) => {}
            // A process of the tree that exited meanwhile holds nothing.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(_) => unreadable = unreadable.or(Some(pid)),
        }
    }
    let other = all_pids()
        .into_iter()
        .filter(|pid| !tree.contains(pid))
        .find(|&pid| socket_inodes(pid).is_ok_and(|s| !s.is_disjoint(&inodes)));
    match (other, unreadable) {
        (Some(pid), _)
            if ours
                .run_id
                .is_some_and(|id| crate::process::is_of_run(pid, id)) =>
        {
            Owner::Marked(pid)
        }
        (Some(pid), _) => Owner::Other(pid),
        (None, Some(pid)) => Owner::Unreadable(pid),
        (None, None) => Owner::Invisible,
    }
}

/// The socket inodes held by `pid` (`socket:[N]` links in `/proc/PID/fd`).
pub(super) fn socket_inodes(pid: u32) -> io::Result<HashSet<u64>> {
    let mut found = HashSet::new();
    for entry in fs::read_dir(format!("/proc/{pid}/fd"))? {
        let Ok(entry) = entry else { continue };
        let Ok(link) = fs::read_link(entry.path()) else {
            continue;
        };
        let link = link.to_string_lossy();
        if let Some(n) = link
            .strip_prefix("socket:[")
            .and_then(|r| r.strip_suffix(']'))
            .and_then(|n| n.parse().ok())
        {
            found.insert(n);
        }
    }
    Ok(found)
}

fn all_pids() -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// The command line of `pid` for a detail: values of flags that look like secrets
/// (`--api-key X`, `--requirepass=X`) redacted, and cut to a readable length.
fn shown_command(pid: u32) -> String {
    let raw = crate::process::cmdline(pid);
    if raw.is_empty() {
        return fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|c| c.trim().to_string())
            .unwrap_or_else(|_| "command unreadable".into());
    }
    redact_command(&raw)
}

fn redact_command(cmd: &str) -> String {
    let args: Vec<String> = cmd.split(' ').map(String::from).collect();
    let shown = crate::secrets::redact_args(&args).join(" ");
    const MAX: usize = 100;
    match shown.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &shown[..cut]),
        None => shown,
    }
}

/// Whether `ip` is this machine: loopback, the wildcard, or an address a socket can be bound to
/// (binding a UDP socket to port 0 sends nothing and fails with `EADDRNOTAVAIL` for an address
/// that is not ours, which avoids parsing interface lists).
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// `1.2.3.4:80` or `[::1]:80`.
fn show(addr: SocketAddr) -> String {
    addr.to_string()
}

/// Tries each address until one connects or the deadline passes. When none connects, a "not yet"
/// answer from any address (refused, timed out) wins over a fault from another: with `localhost`
/// resolving to `::1` and `127.0.0.1`, an unreachable IPv6 must not hide a server still loading on
/// IPv4.
fn connect_any(
    host: &str,
    port: u16,
    addrs: &[SocketAddr],
    deadline: Instant,
    timeout: Duration,
) -> Result<(TcpStream, Duration), ProbeOutcome> {
    let mut not_yet: Option<String> = None;
    let mut fault: Option<String> = None;
    for &addr in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            not_yet.get_or_insert_with(|| no_answer(host, port, addrs, timeout));
            break;
        }
        let t0 = Instant::now();
        match TcpStream::connect_timeout(&addr, left) {
            Ok(s) => return Ok((s, t0.elapsed())),
            Err(e) => match classify(&e, addr, timeout) {
                Err(d) => {
                    not_yet.get_or_insert(d);
                }
                Ok(d) => {
                    fault.get_or_insert(d);
                }
            },
        }
    }
    Err(match (not_yet, fault) {
        (Some(detail), _) => ProbeOutcome::NotYet { detail },
        (None, Some(detail)) => ProbeOutcome::Fault { detail },
        (None, None) => ProbeOutcome::NotYet {
            detail: no_answer(host, port, addrs, timeout),
        },
    })
}

fn no_answer(host: &str, port: u16, addrs: &[SocketAddr], timeout: Duration) -> String {
    let target = match addrs {
        [one] => show(*one),
        _ => format!("{host}:{port}"),
    };
    format!(
        "no answer from {target} within {}",
        format_duration(timeout)
    )
}

/// A connect error as `Err(not-yet detail)` or `Ok(fault detail)`.
fn classify(e: &io::Error, addr: SocketAddr, timeout: Duration) -> Result<String, String> {
    let a = show(addr);
    use io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => Err(format!("connection refused by {a}")),
        K::TimedOut | K::WouldBlock => Err(format!(
            "no answer from {a} within {}",
            format_duration(timeout)
        )),
        K::ConnectionReset | K::ConnectionAborted => Err(format!(
            "connection to {a} was reset before it was accepted"
        )),
        K::PermissionDenied => Ok(format!(
            "permission denied connecting to {a} (a firewall or security policy?)"
        )),
        K::NetworkUnreachable => Ok(format!("network unreachable for {a}")),
        K::HostUnreachable => Ok(format!("host unreachable: {a}")),
        K::AddrNotAvailable => Ok(format!("cannot connect to {a}: address not available")),
        _ => Ok(format!("cannot connect to {a}: {e}")),
    }
}

#[cfg(test)]
mod tests;
