//! Unit tests of the HTTP health probe (http.rs), against the scripted fake server.

use super::super::testserver::{FakeServer, Reply, http};
use super::*;
use crate::bounded_wait::{HANG, bounded};
use std::net::TcpListener;

const T: Duration = Duration::from_secs(5);

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn two_hundred_is_up_with_its_latency() {
    let s = FakeServer::start(vec![http("200 OK", "{}")]);
    let out = probe(&s.url("/health"), T);
    let ProbeOutcome::Up {
        detail, latency, ..
    } = &out
    else {
        panic!("expected Up, got {out:?}");
    };
    assert!(
        detail.starts_with(&format!("HTTP 200 OK from http://{}/health (", s.addr)),
        "{detail}"
    );
    assert!(*latency < T);
    let req = s.next_request();
    assert_eq!((req.method.as_str(), req.path.as_str()), ("GET", "/health"));
}

#[test]
fn five_oh_three_is_not_yet_then_two_hundred_is_up() {
    let s = FakeServer::start(vec![
        http("503 Service Unavailable", "loading"),
        http("200 OK", "ok"),
    ]);
    let url = s.url("/health");
    let first = probe(&url, T);
    let ProbeOutcome::NotYet { detail } = &first else {
        panic!("expected NotYet, got {first:?}");
    };
    assert!(
        detail.starts_with(&format!(
            "HTTP 503 Service Unavailable from health URL {url} ("
        )),
        "{detail}"
    );
    assert!(probe(&url, T).is_up());
}

#[test]
fn four_oh_four_is_a_rejection_about_the_path() {
    let s = FakeServer::start(vec![http("404 Not Found", "")]);
    let url = s.url("/helth");
    assert_eq!(
        probe(&url, T),
        ProbeOutcome::Rejected {
            detail: format!("HTTP 404 Not Found from health URL {url}: is the health path right?")
        }
    );
}

#[test]
fn a_redirect_is_reported_not_followed() {
    let s = FakeServer::start(vec![Reply::Raw(
        b"HTTP/1.1 301 Moved Permanently\r\nLocation: /health/\r\nContent-Length: 0\r\n\r\n"
            .to_vec(),
    )]);
    let url = s.url("/health");
    assert_eq!(
        probe(&url, T),
        ProbeOutcome::Rejected {
            detail: format!(
                "health URL {url} redirects to /health/ (HTTP 301 Moved Permanently); \
                 firedup does not follow redirects"
            )
        }
    );
}

#[test]
fn an_answer_that_is_not_http_is_a_fault() {
    // What a Redis port says to an HTTP request.
    let s = FakeServer::start(vec![Reply::Raw(
        b"-ERR unknown command 'GET', with args beginning with: '/health'\r\n".to_vec(),
    )]);
    let out = probe(&s.url("/health"), T);
    let ProbeOutcome::Fault { detail } = &out else {
        panic!("expected Fault, got {out:?}");
    };
    assert!(
        detail.starts_with(&format!("{} answers, but not with HTTP (", s.addr)),
        "{detail}"
    );
}

#[test]
fn a_server_that_never_answers_is_not_yet_within_the_timeout() {
    let s = FakeServer::start(vec![Reply::Hang]);
    let t = Duration::from_millis(300);
    let url = s.url("/health");
    let out = bounded("an HTTP probe of a hanging server", HANG, move || {
        probe(&url, t)
    });
    assert_eq!(
        out,
        ProbeOutcome::NotYet {
            detail: format!("no answer from {} within 300ms", s.url("/health"))
        }
    );
}

#[test]
fn a_connection_closed_without_an_answer_is_not_yet() {
    let s = FakeServer::start(vec![Reply::Raw(Vec::new())]);
    assert_eq!(
        probe(&s.url("/health"), T),
        ProbeOutcome::NotYet {
            detail: format!("{} closed the connection without an HTTP answer", s.addr)
        }
    );
}

#[test]
fn refused_is_not_yet() {
    let port = free_port();
    assert_eq!(
        probe(&format!("http://127.0.0.1:{port}/health"), T),
        ProbeOutcome::NotYet {
            detail: format!("connection refused by 127.0.0.1:{port}")
        }
    );
}

#[test]
fn bad_hosts_and_urls_are_faults_each_with_its_own_detail() {
    let table = [
        (
            "http://nonexistent.invalid:8000/health",
            "cannot resolve host 'nonexistent.invalid'",
        ),
        (
            "https://127.0.0.1:8000/health",
            "https://127.0.0.1:8000/health is https, and firedup only speaks plain http",
        ),
        (
            "localhost:8000/health",
            "invalid URL 'localhost:8000/health': it must start with http://",
        ),
        ("http:///health", "invalid URL"),
        (
            "ftp://user:hunter2@host/x",
            "invalid URL 'ftp://host/x': it must start with http://",
        ),
    ];
    for (url, want) in table {
        let out = probe(url, T);
        assert!(matches!(out, ProbeOutcome::Fault { .. }), "{url}: {out:?}");
        assert!(out.detail().starts_with(want), "{url}: {out:?}");
        assert!(!out.detail().contains("hunter2"), "{url}: {out:?}");
    }
}

#[test]
fn statuses_are_sorted_into_outcomes() {
    let t = Duration::from_millis(12);
    let kind = |code: u16| match non_success(code, None, "health URL u", t, None, "?") {
        None => "up",
        Some(ProbeOutcome::NotYet { .. }) => "not yet",
        Some(ProbeOutcome::Rejected { .. }) => "rejected",
        Some(other) => panic!("{other:?}"),
    };
    let table = [
        (200, "up"),
        (204, "up"),
        (301, "rejected"),
        (400, "rejected"),
        (401, "rejected"),
        (403, "rejected"),
        (404, "rejected"),
        (405, "rejected"),
        (429, "not yet"),
        (500, "not yet"),
        (501, "rejected"),
        (502, "not yet"),
        (503, "not yet"),
        (504, "not yet"),
    ];
    for (code, want) in table {
        assert_eq!(kind(code), want, "{code}");
    }
}

#[test]
fn urls_are_shown_without_credentials_or_query() {
    let t = Target::parse("http://me:secret@[::1]:8080/health?token=abc").unwrap();
    assert_eq!(t.host, "::1");
    assert_eq!(t.port, 8080);
    assert_eq!(t.authority, "[::1]:8080");
    assert_eq!(t.shown, "http://[::1]:8080/health?...");
    let t = Target::parse("http://gpu-box/health").unwrap();
    assert_eq!((t.port, t.shown.as_str()), (80, "http://gpu-box/health"));
}

/// A port written but not a number (a template left in, `h:x`) is refused, never port 80.
#[test]
fn a_port_that_is_not_a_number_is_refused() {
    for url in [
        "http://127.0.0.1:x/health",
        "http://me:pw@h:port/",
        "http://[::1]:p/",
    ] {
        let e = Target::parse(url)
            .err()
            .unwrap_or_else(|| panic!("{url} parsed"));
        assert!(e.contains("its port is not a number"), "{url}: {e}");
    }
    for (url, port) in [
        ("http://h:8000/", 8000),
        ("http://[::1]/", 80),
        ("http://me:pw@h/", 80),
    ] {
        assert_eq!(Target::parse(url).unwrap().port, port, "{url}");
    }
}

/// Proxy variables in the environment must not be used. The test cannot set them in its own
/// process (mutating the environment of a threaded test process is unsound), so it runs this
/// test binary again as a child with `HTTP_PROXY` pointing at a fake proxy: there, a default
/// ureq agent goes to the proxy (so the variable is live) and the probe does not.
#[test]
fn proxy_variables_in_the_environment_are_ignored() {
    let proxy = FakeServer::start(vec![Reply::Raw(
        b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n".to_vec(),
    )]);
    let target = FakeServer::start(vec![http("200 OK", "ok")]);
    let exe = std::env::current_exe().unwrap();
    let mut child = std::process::Command::new(exe);
    child
        .args([
            "--exact",
            "probe::http::tests::proxy_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("FIREDUP_PROXY_CHILD_TARGET", target.url("/health"))
        .env("HTTP_PROXY", format!("http://{}", proxy.addr))
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("http_proxy")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.output()));
    let output = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the child test did not finish within 60 s")
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
    // The default agent went through the proxy, with a CONNECT tunnel...
    let via_proxy = proxy.next_request();
    assert_eq!(via_proxy.method, "CONNECT");
    // ...and the probe went straight to the server.
    assert_eq!(target.next_request().path, "/health");
}

/// The child half of [`proxy_variables_in_the_environment_are_ignored`]; does nothing when run
/// on its own.
#[test]
fn proxy_child() {
    let Ok(url) = std::env::var("FIREDUP_PROXY_CHILD_TARGET") else {
        return;
    };
    let default = ureq::Agent::new_with_defaults();
    assert!(default.config().proxy().is_some());
    assert!(default.get(&url).call().is_err(), "the fake proxy refuses");
    assert!(agent(T).config().proxy().is_none());
    let out = probe(&url, T);
    assert!(out.is_up(), "{out:?}");
}
