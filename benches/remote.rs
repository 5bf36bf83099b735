//! Remote figure: a decisive line written on the host → the verdict here, over a real sshd in a
//! network namespace (the test harness's `NetLink`, with added latency, half of it on each
//! direction: the log line's way back to firedup is delayed too), against the loop users
//! write instead: `until ssh host grep -q READY LOG; do sleep 1; done`, a new connection per poll.
//! Goal: firedup's latency ≤ the link's round trip + 10 ms.
//!
//! `cargo bench --bench remote` (runs: `FIREDUP_BENCH_RUNS`, default 5; latencies in ms:
//! `FIREDUP_BENCH_DELAYS`, default `0,20`). Needs root (network namespaces), sshd and ssh.

#[path = "../tests/common/sshd.rs"]
#[allow(dead_code)]
mod sshd;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sshd::{NetLink, Sshd};

fn firedup_bin() -> PathBuf {
    std::env::var_os("FIREDUP_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_firedup")))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn append(path: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    f.write_all(format!("{line}\n").as_bytes()).unwrap();
}

/// One TCP handshake to sshd: one round trip.
fn rtt_ms(addr: &str) -> f64 {
    let mut v: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            let s = TcpStream::connect(addr).unwrap();
            let d = t.elapsed().as_secs_f64() * 1e3;
            drop(s);
            d
        })
        .collect();
    median(&mut v)
}

/// firedup watch --host on a log; ms from the write to the verdict on stdout.
fn trial_firedup(sshd: &Sshd, dir: &Path, state: &Path) -> f64 {
    let log = dir.join("server.log");
    let _ = std::fs::remove_file(&log);
    std::fs::write(&log, "server starting\n").unwrap();
    let mut child = Command::new(firedup_bin())
        .args([
            "watch",
            "--json",
            "--host",
            "fdtest",
            "--no-probe",
            "--ready-line",
            "READY",
            "--log",
        ])
        .arg(&log)
        .env("FIREDUP_SSH_CONFIG", sshd.config_path())
        .env("FIREDUP_REMOTE_STATE_DIR", dir.join("remote-state"))
        .env("FIREDUP_STATE_DIR", state)
        .env("FIREDUP_PLAIN", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Attached once the agent's first lines have arrived ("following ...").
    let err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            if l.contains(": following ") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("firedup never attached over ssh");
    std::thread::sleep(Duration::from_millis(300));
    let mut out = child.stdout.take().unwrap();
    let t0 = Instant::now();
    append(&log, "READY");
    let mut b = [0u8; 1];
    let _ = out.read(&mut b);
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let _ = child.wait();
    ms
}

/// The hand-made loop: a new ssh connection per poll, 1 s apart.
fn trial_loop(sshd: &Sshd, dir: &Path) -> f64 {
    let log = dir.join("loop.log");
    std::fs::write(&log, "server starting\n").unwrap();
    let script = format!(
        "until ssh -F {} fdtest grep -q READY {}; do sleep 1; done",
        sshd.config_path().display(),
        log.display()
    );
    let mut child = Command::new("sh")
        .args(["-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let t0 = Instant::now();
    append(&log, "READY");
    let _ = child.wait();
    t0.elapsed().as_secs_f64() * 1e3
}

fn main() {
    if let Err(e) = sshd::netns_available() {
        println!("SKIP: the remote benchmark needs network namespaces: {e}");
        return;
    }
    let runs = std::env::var("FIREDUP_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5usize);
    let delays: Vec<u32> = std::env::var("FIREDUP_BENCH_DELAYS")
        .unwrap_or_else(|_| "0,20".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let link = NetLink::new();
    let sshd = Sshd::start_in(&link);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let addr = format!("{}:{}", link.server_addr(), sshd.port());
    println!("## remote: decisive line on the host → verdict here (ms, median of {runs})\n");
    println!(
        "| added latency (round trip; each way) | link RTT | firedup watch --host | `until ssh host grep; sleep 1` | ratio | goal (RTT + 10 ms) | met? |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for d in delays {
        if d > 0 {
            link.add_latency(d);
        } else {
            link.clear_latency();
        }
        let rtt = rtt_ms(&addr);
        let mut f: Vec<f64> = (0..runs)
            .map(|_| trial_firedup(&sshd, dir.path(), &state))
            .collect();
        let mut l: Vec<f64> = (0..runs).map(|_| trial_loop(&sshd, dir.path())).collect();
        eprintln!("raw ms, {d} ms added: firedup {f:.2?} loop {l:.0?}");
        let (mf, ml) = (median(&mut f), median(&mut l));
        println!(
            "| {d} ms; {:.1} ms | {rtt:.2} ms | {mf:.2} ms | {ml:.0} ms | {:.3} | ≤ {:.1} ms | {} |",
            d as f64 / 2.0,
            mf / ml,
            rtt + 10.0,
            if mf <= rtt + 10.0 { "yes" } else { "NO" }
        );
    }
}
