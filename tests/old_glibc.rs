//! The portable firedup on an old-glibc host (issue 25): a Debian 11 root (glibc 2.31, made by
//! `tests/old_glibc/make_root.sh` with debootstrap) entered with chroot, in a private mount
//! namespace (`unshare --mount`) where /proc, /dev, a state directory (/tmp) and the binary's
//! directory (/mnt) are bind-mounted, so parallel tests share the cached root without touching it.
//! The portable binary and the root: tests/common/old_glibc.rs (without them, or without root
//! privileges, each test says so and passes, unless `FIREDUP_TEST_REQUIRE_OLD_GLIBC=1`). Every firedup call is
//! bounded (`--timeout`); no test asserts a duration.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::old_glibc::{old_root, portable_bin};

/// What a firedup run inside the root printed.
struct Inside {
    code: i32,
    json: serde_json::Value,
    stderr: String,
}

impl Inside {
    fn explain(&self) -> String {
        format!(
            "exit {}\njson: {}\nstderr: {}",
            self.code, self.json, self.stderr
        )
    }
}

/// The old-glibc root and a state directory for one test.
struct OldHost {
    root: PathBuf,
    state: tempfile::TempDir,
}

/// The old host, or `None` (after saying why) when this machine cannot run these tests.
fn old_host() -> Option<OldHost> {
    Some(OldHost {
        root: old_root()?,
        state: tempfile::tempdir().unwrap(),
    })
}

impl OldHost {
    /// Runs `bin ARGS` inside the root, as /mnt/NAME with the binary's directory on /mnt, with a
    /// clean environment and this test's state directory on /tmp.
    fn firedup(&self, bin: &Path, args: &[&str]) -> Inside {
        let inner = Path::new("/mnt").join(bin.file_name().unwrap());
        let mut argv = vec![inner.to_str().unwrap()];
        argv.extend_from_slice(args);
        self.inside(bin.parent().unwrap(), &argv)
    }

    /// Runs `argv` inside the root with `dir` on /mnt (read-only).
    fn inside(&self, dir: &Path, argv: &[&str]) -> Inside {
        let script = r#"set -e
root=$1 state=$2 bindir=$3; shift 3
mount --rbind /proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --bind "$state" "$root/tmp"
mount --bind -o ro "$bindir" "$root/mnt"
exec chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root \
  FIREDUP_STATE_DIR=/tmp FIREDUP_PLAIN=1 "$@""#;
        let out = Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "--",
                "sh",
                "-c",
                script,
                "sh",
            ])
            .arg(&self.root)
            .arg(self.state.path())
            .arg(dir)
            .args(argv)
            .output()
            .expect("unshare runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        Inside {
            code: out.status.code().unwrap_or(-1),
            json: serde_json::from_str(stdout.trim()).unwrap_or(serde_json::Value::Null),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

#[test]
fn the_root_is_old_enough_that_the_developer_build_does_not_start_there() {
    let Some(host) = old_host() else { return };
    let dev = Path::new(env!("CARGO_BIN_EXE_firedup"));
    let r = host.firedup(dev, &["--version"]);
    assert_ne!(r.code, 0, "{}", r.explain());
    assert!(r.stderr.contains("GLIBC_"), "{}", r.explain());
}

#[test]
fn the_portable_binary_starts_on_glibc_2_31() {
    let Some(host) = old_host() else { return };
    let r = host.firedup(&portable_bin(), &["--version"]);
    assert_eq!(r.code, 0, "{}", r.explain());
}

#[test]
fn the_portable_binary_judges_a_job_there() {
    let Some(host) = old_host() else { return };
    let r = host.firedup(
        &portable_bin(),
        &[
            "run",
            "--json",
            "--until",
            "exit",
            "--timeout",
            "60s",
            "--",
            "sh",
            "-c",
            "echo working; exit 0",
        ],
    );
    assert_eq!(
        (r.code, r.json["verdict"].as_str()),
        (0, Some("succeeded")),
        "{}",
        r.explain()
    );
}

#[test]
fn the_portable_binary_judges_a_server_there_and_stops_it() {
    let Some(host) = old_host() else { return };
    let bin = portable_bin();
    let r = host.firedup(
        &bin,
        &[
            "run",
            "--json",
            "--keep",
            "--no-probe",
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
    assert_eq!(r.json["verdict"].as_str(), Some("ready"), "{}", r.explain());
    let id = r.json["run_id"].as_str().expect("a run id").to_string();
    let s = host.firedup(&bin, &["stop", "--json", &id]);
    assert_eq!(
        (s.code, s.json["clean"].as_bool()),
        (0, Some(true)),
        "{}",
        s.explain()
    );
}

#[test]
fn pip_installs_the_wheel_there_and_the_firedup_it_installs_runs() {
    let Some(host) = old_host() else { return };
    let dir = portable_bin().parent().unwrap().to_path_buf();
    let wheel = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .find(|n| n.starts_with("firedup-") && n.ends_with(".whl"))
        .unwrap_or_else(|| {
            panic!(
                "no firedup-*.whl beside {} (bash scripts/build-portable.sh)",
                dir.display()
            )
        });
    // pip checks the wheel's platform tag against this glibc (2.31): a manylinux_2_34 wheel is
    // "not a supported wheel on this platform". Offline: ensurepip's own pip, no index.
    // Then the API on the root's own Python (3.9, the oldest the package declares): a server on
    // an auto port, ready, answering, stopped with nothing left; a failing job raises JobFailed.
    let script = format!(
        "python3 -m venv /tmp/venv && /tmp/venv/bin/pip install --quiet --no-index --no-deps \
         --disable-pip-version-check /mnt/{wheel} && /tmp/venv/bin/firedup --version && \
         /tmp/venv/bin/python -c \"$API_CHECK\""
    );
    let r = host.inside(
        &dir,
        &[
            "/usr/bin/env",
            &format!("API_CHECK={API_CHECK}"),
            "/bin/sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(r.code, 0, "{}", r.explain());
    assert!(r.stderr.contains("api ok on 3.9"), "{}", r.explain());
}

/// What `pip_installs_the_wheel_there_and_the_firedup_it_installs_runs` asks of the installed API.
const API_CHECK: &str = r#"
import sys, urllib.request
import firedup
assert sys.version_info[:2] == (3, 9), sys.version
server = ["python3", "-m", "http.server", "--bind", "127.0.0.1", "{port}"]
with firedup.launch(server, port="auto", timeout="60s", grace=5) as s:
    assert urllib.request.urlopen(s.url, timeout=10).status == 200
assert s.teardown is not None and s.teardown.left_nothing, s.teardown
try:
    firedup.start(["sh", "-c", "echo working; exit 3"], until="exit", timeout=60.0)
    raise SystemExit("a failing job raised nothing")
except firedup.JobFailed as e:
    assert e.verdict["exit"]["code"] == 3, e.verdict
print("api ok on 3.9", file=sys.stderr)
"#;
