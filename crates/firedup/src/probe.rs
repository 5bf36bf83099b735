//! Probes: firedup asking the server directly, outside its log.
//!
//! Each probe is one blocking check with a hard timeout that returns a [`ProbeOutcome`]; the engine
//! runs them on a thread of their own and turns the outcomes into observations for the judge. A
//! probe never confuses its own failure with "not ready yet": `NotYet` is the server not answering
//! (connection refused, 503 while loading), `Fault` is firedup's own access failing (a name that
//! does not resolve, permission denied, a URL that is not HTTP), `Rejected` is an HTTP answer that
//! refuses the probe (404, 401, a redirect), and `Foreign` is an answer from a process that is not
//! the watched one (someone else is on your port).
//!
//! - [`tcp`]: connect to host:port; who owns the listener (`/proc/net/tcp*` → socket inode → pid).
//! - [`http`]: GET a health URL: status and latency, no proxy from the environment, no redirects.
//! - [`owner`]: an HTTP or request probe of this machine counts only when the run holds the port.
//! - [`request`]: a tiny deterministic request that must return tokens (OpenAI-compatible, TGI).
//! - [`notify`]: an sd_notify socket (`READY=1`, `STATUS=`, `EXTEND_TIMEOUT_USEC=`).
//! - [`gpu`]: GPU memory held by the watched process tree, from `nvidia-smi`.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::time::Duration;

pub mod gpu;
pub mod http;
pub mod listen_address;
pub mod notify;
pub mod owner;
pub mod request;
pub mod tcp;
#[cfg(test)]
mod testserver;

pub use firedup_judge::probe_outcome::ProbeOutcome;
pub use firedup_judge::profile::ProbeKind;

/// Default hard timeout for one probe.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Hard timeout for the real request (a first request may compile kernels).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Resolves `host` (a name, an IPv4 address, or an IPv6 address with or without brackets) to
/// socket addresses within `timeout`. The error is one sentence for a `Fault` detail.
///
/// A lookup runs on a thread of its own because `getaddrinfo` has no timeout of its own and a
/// broken resolver can hang for tens of seconds; on timeout the thread is left to finish alone.
pub(crate) fn resolve(host: &str, port: u16, timeout: Duration) -> Result<Vec<SocketAddr>, String> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    if host.is_empty() {
        return Err("cannot resolve an empty host name".into());
    }
    let (tx, rx) = mpsc::sync_channel(1);
    let name = host.to_string();
    std::thread::Builder::new()
        .name("firedup-resolve".into())
        .spawn(move || {
            let _ = tx.send(
                (name.as_str(), port)
                    .to_socket_addrs()
                    .map(|a| a.collect::<Vec<_>>()),
            );
        })
        .map_err(|e| format!("cannot start a thread to resolve host '{host}': {e}"))?;
    match rx.recv_timeout(timeout) {
        Ok(Ok(addrs)) if !addrs.is_empty() => Ok(addrs),
        Ok(Ok(_)) => Err(format!("cannot resolve host '{host}': it has no address")),
        Ok(Err(e)) => Err(format!("cannot resolve host '{host}' ({e})")),
        Err(_) => Err(format!(
            "cannot resolve host '{host}' within {}",
            crate::duration::format_duration(timeout)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_literals_without_a_lookup_and_rejects_unknown_names() {
        let t = Duration::from_secs(5);
        assert_eq!(
            resolve("127.0.0.1", 80, t).unwrap(),
            vec!["127.0.0.1:80".parse().unwrap()]
        );
        assert_eq!(
            resolve("[::1]", 81, t).unwrap(),
            vec!["[::1]:81".parse().unwrap()]
        );
        assert_eq!(
            resolve("::1", 81, t).unwrap(),
            vec!["[::1]:81".parse().unwrap()]
        );
        let err = resolve("nonexistent.invalid", 80, t).unwrap_err();
        assert!(
            err.starts_with("cannot resolve host 'nonexistent.invalid'"),
            "{err}"
        );
    }
}
