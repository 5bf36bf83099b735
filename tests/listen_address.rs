//! Issue 24 item 7: a server that listens only on the IPv6 loopback (`::1`) is probed where it
//! listens, not on 127.0.0.1 (where nothing would ever answer and the run would end `timed_out`).

use crate::common;

use common::Env;

/// A port free on `::1` a moment ago; `None` on a machine without an IPv6 loopback.
fn free_v6_port() -> Option<u16> {
    let l = std::net::TcpListener::bind("[::1]:0").ok()?;
    Some(l.local_addr().ok()?.port())
}

#[test]
fn a_server_listening_on_the_ipv6_loopback_only_is_ready() {
    let Some(port) = free_v6_port() else {
        eprintln!("SKIPPED: no IPv6 loopback here");
        return;
    };
    let p = port.to_string();
    let url = format!("http://127.0.0.1:{port}/");
    for probe in [vec!["--port", &p], vec!["--http", &url]] {
        let env = Env::new();
        let mut args = vec!["run", "--json", "--timeout", "60s"];
        args.extend(&probe);
        args.extend(["--", "python3", "-m", "http.server", "--bind", "::1", &p]);
        let r = env.firedup(&args);
        let _ = env.fd("stop").arg(r.run_id()).output();
        assert_eq!(
            (r.code, r.verdict()),
            (0, "ready"),
            "{probe:?}: {}",
            r.explain()
        );
        assert!(
            r.stdout.contains(&format!("[::1]:{port}")),
            "{probe:?}: the probe did not say it reached [::1]: {}",
            r.explain()
        );
    }
}
