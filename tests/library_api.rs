//! The library's front door, as a Rust test uses it: `Launch::new(..).ready_line(..).start()`
//! gives a ready `Running` (or the failure's `Outcome`), `wait()` the final outcome, and a drop
//! leaves no process of the run. The supervisor is the firedup binary built with these tests.

use std::path::Path;
use std::sync::Once;
use std::time::Duration;

use firedup::verdict::{Signature, Verdict};
use firedup::{Error, Launch, StartError};

const FIREDUP: &str = env!("CARGO_BIN_EXE_firedup");

/// Every test's runs go to one private state directory, set before any test launches.
fn state_dir() {
    static SET: Once = Once::new();
    SET.call_once(|| {
        // Under cargo's scratch directory for tests (`target/tmp`), one per test process.
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("library-api-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        // SAFETY: every test calls this first, and `Once` holds the others until it is done: no
        // thread reads the environment while it is written.
        unsafe { std::env::set_var("FIREDUP_STATE_DIR", &dir) };
    });
}

fn launch(script: &str) -> Launch {
    state_dir();
    Launch::new(["sh", "-c", script])
        .firedup_bin(FIREDUP)
        .timeout(Duration::from_secs(60))
        .grace(Duration::from_secs(2))
}

/// The processes carrying `FIREDUP_RUN_ID=id` in their environment, as `/proc` shows them.
fn processes_of_run(id: &str) -> Vec<u32> {
    let needle = format!("FIREDUP_RUN_ID={id}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
        })
        .collect()
}

#[test]
fn a_ready_server_is_running_with_its_pid_log_and_run_id_and_stop_leaves_none_of_it() {
    let server = launch("echo loading; echo 'server listening'; exec sleep 300")
        .ready_line("listening")
        .start()
        .unwrap();
    let o = server.outcome();
    assert_eq!(o.verdict, Verdict::Ready, "{o:?}");
    assert_eq!(o.run_id, server.run_id());
    let pid = server.pid().expect("a pid");
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    assert_eq!(
        std::fs::read_to_string(server.log()).unwrap(),
        "loading\nserver listening\n"
    );
    let id = server.run_id().to_string();
    assert!(!processes_of_run(&id).is_empty());
    let report = server.stop();
    assert!(report.survivors.is_empty(), "{}", report.describe());
    assert_eq!(processes_of_run(&id), Vec::<u32>::new());
}

#[test]
fn a_failed_start_is_not_ready_with_the_signature_and_the_decisive_line() {
    let e = launch(
        "echo loading; echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'; sleep 1; exit 1",
    )
    .ready_line("listening")
    .start()
    .unwrap_err();
    let StartError::NotReady { outcome, teardown } = &e else {
        panic!("not a verdict: {e}");
    };
    assert_eq!(outcome.verdict, Verdict::Failed, "{outcome:?}");
    assert_eq!(outcome.signature, Some(Signature::CudaOom), "{outcome:?}");
    let line = outcome.line.as_ref().expect("a decisive line");
    assert_eq!(line.number, 2);
    assert!(line.text.contains("CUDA out of memory"), "{line:?}");
    assert!(teardown.survivors.is_empty(), "{}", teardown.describe());
    assert!(!outcome.server_running);
    assert_eq!(processes_of_run(&outcome.run_id), Vec::<u32>::new());
    // The error says it in one line.
    let text = e.to_string();
    assert!(text.contains("failed (cuda_oom)"), "{text}");
}

#[test]
fn dropping_a_running_server_leaves_no_process_of_the_run_not_even_a_daemon_it_left() {
    let server = launch("setsid sleep 300 & echo listening; exec sleep 300")
        .ready_line("listening")
        .start()
        .unwrap();
    let id = server.run_id().to_string();
    assert!(
        processes_of_run(&id).len() >= 2,
        "the server and its daemon"
    );
    drop(server);
    assert_eq!(processes_of_run(&id), Vec::<u32>::new());
}

#[test]
fn wait_gives_the_final_outcome_after_ready() {
    let mut server = launch("echo listening; sleep 2; exit 3")
        .ready_line("listening")
        .start()
        .unwrap();
    assert_eq!(server.outcome().verdict, Verdict::Ready);
    let o = server.wait().unwrap();
    assert_eq!(o.verdict, Verdict::Exited, "{o:?}");
    assert_eq!(o.exit.as_ref().and_then(|x| x.code), Some(3), "{o:?}");
    assert!(!o.server_running);
}

#[test]
fn a_job_until_exit_succeeds_and_its_outcome_is_final() {
    let mut job = launch("echo working; exit 0").until_exit().start().unwrap();
    assert_eq!(job.outcome().verdict, Verdict::Succeeded);
    assert_eq!(job.wait().unwrap().verdict, Verdict::Succeeded);
}

#[test]
fn a_usage_mistake_is_firedups_own_error_and_launches_nothing() {
    let e = launch("echo listening; exec sleep 300")
        .ready_line("(unclosed")
        .start()
        .unwrap_err();
    assert!(matches!(e, StartError::Firedup(Error::Pattern(_))), "{e:?}");
    assert!(e.outcome().is_none());
}

#[test]
fn the_command_line_sees_a_run_the_library_started_and_kept_and_stops_it() {
    let server = launch("echo 'library run listening'; exec sleep 300")
        .ready_line("listening")
        .name("library-run")
        .start()
        .unwrap();
    let firedup = |args: &[&str]| {
        let out = std::process::Command::new(FIREDUP)
            .args(args)
            .env(
                "FIREDUP_STATE_DIR",
                std::env::var_os("FIREDUP_STATE_DIR").unwrap(),
            )
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert_eq!(
        firedup(&["logs", "library-run"]),
        (Some(0), "library run listening\n".to_string())
    );
    let outcome = server.keep();
    assert!(outcome.server_running);
    assert!(
        !processes_of_run(&outcome.run_id).is_empty(),
        "kept running"
    );
    let (code, said) = firedup(&["stop", "library-run"]);
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(processes_of_run(&outcome.run_id), Vec::<u32>::new());
    // Watched again: ended by firedup's stop, named as such, at the times the library recorded
    // in the run directory (issue 23, items 4 and 8).
    let (code, said) = firedup(&["watch", "--json", "library-run"]);
    assert_eq!(code, Some(4), "{said}");
    let v: serde_json::Value = serde_json::from_str(said.trim()).unwrap();
    assert_eq!(v["verdict"], "killed", "{said}");
    assert_eq!(v["signature"], "terminated", "{said}");
    assert_eq!(v["ready_s"].as_f64(), outcome.ready_s, "{said}");
    assert!(
        v["reason"].as_str().unwrap().contains("firedup stop"),
        "{said}"
    );
}

#[test]
fn a_server_ready_by_its_port_gives_its_url_and_port() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    state_dir();
    let port_arg = port.to_string();
    let command = [
        "python3",
        "-m",
        "http.server",
        &port_arg,
        "--bind",
        "127.0.0.1",
    ];
    let server = Launch::new(command)
        .firedup_bin(FIREDUP)
        .timeout(Duration::from_secs(60))
        .port(port)
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(server.outcome().verdict, Verdict::Ready);
    assert_eq!(server.port(), Some(port));
    assert_eq!(server.url(), Some(format!("http://127.0.0.1:{port}")));
}

#[test]
fn auto_port_picks_a_free_port_fills_the_command_and_gives_the_url() {
    state_dir();
    // The server listens on the filled-in argument; FIREDUP_PORT carries the same port.
    let command = [
        "sh",
        "-c",
        "echo \"env port $FIREDUP_PORT\"; exec python3 -m http.server \"$0\" --bind 127.0.0.1",
        "{port}",
    ];
    let server = Launch::new(command)
        .firedup_bin(FIREDUP)
        .timeout(Duration::from_secs(60))
        .auto_port()
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    let port = server.port().expect("the picked port");
    assert_eq!(server.outcome().verdict, Verdict::Ready);
    assert_eq!(server.outcome().port, Some(port));
    assert_eq!(server.url(), Some(format!("http://127.0.0.1:{port}")));
    assert_eq!(server.outcome().url, server.url());
    let log = std::fs::read_to_string(server.log()).unwrap();
    assert!(log.contains(&format!("env port {port}")), "{log}");
    let teardown = server.stop();
    assert!(teardown.survivors.is_empty(), "{}", teardown.describe());
}

/// The other half of [`a_program_killed_by_sigkill_takes_its_server_with_it`]: a program that
/// starts a server with the library, says its pid in `FIREDUP_TEST_PIDFILE`, and waits to be
/// killed. Run only by that test (ignored otherwise).
#[test]
#[ignore = "the child of a_program_killed_by_sigkill_takes_its_server_with_it"]
fn owner_child_starts_a_server_and_waits() {
    let Some(pidfile) = std::env::var_os("FIREDUP_TEST_PIDFILE") else {
        return;
    };
    let server = launch("echo serving; exec sleep 300")
        .ready_line("serving")
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&pidfile, server.pid().unwrap().to_string()).unwrap();
    // Never dropped: the kill comes first.
    std::mem::forget(server);
    std::thread::sleep(Duration::from_secs(300));
}

/// A test program killed by SIGKILL runs no drop: the run's owner (the launching process, by
/// default) is gone, and the supervisor stops the server and verifies it.
#[test]
fn a_program_killed_by_sigkill_takes_its_server_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("server.pid");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "owner_child_starts_a_server_and_waits",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("FIREDUP_TEST_PIDFILE", &pidfile)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let bound = std::time::Instant::now() + Duration::from_secs(60);
    let server: u64 = loop {
        if let Some(pid) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break pid;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the child program ended before its server was ready"
        );
        assert!(std::time::Instant::now() < bound, "no server after 60 s");
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    while std::path::Path::new(&format!("/proc/{server}")).exists() && !zombie(server) {
        assert!(
            std::time::Instant::now() < bound + Duration::from_secs(30),
            "the server {server} outlived its owner"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn zombie(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit(')').next().unwrap_or("").trim().starts_with('Z'))
        .unwrap_or(true)
}
