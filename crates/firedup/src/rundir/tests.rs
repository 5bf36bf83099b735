//! Unit tests of the run directory (rundir.rs): run ids, names, records.

use super::*;
use crate::verdict::Outcome;

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

#[test]
fn of_verdicts_recorded_at_once_the_first_to_appear_stays() {
    // Writers race to record a run's verdict while a reader watches the file: once a verdict
    // is there, it is whole and it never changes (a rename into place would let a later writer
    // replace it).
    let dir = tempfile::tempdir().unwrap();
    for round in 0..20 {
        let path = dir.path().join(format!("run-{round}"));
        fs::create_dir(&path).unwrap();
        let run = RunDir {
            id: format!("run-{round}"),
            path: path.clone(),
        };
        let outcome = |reason: String| -> Outcome {
            serde_json::from_value(serde_json::json!({
                "verdict": "ready", "reason": reason, "context": [], "elapsed_s": 1.0,
                "log": "/l", "run_id": "r", "timeline": [], "secondary": [],
            }))
            .unwrap()
        };
        let writers_done = std::sync::atomic::AtomicBool::new(false);
        let first_seen = std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut first: Option<String> = None;
                loop {
                    let done = writers_done.load(std::sync::atomic::Ordering::SeqCst);
                    if let Ok(text) = fs::read_to_string(path.join("verdict.json")) {
                        let seen: Outcome = serde_json::from_str(&text).expect("a whole record");
                        match &first {
                            None => first = Some(seen.reason),
                            Some(f) => assert_eq!(&seen.reason, f, "round {round}"),
                        }
                    }
                    if done {
                        return first;
                    }
                }
            });
            let writers: Vec<_> = (0..4)
                .map(|w| {
                    let (run, outcome) = (&run, &outcome);
                    s.spawn(move || run.record_verdict(&outcome(format!("writer {w}"))).unwrap())
                })
                .collect();
            for w in writers {
                w.join().unwrap();
            }
            writers_done.store(true, std::sync::atomic::Ordering::SeqCst);
            reader.join().unwrap()
        });
        let last = run.verdict().expect("recorded").reason;
        assert_eq!(first_seen.as_ref(), Some(&last), "round {round}");
        let left: Vec<_> = fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            left,
            vec![std::ffi::OsString::from("verdict.json")],
            "round {round}"
        );
    }
}
