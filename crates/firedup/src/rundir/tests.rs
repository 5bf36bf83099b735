//! Unit tests of the run directory (rundir.rs): run ids, names, records.

use super::*;

#[test]
fn run_ids_are_named_after_what_the_command_runs() {
    let table: [(&[&str], &str); 12] = [
        // The README's examples.
        (&["./examples/demo-server.sh"], "demo-server"),
        (
            &[
                "python",
                "-m",
                "sglang.launch_server",
                "--model-path",
                "Q/Q",
            ],
            "sglang",
        ),
        (&["python3.11", "-u", "train.py", "--lr", "1"], "train"),
        (&["vllm", "serve", "m"], "vllm"),
        (&["nohup", "/usr/bin/postgres", "-D", "/d"], "postgres"),
        (
            &["env", "A=1", "redis-server", "--port", "1"],
            "redis-server",
        ),
        (&["sh", "-c", "echo hi; sleep 1"], "sh"),
        (
            &["sh", "-c", "exec \"$@\"", "--api-key", "sk-abcdefghijklmn"],
            "sh",
        ),
        (&["ghp_abcdefghijklmnopqrstu"], "redacted"),
        (&["sleep", "1"], "sleep"),
        (&["--"], "run"),
        (&["./a b/ünïcode"], "ncode"),
    ];
    for (command, want) in table {
        let command: Vec<String> = command.iter().map(|s| s.to_string()).collect();
        assert_eq!(id_stem(&command), want, "{command:?}");
    }
    let id = fresh_id("sglang", 0);
    assert!(
        id.starts_with("sglang-") && id.len() == "sglang-".len() + 6,
        "{id}"
    );
}

#[test]
fn run_names_are_checked() {
    for ok in ["web", "qwen-7b.tp2", "a_1", "X"] {
        assert!(check_name(ok).is_ok(), "{ok}");
    }
    for bad in ["", ".hidden", "-flag", "a/b", "a b", "ü", &"x".repeat(65)] {
        let e = check_name(bad).unwrap_err().to_string();
        assert!(e.contains("is not a run name"), "{bad}: {e}");
    }
}

#[test]
fn the_state_dir_never_falls_back_to_a_shared_path() {
    let p = |s: &str| Some(PathBuf::from(s));
    let table = [
        ((p("/s"), p("/x"), p("/h")), "/s"),
        ((None, p("/x"), p("/h")), "/x/firedup"),
        ((None, p("rel"), p("/h")), "/h/.local/state/firedup"),
        ((None, None, p("/h")), "/h/.local/state/firedup"),
        // No home at all: a directory of this user's own, checked before use.
        ((None, None, None), "/tmp/firedup-1000"),
        ((None, None, p("relative")), "/tmp/firedup-1000"),
    ];
    for ((state, xdg, home), want) in table {
        assert_eq!(
            state_root_from(state.clone(), xdg.clone(), home.clone(), 1000),
            PathBuf::from(want),
            "{state:?} {xdg:?} {home:?}"
        );
    }
}

#[test]
fn a_state_dir_writable_by_others_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
    assert!(check_private(dir.path()).is_ok());
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let e = check_private(dir.path()).unwrap_err().to_string();
    assert!(e.contains("FIREDUP_STATE_DIR"), "{e}");
}
