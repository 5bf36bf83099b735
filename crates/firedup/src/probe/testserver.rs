//! A fake HTTP server for the probe tests: it accepts one connection per scripted reply, records
//! the request it read, and answers with canned bytes, hangs, or closes. Test-only.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

/// What the server does with one connection, after reading its request.
#[derive(Debug, Clone)]
pub(super) enum Reply {
    /// Writes these bytes, then closes.
    Raw(Vec<u8>),
    /// Keeps the connection open without answering until the server is dropped (at most 30 s).
    Hang,
}

/// A complete HTTP/1.1 response with `status` (`"503 Service Unavailable"`) and `body`.
pub(super) fn http(status: &str, body: &str) -> Reply {
    Reply::Raw(
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

/// A request as the server read it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

#[derive(Debug)]
pub(super) struct FakeServer {
    pub addr: SocketAddr,
    requests: Receiver<Recorded>,
    _stop: Sender<()>,
}

impl FakeServer {
    /// Listens on a free loopback port and serves `replies` in order, one per connection.
    pub(super) fn start(replies: Vec<Reply>) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("local address");
        let (req_tx, requests) = mpsc::channel();
        let (_stop, stop_rx) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            for reply in replies {
                let Ok((mut stream, _)) = listener.accept() else {
                    return;
                };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                if let Some(r) = read_request(&mut stream) {
                    let _ = req_tx.send(r);
                }
                match reply {
                    Reply::Raw(bytes) => {
                        let _ = stream.write_all(&bytes);
                    }
                    Reply::Hang => {
                        // Returns when the server is dropped (the sender goes away).
                        let _ = stop_rx.recv_timeout(Duration::from_secs(30));
                    }
                }
            }
        });
        FakeServer {
            addr,
            requests,
            _stop,
        }
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The next request the server read (waits at most 5 s).
    pub(super) fn next_request(&self) -> Recorded {
        self.requests
            .recv_timeout(Duration::from_secs(5))
            .expect("the fake server read no request within 5 s")
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[head_end..]).into_owned();
    Some(Recorded {
        method,
        path,
        headers,
        body,
    })
}
