//! Self-test of the sshd harness (tests/common/sshd.rs), with the real ssh client: the server
//! works, the broken configs fail the way they must, stop/restart, and the link's faults.

use crate::common;
use common::sshd::{self, NetLink, Sshd, run_bounded};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(15);

#[test]
fn ssh_runs_a_command() {
    let s = Sshd::start();
    let r = s.run(&["echo", "hi"], LIMIT);
    assert!(r.ok(), "{}", r.explain());
    assert_eq!(r.stdout, "hi\n");
    assert_eq!(s.host_alias(), "fdtest");
    assert_eq!(s.addr(), "127.0.0.1");
    assert!(s.config_path().exists());
    // The connection is in sshd's log.
    assert!(
        s.log_text().contains("Accepted publickey"),
        "{}",
        s.log_text()
    );
}

#[test]
fn wrong_host_key_fails_verification() {
    let s = Sshd::start();
    let cfg = s.config_with_wrong_host_key();
    let r = run_bounded(
        Command::new("ssh")
            .arg("-F")
            .arg(&cfg)
            .args(["fdtest", "echo", "hi"]),
        LIMIT,
    );
    assert_eq!(r.code(), Some(255), "{}", r.explain());
    assert!(
        r.stderr.contains("Host key verification failed"),
        "{}",
        r.explain()
    );
    assert!(
        r.stderr.contains("REMOTE HOST IDENTIFICATION HAS CHANGED"),
        "{}",
        r.explain()
    );
    assert!(s.run(&["true"], LIMIT).ok(), "the right config still works");
}

#[test]
fn unknown_client_key_is_denied() {
    let s = Sshd::start();
    let cfg = s.config_without_client_key();
    let r = run_bounded(
        Command::new("ssh")
            .arg("-F")
            .arg(&cfg)
            .args(["fdtest", "echo", "hi"]),
        LIMIT,
    );
    assert_eq!(r.code(), Some(255), "{}", r.explain());
    assert!(
        r.stderr.contains("Permission denied (publickey)"),
        "{}",
        r.explain()
    );
    assert!(s.run(&["true"], LIMIT).ok(), "the right config still works");
}

#[test]
fn stop_and_restart_keep_keys_and_port_and_established_sessions() {
    let mut s = Sshd::start();
    let port = s.port();
    // A session that echoes its input, established before the stop.
    let mut cat = s
        .ssh()
        .args(["fdtest", "echo up; exec cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = sshd::lines_of(&mut cat);
    assert_eq!(lines.recv_timeout(LIMIT).as_deref(), Ok("up"));

    s.stop();
    assert!(s.pid().is_none());
    let r = s.run(&["true"], LIMIT);
    assert_eq!(
        r.code(),
        Some(255),
        "stopped, ssh must fail: {}",
        r.explain()
    );
    assert!(r.stderr.contains("Connection refused"), "{}", r.explain());
    // The per-connection sshd outlives the listener: the session still answers.
    writeln!(cat.stdin.as_mut().unwrap(), "still there").unwrap();
    assert_eq!(lines.recv_timeout(LIMIT).as_deref(), Ok("still there"));

    s.restart();
    assert_eq!(s.port(), port);
    let r = s.run(&["echo", "again"], LIMIT);
    assert!(r.ok(), "{}", r.explain());
    assert_eq!(r.stdout, "again\n");

    // Drop kills the session's processes too.
    let pids = s.pids();
    assert!(pids.len() >= 3, "listener, connection, cat: {pids:?}");
    drop(s);
    assert!(
        sshd::wait_bounded(&mut cat, Duration::from_secs(5)).is_some(),
        "the client sees its server go"
    );
    for p in pids {
        assert!(!common::alive(p as u64), "{p} left behind");
    }
}

#[test]
fn netns_ssh_freeze_thaw() {
    if !sshd::netns_or_skip("netns_ssh_freeze_thaw") {
        return;
    }
    let link = NetLink::new();
    let s = Sshd::start_in(&link);
    assert_eq!(s.addr(), link.server_addr());
    let r = s.run(&["echo", "hi"], LIMIT);
    assert!(r.ok(), "{}", r.explain());
    assert_eq!(r.stdout, "hi\n");
    assert!(
        s.log_text()
            .contains(&format!("from {}", link.client_addr())),
        "the client came over the veth: {}",
        s.log_text()
    );

    let mut long = s
        .ssh()
        .args(["-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=2"])
        .args(["fdtest", "echo up; sleep 30"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = sshd::lines_of(&mut long);
    assert_eq!(lines.recv_timeout(LIMIT).as_deref(), Ok("up"));

    link.freeze();
    let frozen_at = Instant::now();
    let st = sshd::wait_bounded(&mut long, Duration::from_secs(10));
    let took = frozen_at.elapsed();
    let mut err = String::new();
    std::io::Read::read_to_string(long.stderr.as_mut().unwrap(), &mut err).ok();
    let Some(st) = st else {
        let _ = long.kill();
        let _ = long.wait();
        panic!("ssh still running 10 s after the freeze");
    };
    eprintln!(
        "frozen link: ssh exited {st} after {took:?}: {}",
        err.trim()
    );
    assert_eq!(st.code(), Some(255), "{err}");
    assert!(err.contains("Timeout"), "{err}");
    // Silence, not an error: ssh only noticed through its keepalives (1 s x 2).
    assert!(took >= Duration::from_millis(1500), "{took:?}: {err}");

    // While frozen, a new connection hangs too (no RST: a timeout, not "refused").
    let r = run_bounded(
        s.ssh().args(["-o", "ConnectTimeout=1", "fdtest", "true"]),
        LIMIT,
    );
    assert_eq!(r.code(), Some(255), "{}", r.explain());
    assert!(r.stderr.contains("timed out"), "{}", r.explain());

    link.thaw();
    let r = s.run(&["echo", "back"], LIMIT);
    assert!(r.ok(), "{}", r.explain());
    assert_eq!(r.stdout, "back\n");

    // Nothing left behind.
    let ns = link.netns().to_string();
    let pids = s.pids();
    drop(s);
    drop(link);
    for p in pids {
        assert!(!common::alive(p as u64), "{p} left behind");
    }
    let list = run_bounded(Command::new("ip").args(["netns", "list"]), LIMIT);
    assert!(
        !list.stdout.contains(&ns),
        "{ns} left behind: {}",
        list.stdout
    );
}

#[test]
fn netns_latency_slows_the_round_trip() {
    if !sshd::netns_or_skip("netns_latency_slows_the_round_trip") {
        return;
    }
    eprintln!(
        "latency by {}",
        if sshd::latency_supported() {
            "netem"
        } else {
            "the tun delay line (no netem here)"
        }
    );
    let link = NetLink::new();
    let s = Sshd::start_in(&link);
    let time = |n: usize| {
        let mut v: Vec<Duration> = (0..n)
            .map(|_| {
                let r = s.run(&["true"], LIMIT);
                assert!(r.ok(), "{}", r.explain());
                r.took
            })
            .collect();
        v.sort();
        v[n / 2]
    };
    // An established session, as a ControlMaster's: its round trip is measured too.
    let mut cat = s
        .ssh()
        .args(["fdtest", "echo up; exec cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = sshd::lines_of(&mut cat);
    assert_eq!(lines.recv_timeout(LIMIT).as_deref(), Ok("up"));
    let mut echo = |what: &str, limit: Duration| {
        let t = Instant::now();
        writeln!(cat.stdin.as_mut().unwrap(), "{what}").unwrap();
        let got = lines.recv_timeout(limit).ok();
        (got, t.elapsed())
    };

    let before = time(3);
    let (got, echo_before) = echo("one", LIMIT);
    assert_eq!(got.as_deref(), Some("one"));
    link.add_latency(50);
    let after = time(3);
    let (got, echo_after) = echo("two", LIMIT);
    assert_eq!(got.as_deref(), Some("two"));
    eprintln!(
        "with 50 ms: ssh true {before:?} -> {after:?}, established session's echo \
         {echo_before:?} -> {echo_after:?}"
    );
    // An ssh connection takes several round trips.
    assert!(
        after >= before + Duration::from_millis(100),
        "{before:?} -> {after:?}"
    );
    assert!(echo_after >= Duration::from_millis(50), "{echo_after:?}");

    // Frozen with latency: nothing gets through; thawed, the latency stays.
    link.freeze();
    let (got, _) = echo("three", Duration::from_millis(1000));
    assert_eq!(got, None, "frozen, yet the echo came back");
    link.thaw();
    assert_eq!(
        lines.recv_timeout(LIMIT).as_deref(),
        Ok("three"),
        "TCP retransmits after the thaw"
    );
    let (got, t) = echo("four", LIMIT);
    assert_eq!(got.as_deref(), Some("four"));
    assert!(t >= Duration::from_millis(50), "{t:?}");

    // Cleared: no delay left in the kernel (asked of the system, not timed: a loaded machine
    // can be slow without any delay line), and the established session still works.
    assert!(
        link.delay_in_place(),
        "the delay should be in place before the clear"
    );
    link.clear_latency();
    assert!(
        !link.delay_in_place(),
        "the delay is still in place after the clear"
    );
    let (got, _) = echo("five", LIMIT);
    assert_eq!(got.as_deref(), Some("five"));
    let _ = cat.kill();
    let _ = cat.wait();
}
