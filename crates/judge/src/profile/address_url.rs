//! A server's URL as the JSON verdict's `url` gives it: its scheme (`http`, or the profile's:
//! `redis://`, `postgresql://`), and the host it is reached at from where it is said. For a run
//! on this machine that is the connect host (`127.0.0.1` for a wildcard bind); for a run on
//! another host (`--host gpu-box`) it is that host as given, since the host's loopback means
//! nothing here: `http://gpu-box:30000`, the address on the host's own network. A server bound
//! to one address of its host (not a wildcard, not loopback) keeps that address.

use super::Address;

/// `SCHEME://HOST:PORT` (`http` when no scheme is given; an IPv6 host in brackets).
pub fn url(scheme: Option<&str>, host: &str, port: u16) -> String {
    let scheme = scheme.unwrap_or("http");
    if host.contains(':') && !host.starts_with('[') {
        format!("{scheme}://[{host}]:{port}")
    } else {
        format!("{scheme}://{host}:{port}")
    }
}

impl Address {
    /// Whether the server listens on every address (`0.0.0.0`, `::`) or only on loopback: then
    /// from another machine it is its host's name that reaches it.
    fn bound_to_host_name(&self) -> bool {
        matches!(
            self.host.as_str(),
            "0.0.0.0" | "" | "*" | "::" | "[::]" | "127.0.0.1" | "localhost" | "::1" | "[::1]"
        )
    }

    /// Whether it listens on its host's loopback only: reached from elsewhere through a tunnel.
    pub fn loopback_only(&self) -> bool {
        matches!(
            self.host.as_str(),
            "127.0.0.1" | "localhost" | "::1" | "[::1]"
        )
    }

    /// `http://host:port` whatever the scheme: where an HTTP probe asks (`--http /path`).
    pub fn http_base_url(&self) -> String {
        url(None, self.connect_host(), self.port)
    }

    /// The URL for the JSON verdict: on this machine (`ssh_host` `None`), the connect host's; on
    /// `ssh_host` (as given to `--host`, `user@` and an SSH port left out), that host's.
    pub fn url_on(&self, ssh_host: Option<&str>) -> String {
        match ssh_host {
            None => self.base_url(),
            Some(h) if self.bound_to_host_name() => {
                url(self.scheme.as_deref(), host_of(h), self.port)
            }
            Some(_) => url(self.scheme.as_deref(), &self.host, self.port),
        }
    }
}

/// The host name in an SSH destination: `user@gpu-box` → `gpu-box`, `ssh://u@h:2222` → `h`.
fn host_of(destination: &str) -> &str {
    let d = destination.strip_prefix("ssh://").unwrap_or(destination);
    let d = d.rsplit_once('@').map_or(d, |(_, h)| h);
    match d.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None if d.matches(':').count() == 1 => d.split(':').next().unwrap_or(d),
        None => d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(host: &str, port: u16, scheme: Option<&str>) -> Address {
        Address {
            host: host.into(),
            port,
            scheme: scheme.map(String::from),
        }
    }

    #[test]
    fn urls_here_and_on_another_host() {
        let table: &[(Address, Option<&str>, &str)] = &[
            (at("0.0.0.0", 30000, None), None, "http://127.0.0.1:30000"),
            (at("::", 8000, None), None, "http://[::1]:8000"),
            (
                at("127.0.0.1", 6379, Some("redis")),
                None,
                "redis://127.0.0.1:6379",
            ),
            (
                at("0.0.0.0", 30000, None),
                Some("gpu-box"),
                "http://gpu-box:30000",
            ),
            (
                at("127.0.0.1", 30000, None),
                Some("me@gpu-box"),
                "http://gpu-box:30000",
            ),
            (
                at("127.0.0.1", 6379, Some("redis")),
                Some("gpu-box"),
                "redis://gpu-box:6379",
            ),
            (
                at("::", 8000, None),
                Some("ssh://me@gpu-box:2222"),
                "http://gpu-box:8000",
            ),
            (
                at("0.0.0.0", 8000, None),
                Some("[fd00::5]"),
                "http://[fd00::5]:8000",
            ),
            (
                at("10.0.0.7", 8000, None),
                Some("gpu-box"),
                "http://10.0.0.7:8000",
            ),
        ];
        for (a, host, want) in table {
            assert_eq!(a.url_on(*host), *want, "{a:?} on {host:?}");
        }
        assert!(at("127.0.0.1", 1, None).loopback_only());
        assert!(!at("0.0.0.0", 1, None).loopback_only());
    }
}
