//! `run --host` to an old-glibc host, end to end (issue 25): the test sshd (tests/common/sshd.rs)
//! runs every session's command inside the Debian 11 root (tests/common/old_glibc.rs) through a
//! ForceCommand that enters a private mount namespace, bind-mounts /proc, /dev, a fresh home
//! (/root: the host's cache starts empty) and a state directory (/tmp), and chroots. So the host
//! firedup copies to answers with glibc 2.31: the portable binary is copied there and judges a
//! job and a server (stopped, nothing left); the developer build is refused before any copy.
//! Skips (or fails under `FIREDUP_TEST_REQUIRE_OLD_GLIBC=1`) as tests/old_glibc.rs does.

use crate::common;

use std::path::{Path, PathBuf};

use common::old_glibc::{old_root, portable_bin};
use common::sshd::Sshd;
use common::{Env, Run};

/// An sshd whose sessions run in the old root, with their home and state directory in `env`.
fn old_sshd(env: &Env, root: &Path) -> Sshd {
    let home = env.path("host-home");
    let state = env.path("host-state");
    for d in [&home, &state] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    }
    let inner = r#"set -e; r=$0; mount --rbind /proc "$r/proc"; mount --rbind /dev "$r/dev"; mount --bind "$1" "$r/root"; mount --bind "$2" "$r/tmp"; exec chroot "$r" /bin/sh -c "$SSH_ORIGINAL_COMMAND""#;
    let wrapper = env.path("enter-old-root.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec unshare --mount --propagation private -- sh -c '{inner}' '{}' '{}' '{}'\n",
            root.display(),
            home.display(),
            state.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    Sshd::start_with(&format!("ForceCommand {}", wrapper.display()))
}

/// firedup here, `--host fdtest` there, copying `bin`; the host's state dir is its /tmp.
fn fd(env: &Env, sshd: &Sshd, bin: &Path, args: &[&str]) -> Run {
    env.cmd_json(
        args,
        &[
            ("FIREDUP_SSH_CONFIG", sshd.config_path().to_str().unwrap()),
            ("FIREDUP_REMOTE_STATE_DIR", "/tmp"),
            ("FIREDUP_REMOTE_BIN", bin.to_str().unwrap()),
        ],
    )
}

#[test]
fn the_portable_binary_is_copied_to_a_glibc_2_31_host_and_judges_a_job_and_a_server_there() {
    let Some(root) = old_root() else { return };
    let env = Env::new();
    let sshd = old_sshd(&env, &root);
    let bin = portable_bin();
    let job = fd(
        &env,
        &sshd,
        &bin,
        &[
            "run",
            "--host",
            "fdtest",
            "--json",
            "--until",
            "exit",
            "--timeout",
            "60s",
            "--",
            "sh",
            "-c",
            "echo working",
        ],
    );
    assert_eq!(
        (job.code, job.verdict()),
        (0, "succeeded"),
        "{}",
        job.explain()
    );
    let copied: Vec<PathBuf> = std::fs::read_dir(env.path("host-home/.cache/firedup/bin"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    assert_eq!(copied.len(), 1, "{copied:?}");
    assert_eq!(
        std::fs::read(&copied[0]).unwrap(),
        std::fs::read(&bin).unwrap()
    );
    let server = fd(
        &env,
        &sshd,
        &bin,
        &[
            "run",
            "--host",
            "fdtest",
            "--json",
            "--ready-line",
            "serving",
            "--timeout",
            "60s",
            "--",
            "sh",
            "-c",
            "echo serving; exec sleep 600",
        ],
    );
    assert_eq!(server.verdict(), "ready", "{}", server.explain());
    let stop = fd(
        &env,
        &sshd,
        &bin,
        &["stop", "--host", "fdtest", "--json", server.run_id()],
    );
    assert_eq!(
        (stop.code, stop.json["clean"].as_bool()),
        (0, Some(true)),
        "{}",
        stop.explain()
    );
}

#[test]
fn the_developer_build_is_refused_there_before_any_copy_with_what_to_do() {
    let Some(root) = old_root() else { return };
    let env = Env::new();
    let sshd = old_sshd(&env, &root);
    let r = fd(
        &env,
        &sshd,
        Path::new(env!("CARGO_BIN_EXE_firedup")),
        &[
            "run",
            "--host",
            "fdtest",
            "--json",
            "--until",
            "exit",
            "--timeout",
            "60s",
            "--",
            "true",
        ],
    );
    assert_eq!(
        (r.code, r.verdict()),
        (7, "monitor_error"),
        "{}",
        r.explain()
    );
    let reason = r.json["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("has glibc 2.31") && reason.contains("portable"),
        "{reason}"
    );
    assert!(!env.path("host-home/.cache/firedup/bin").exists());
}
