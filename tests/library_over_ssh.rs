//! The library's `Launch` on another host: `.host(SshHost)` launches under the firedup that is
//! copied there (the binary a library launch supervises with, not the test's own program),
//! watches it to `ready` over SSH, and `stop` there leaves nothing. The "host" is a real sshd on
//! this machine, so what is left can be checked in `/proc` here.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::sshd::Sshd;
use firedup::Launch;
use firedup::host::SshHost;
use firedup::remote::HostSpec;
use firedup::verdict::Verdict;

#[test]
fn launch_over_ssh_is_ready_and_its_stop_leaves_nothing() {
    let sshd = Sshd::start();
    let state = tempfile::tempdir().unwrap();
    let remote_state = tempfile::tempdir().unwrap();
    // SAFETY: the only test in this binary, before any thread of its own reads the environment.
    unsafe {
        std::env::set_var("FIREDUP_STATE_DIR", state.path());
        std::env::set_var("FIREDUP_REMOTE_STATE_DIR", remote_state.path());
        std::env::set_var("FIREDUP_SSH_CONFIG", sshd.config_path());
        std::env::set_var("FIREDUP_BIN", env!("CARGO_BIN_EXE_firedup"));
    }
    let host = SshHost::new(
        HostSpec::new(sshd.host_alias(), Duration::from_secs(20)),
        Duration::from_secs(30),
    );
    let running = Launch::new(["sh", "-c", "echo serving; exec sleep 300"])
        .ready_line("serving")
        .timeout(Duration::from_secs(60))
        .grace(Duration::from_secs(2))
        .host(Arc::new(host))
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(running.outcome().verdict, Verdict::Ready);
    assert_eq!(running.outcome().host.as_deref(), Some(sshd.host_alias()));
    let pid = running.pid().expect("the remote pid") as u64;
    assert!(common::alive(pid), "the server runs on the host");
    let teardown = running.stop();
    assert!(teardown.survivors.is_empty(), "{}", teardown.describe());
    assert!(
        !common::alive(pid),
        "nothing of the run is left on the host"
    );
}
