//! Unit tests of the TCP port probe (tcp.rs): connections, and who owns the listener.

use super::*;
use std::net::TcpListener;

const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 111 1 0000000000000000 100 0 0 10 0
   1: 00000000:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000   999        0 222 1 0000000000000000 100 0 0 10 0
   2: 0100007F:7530 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 333 1 0000000000000000 20 4 30 10 -1
   3: 0500000A:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 444 1 0000000000000000 100 0 0 10 0
   4: garbage
";
const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 555 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000000000000:18EB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   999        0 666 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:2382 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 777 1 0000000000000000 100 0 0 10 0
";

fn l(addr: &str, port: u16, inode: u64) -> Listener {
    Listener {
        addr: addr.parse().unwrap(),
        port,
        inode,
    }
}

#[test]
fn parses_listening_sockets_from_proc_net_tcp_and_tcp6() {
    let table: [(&str, Vec<Listener>); 2] = [
        (
            TCP,
            vec![
                l("127.0.0.1", 30000, 111),
                l("0.0.0.0", 6379, 222),
                // Line 2 is an established connection (01): not a listener.
                l("10.0.0.5", 8080, 444),
            ],
        ),
        (
            TCP6,
            vec![
                l("::1", 8080, 555),
                l("::", 6379, 666),
                l("::ffff:127.0.0.1", 9090, 777),
            ],
        ),
    ];
    for (text, want) in table {
        assert_eq!(parse_listeners(text), want);
    }
}

#[test]
fn picks_the_listener_the_kernel_would_pick() {
    let mut all = parse_listeners(TCP);
    all.extend(parse_listeners(TCP6));
    let inodes = |peer: &str| -> Vec<u64> {
        answering(&all, peer.parse().unwrap())
            .iter()
            .map(|l| l.inode)
            .collect()
    };
    // Exact address first.
    assert_eq!(inodes("127.0.0.1:30000"), vec![111]);
    assert_eq!(inodes("10.0.0.5:8080"), vec![444]);
    assert_eq!(inodes("[::1]:8080"), vec![555]);
    // An IPv4-mapped listener answers its IPv4 address.
    assert_eq!(inodes("127.0.0.1:9090"), vec![777]);
    // Wildcards: the IPv4 one for IPv4, the IPv6 one for IPv6.
    assert_eq!(inodes("127.0.0.1:6379"), vec![222]);
    assert_eq!(inodes("[::1]:6379"), vec![666]);
    // Nothing bound to 127.0.0.1:8080 or a wildcard on 8080.
    assert_eq!(inodes("127.0.0.1:8080"), Vec::<u64>::new());
}

#[test]
fn redacts_secret_flags_in_commands() {
    assert_eq!(
        redact_command("vllm serve m --api-key sk-123 --port 8000"),
        "vllm serve m --api-key <redacted> --port 8000"
    );
    assert_eq!(
        redact_command("redis-server --requirepass=hunter2"),
        "redis-server --requirepass=<redacted>"
    );
    assert_eq!(redact_command("redis-server *:6379"), "redis-server *:6379");
    assert!(redact_command(&"x".repeat(300)).ends_with("..."));
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn a_listener_of_this_process_is_up_for_a_tree_that_holds_it() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let me = std::process::id();
    let t = Duration::from_secs(2);
    let out = probe("127.0.0.1", port, Some(&Ours::tree(&[me])), t);
    assert!(out.is_up(), "{out:?}");
    assert!(out.detail().contains(&format!("pid {me}")), "{out:?}");
    // A wildcard host is reached on loopback.
    assert!(probe("0.0.0.0", port, Some(&Ours::tree(&[me])), t).is_up());
    assert!(probe("localhost", port, None, t).is_up());
    assert_eq!(listener_pids(port), vec![me]);
}

#[test]
fn a_listener_outside_the_tree_is_foreign() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let me = std::process::id();
    // A tree whose one pid does not exist holds no socket.
    let out = probe(
        "127.0.0.1",
        port,
        Some(&Ours::tree(&[u32::MAX])),
        Duration::from_secs(2),
    );
    match &out {
        ProbeOutcome::Foreign { detail } => {
            assert!(
                detail.starts_with(&format!("port {port} is answered by pid {me} (")),
                "{detail}"
            );
            assert!(detail.ends_with("not by the watched process"), "{detail}");
        }
        other => panic!("expected Foreign, got {other:?}"),
    }
}

#[test]
fn refused_is_not_yet_and_a_bad_name_is_a_fault() {
    let port = free_port();
    let out = probe("127.0.0.1", port, None, Duration::from_secs(2));
    assert_eq!(
        out,
        ProbeOutcome::NotYet {
            detail: format!("connection refused by 127.0.0.1:{port}")
        }
    );
    let out = probe("nonexistent.invalid", port, None, Duration::from_secs(5));
    assert!(matches!(out, ProbeOutcome::Fault { .. }), "{out:?}");
    assert!(
        out.detail()
            .starts_with("cannot resolve host 'nonexistent.invalid'"),
        "{out:?}"
    );
}

#[test]
fn connect_errors_are_sorted_into_not_yet_and_fault() {
    let a: SocketAddr = "10.1.2.3:80".parse().unwrap();
    let t = Duration::from_secs(2);
    let e = |k: io::ErrorKind| classify(&io::Error::from(k), a, t);
    assert_eq!(
        e(io::ErrorKind::TimedOut),
        Err("no answer from 10.1.2.3:80 within 2.0s".into())
    );
    assert!(e(io::ErrorKind::ConnectionRefused).is_err());
    assert_eq!(
        e(io::ErrorKind::NetworkUnreachable),
        Ok("network unreachable for 10.1.2.3:80".into())
    );
    assert!(e(io::ErrorKind::PermissionDenied).is_ok());
}
