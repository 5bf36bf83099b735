//! The copy of firedup to a host (issue 25) against a real sshd (tests/common/sshd.rs): the
//! binary `FIREDUP_REMOTE_BIN` names is the one that arrives (sent gzip-compressed: the host has
//! gzip) and runs; a binary that needs a newer glibc than the host has is refused before any copy,
//! in one sentence that names the portable build.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use common::sshd::Sshd;
use common::{Env, Run};

/// `firedup run --host fdtest --json --until exit ARGS` with `bin` as the binary to copy.
fn run_on_host(env: &Env, sshd: &Sshd, bin: &Path, args: &[&str]) -> Run {
    let mut all = vec![
        "run",
        "--host",
        "fdtest",
        "--json",
        "--until",
        "exit",
        "--timeout",
        "60s",
    ];
    all.extend_from_slice(args);
    let remote_state = env.path("remote-state");
    env.cmd_json(
        &all,
        &[
            ("FIREDUP_SSH_CONFIG", sshd.config_path().to_str().unwrap()),
            ("FIREDUP_REMOTE_STATE_DIR", remote_state.to_str().unwrap()),
            ("FIREDUP_REMOTE_BIN", bin.to_str().unwrap()),
        ],
    )
}

/// The remote cache of the sshd's user (root: the same machine).
fn remote_cache() -> PathBuf {
    PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/firedup/bin")
}

/// The portable build when there is one (scripts/build-portable.sh: TARGET/portable/firedup), else
/// the developer build.
fn binary_to_copy() -> PathBuf {
    let dev = Path::new(env!("CARGO_BIN_EXE_firedup"));
    let portable = dev
        .parent()
        .and_then(Path::parent)
        .map(|t| t.join("portable/firedup"));
    portable
        .filter(|p| p.is_file())
        .unwrap_or_else(|| dev.to_path_buf())
}

/// A copy of `source` with bytes appended (an ELF ignores them): a binary no host has yet.
fn fresh_binary(env: &Env, source: &Path) -> (PathBuf, Vec<u8>) {
    let mut bytes = std::fs::read(source).unwrap();
    bytes.extend_from_slice(format!("fresh {:?}", env.work.path()).as_bytes());
    let path = env.path("firedup");
    std::fs::write(&path, &bytes).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (path, bytes)
}

#[test]
fn the_binary_firedup_remote_bin_names_arrives_whole_and_runs() {
    let sshd = Sshd::start();
    let env = Env::new();
    let source = binary_to_copy();
    let (bin, bytes) = fresh_binary(&env, &source);
    let started = Instant::now();
    let r = run_on_host(&env, &sshd, &bin, &["--", "sh", "-c", "echo working"]);
    let first = started.elapsed();
    assert_eq!((r.code, r.verdict()), (0, "succeeded"), "{}", r.explain());
    let arrived: Vec<PathBuf> = std::fs::read_dir(remote_cache())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| std::fs::read(p).is_ok_and(|b| b == bytes))
        .collect();
    assert_eq!(arrived.len(), 1, "{arrived:?}");
    let started = Instant::now();
    let again = run_on_host(&env, &sshd, &bin, &["--", "sh", "-c", "echo working"]);
    eprintln!(
        "{} ({} bytes): first run (copy included) {first:?}, second (reused) {:?}",
        source.display(),
        bytes.len(),
        started.elapsed()
    );
    assert_eq!(again.verdict(), "succeeded", "{}", again.explain());
    std::fs::remove_file(&arrived[0]).unwrap();
}

#[test]
fn a_binary_that_needs_a_newer_glibc_than_the_host_is_refused_with_what_to_do() {
    let sshd = Sshd::start();
    let env = Env::new();
    let (bin, mut bytes) = fresh_binary(&env, Path::new(env!("CARGO_BIN_EXE_firedup")));
    // Rename one GLIBC_2.NN version need to GLIBC_2.99 (same length): the host's glibc is older.
    let need = regex::bytes::Regex::new(r"GLIBC_2\.[0-9]{2}\x00").unwrap();
    let at = need
        .find(&bytes)
        .expect("the binary needs some GLIBC_2.NN")
        .start();
    bytes[at..at + 11].copy_from_slice(b"GLIBC_2.99\x00");
    std::fs::write(&bin, &bytes).unwrap();
    let r = run_on_host(&env, &sshd, &bin, &["--", "true"]);
    assert_eq!(
        (r.code, r.verdict()),
        (7, "monitor_error"),
        "{}",
        r.explain()
    );
    let reason = r.json["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("needs glibc 2.99") && reason.contains("portable"),
        "{reason}"
    );
    let copied = std::fs::read_dir(remote_cache())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .any(|p| std::fs::read(&p).is_ok_and(|b| b == bytes));
    assert!(!copied, "the binary was copied to a host it cannot run on");
}
