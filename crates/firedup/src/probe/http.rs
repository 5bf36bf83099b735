//! HTTP health probe: GET a URL and read its status.
//!
//! Contract of [`probe`]:
//! - 2xx → `Up` with the latency;
//! - 500, 502, 503, 504, 429 and other 5xx (a server still loading, or a proxy in front of one) →
//!   `NotYet`, as are connection refused, a connection closed without an answer, and no answer
//!   within the timeout;
//! - a 3xx → `Rejected` ("health URL ... redirects to ..."): redirects are not followed, because a
//!   health check that lands somewhere else checks something else;
//! - 404, 401, 403 and the other 4xx, 501 and 505 → `Rejected` (the URL or the credentials are
//!   wrong, not the server slow; or the answer is another server's): an answer, which the judge
//!   counts as a fault once the log says ready;
//! - a host that does not resolve, a URL that is not `http://` (there is no TLS in firedup), an
//!   answer that is not HTTP (probing a Redis port) → `Fault`, each with its own detail.
//!
//! The agent built by `agent()` is shared with the request probe. It ignores proxies from the
//! environment: ureq 3 reads `ALL_PROXY`, `HTTPS_PROXY` and `HTTP_PROXY` (and lower-case forms) in
//! its default config, in that order and for every scheme, and tunnels through the proxy with
//! `CONNECT`. A probe of `127.0.0.1` sent to a corporate proxy would probe the proxy, so the agent
//! sets `proxy(None)` explicitly.

use std::time::{Duration, Instant};

use super::ProbeOutcome;
use crate::duration::format_duration;

/// GETs `url` within `timeout`: 2xx is `Up`; 503 and refused are `NotYet`; unresolvable host,
/// protocol errors are `Fault`; 3xx and 4xx answers are `Rejected`.
pub fn probe(url: &str, timeout: Duration) -> ProbeOutcome {
    let target = match Target::parse(url) {
        Ok(t) => t,
        Err(detail) => return ProbeOutcome::Fault { detail },
    };
    // Resolved here first: ureq reports a failed lookup as a bare I/O error that cannot be told
    // apart from others, and "cannot resolve host" is the detail people need.
    let start = Instant::now();
    if let Err(detail) = super::resolve(&target.host, target.port, timeout) {
        return ProbeOutcome::Fault { detail };
    }
    let left = timeout.saturating_sub(start.elapsed());
    let t0 = Instant::now();
    let response = agent(left.max(Duration::from_millis(1))).get(url).call();
    let latency = t0.elapsed();
    match response {
        Ok(r) => {
            let what = format!("health URL {}", target.shown);
            match non_success(
                r.status().as_u16(),
                location(&r),
                &what,
                latency,
                None,
                "is the health path right?",
            ) {
                Some(outcome) => outcome,
                None => ProbeOutcome::Up {
                    detail: format!(
                        "{} from {} ({})",
                        status_text(r.status().as_u16()),
                        target.shown,
                        format_duration(latency)
                    ),
                    latency,
                    // Who answered is checked by `probe::owner::guarded`.
                    ours: false,
                },
            }
        }
        Err(e) => error_outcome(&e, &target, timeout),
    }
}

/// The agent for every probe request: no proxy (see the module doc), no redirects, statuses as
/// responses rather than errors, and `timeout` as a hard bound from lookup to the last body byte.
pub(crate) fn agent(timeout: Duration) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .proxy(None)
        .max_redirects(0)
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .user_agent(concat!("firedup/", env!("CARGO_PKG_VERSION")))
        .build();
    ureq::Agent::new_with_config(config)
}

/// A checked `http://` URL: where it connects, and how it is shown in details.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The host to connect to (an IPv6 address without its brackets).
    pub host: String,
    /// The port to connect to (80 when the URL names none).
    pub port: u16,
    /// `host:port` as the URL spells it.
    pub authority: String,
    /// The URL without credentials or query (either may hold a secret).
    pub shown: String,
}

impl Target {
    /// Checks that `url` is an `http://` URL with a host. The error is a `Fault` detail.
    pub fn parse(url: &str) -> Result<Target, String> {
        let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
        if lower.starts_with("https://") {
            return Err(format!(
                "{} is https, and firedup only speaks plain http to probe a server",
                redact_url(url)
            ));
        }
        if !lower.starts_with("http://") {
            return Err(format!(
                "invalid URL '{}': it must start with http://",
                redact_url(url)
            ));
        }
        let uri: ureq::http::Uri = url
            .parse()
            .map_err(|e| format!("invalid URL '{}': {e}", redact_url(url)))?;
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| format!("invalid URL '{}': it has no host", redact_url(url)))?;
        // `http://h:{port}/` left untemplated, or `h:x`: a port that is written but is not a
        // number is refused, never taken for port 80.
        let written_port = uri
            .authority()
            .map(|a| a.as_str().rsplit_once('@').map_or(a.as_str(), |(_, h)| h))
            .and_then(|h| {
                h.rsplit_once(':')
                    .filter(|(_, p)| !p.is_empty() && !p.contains(']'))
            })
            .map(|(_, p)| p);
        if uri.port_u16().is_none() && written_port.is_some() {
            return Err(format!(
                "invalid URL '{}': its port is not a number",
                redact_url(url)
            ));
        }
        let port = uri.port_u16().unwrap_or(80);
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let authority = match uri.port_u16() {
            Some(p) if host.contains(':') => format!("[{host}]:{p}"),
            Some(p) => format!("{host}:{p}"),
            None if host.contains(':') => format!("[{host}]"),
            None => host.clone(),
        };
        let query = if uri.query().is_some() { "?..." } else { "" };
        let shown = format!("http://{authority}{}{query}", uri.path());
        Ok(Target {
            host,
            port,
            authority,
            shown,
        })
    }
}

/// `url` with credentials and query hidden, for details about a URL that did not parse.
fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (format!("{s}://"), r),
        None => (String::new(), url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let tail = tail
        .split_once('?')
        .map_or(tail.to_string(), |(t, _)| format!("{t}?..."));
    format!("{scheme}{authority}{tail}")
}

/// `HTTP 503 Service Unavailable`.
pub(crate) fn status_text(code: u16) -> String {
    let reason = ureq::http::StatusCode::from_u16(code)
        .ok()
        .and_then(|s| s.canonical_reason());
    match reason {
        Some(r) => format!("HTTP {code} {r}"),
        None => format!("HTTP {code}"),
    }
}

fn location(r: &ureq::http::Response<ureq::Body>) -> Option<String> {
    r.headers()
        .get("location")
        .map(|v| redact_url(&String::from_utf8_lossy(v.as_bytes())))
}

/// The outcome of a status that is not 2xx (`None` for 2xx). `what` names the request
/// (`health URL http://...`, `POST http://.../v1/completions`); `said` is the server's own error
/// message when it sent one; `hint_404` is the question a 404 asks.
pub(crate) fn non_success(
    code: u16,
    location: Option<String>,
    what: &str,
    latency: Duration,
    said: Option<&str>,
    hint_404: &str,
) -> Option<ProbeOutcome> {
    let status = status_text(code);
    let said = said
        .map(|s| format!(" (the server says: {s})"))
        .unwrap_or_default();
    let fault = |detail: String| Some(ProbeOutcome::Rejected { detail });
    match code {
        200..=299 => None,
        300..=399 => fault(format!(
            "{what} redirects to {} ({status}); firedup does not follow redirects",
            location
                .as_deref()
                .unwrap_or("nowhere (no Location header)")
        )),
        // A server that exists but does not implement the method or the protocol will not get
        // better by waiting.
        501 | 505 => fault(format!("{status} from {what}{said}")),
        429 | 500..=599 => Some(ProbeOutcome::NotYet {
            detail: format!("{status} from {what} ({}){said}", format_duration(latency)),
        }),
        404 => fault(format!("{status} from {what}: {hint_404}{said}")),
        401 | 403 => fault(format!(
            "{status} from {what}: the server wants credentials that firedup does not send{said}"
        )),
        400..=499 => fault(format!("{status} from {what}{said}")),
        _ => fault(format!("unexpected {status} from {what}")),
    }
}

/// The outcome of a request that got no response.
pub(crate) fn error_outcome(e: &ureq::Error, target: &Target, timeout: Duration) -> ProbeOutcome {
    use std::io::ErrorKind as K;
    let at = &target.authority;
    let not_yet = |detail: String| ProbeOutcome::NotYet { detail };
    let fault = |detail: String| ProbeOutcome::Fault { detail };
    match e {
        ureq::Error::Timeout(_) => not_yet(format!(
            "no answer from {} within {}",
            target.shown,
            format_duration(timeout)
        )),
        ureq::Error::Io(io) => match io.kind() {
            K::ConnectionRefused => not_yet(format!("connection refused by {at}")),
            K::TimedOut | K::WouldBlock => not_yet(format!(
                "no answer from {} within {}",
                target.shown,
                format_duration(timeout)
            )),
            K::ConnectionReset | K::ConnectionAborted | K::UnexpectedEof | K::BrokenPipe => {
                not_yet(format!("{at} closed the connection without an HTTP answer"))
            }
            K::PermissionDenied => fault(format!("permission denied connecting to {at}")),
            K::NetworkUnreachable => fault(format!("network unreachable for {at}")),
            K::HostUnreachable => fault(format!("host unreachable: {at}")),
            _ => fault(format!("cannot reach {}: {io}", target.shown)),
        },
        ureq::Error::HostNotFound => fault(format!("cannot resolve host '{}'", target.host)),
        ureq::Error::Protocol(p) => fault(format!(
            "{at} answers, but not with HTTP ({p}): is this the HTTP port?"
        )),
        ureq::Error::LargeResponseHeader(..) => fault(format!(
            "{at} answers, but not with HTTP (no end of headers): is this the HTTP port?"
        )),
        ureq::Error::BadUri(_) => fault(format!("invalid URL '{}'", target.shown)),
        ureq::Error::Tls(_) | ureq::Error::TlsRequired | ureq::Error::RequireHttpsOnly(_) => {
            fault(format!(
                "{} needs TLS, and firedup only speaks plain http to probe a server",
                target.shown
            ))
        }
        ureq::Error::BodyExceedsLimit(n) => fault(format!(
            "the answer from {} is larger than {n} bytes",
            target.shown
        )),
        other => fault(format!("HTTP request to {} failed: {other}", target.shown)),
    }
}

#[cfg(test)]
mod tests;
