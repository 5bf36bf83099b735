//! Issue 24 item 8: secrets stay out of `ps` and out of what firedup stores and prints.
//!
//! (a) `--env KEY` takes the value from firedup's own environment: while a run is watched, a
//! second local user reading every process's `/proc/PID/cmdline` never sees the value, and the
//! server still gets it. (b) Once the server prints a secret firedup knows by name (an `--env`
//! value, a secret-named flag's value) or a form that names one (`api_key='...'`,
//! `"hf_token": "..."`, `NAME=value`), the verdict, the events, the run directory and the history
//! hold none of it. (c) An `--http` URL's password is stored nowhere.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Env;

/// Every file under `dir` that holds `needle` (bytes), with the first place it was seen.
fn files_holding(dir: &std::path::Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                    found.push(p.display().to_string());
                }
            }
        }
    }
    found
}

#[test]
fn an_env_value_given_by_name_is_in_no_process_command_line() {
    let Some(other) = common::other_user::other_user() else {
        return;
    };
    let env = Env::new();
    let secret = "pw-argv-7f3a9c-never-in-ps";
    let got = env.path("got");
    let script = env.script(
        "server",
        &format!(
            "printf '%s' \"$MY_SERVICE_PASSWD\" > {}\necho READY\nexec sleep 60",
            got.display()
        ),
    );
    let mut c = env.cmd();
    c.env("MY_SERVICE_PASSWD", secret)
        .args([
            "run",
            "--json",
            "--ready-line",
            "READY",
            "--no-probe",
            "--hold",
            "4s",
            "--env",
            "MY_SERVICE_PASSWD",
            "--",
            &script,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let watcher = c.spawn().expect("firedup runs");
    // While firedup watches (the --hold window), the other user reads every command line.
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&got).unwrap_or_default() != secret {
        assert!(
            Instant::now() < deadline,
            "the server never got its env value"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut ps = Command::new("sh");
    ps.args([
        "-c",
        "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f 2>/dev/null; echo; done",
    ]);
    other.command(&mut ps);
    let seen = ps.output().expect("the other user reads /proc");
    let seen = String::from_utf8_lossy(&seen.stdout).into_owned();
    let out = watcher.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let json: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_default();
    if let Some(id) = json["run_id"].as_str() {
        env.fd("stop").opt("grace", "1s").arg(id).output();
    }
    assert!(
        seen.contains("__supervise"),
        "the other user saw the run's processes: {seen}"
    );
    assert!(
        !seen.contains(secret),
        "the other user read the secret in a command line"
    );
    assert_eq!(json["verdict"], "ready", "{stdout}");
    assert!(!stdout.contains(secret));
}

#[test]
fn secrets_the_server_prints_are_stored_and_shown_nowhere() {
    let env = Env::new();
    let by_env = "pw-env-51d2e8-by-name";
    let by_old_form = "aws-3c9b1f0e-by-name";
    let by_flag = "flag-key-99e4a2c1";
    let named = "sgl-key-8812ab";
    let in_json = "json-tok-4471cd";
    let in_url = "url-pw-66af02";
    let log = env.path("server.log");
    let events = env.path("events.jsonl");
    let script = env.script(
        "server",
        &[
            "echo \"connecting with $MY_SERVICE_PASSWD\"",
            "echo \"env: AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY\"",
            "echo \"args: $*\"",
            &format!(
                "echo \"[2025-03-01 10:00:00] server_args=ServerArgs(model_path='m', api_key='{named}', port=30000)\""
            ),
            &format!("echo '{{\"hf_token\": \"{in_json}\", \"model\": \"m\"}}'"),
            "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.'",
            "exit 1",
        ]
        .join("\n"),
    );
    let http = format!(
        "http://probe:{in_url}@127.0.0.1:{}/health",
        common::free_port()
    );
    let r = env.cmd_json(
        &[
            "run",
            "--json",
            "--log",
            log.to_str().unwrap(),
            "--events",
            events.to_str().unwrap(),
            "--http",
            &http,
            "--env",
            &format!("MY_SERVICE_PASSWD={by_env}"),
            "--env",
            &format!("AWS_SECRET_ACCESS_KEY={by_old_form}"),
            "--",
            &script,
            "--api-key",
            by_flag,
        ],
        &[],
    );
    assert_eq!(r.verdict(), "failed", "{}", r.explain());
    assert_eq!(r.signature(), Some("cuda_oom"), "{}", r.explain());
    // The server printed them all: the log is its own, written by it.
    let printed = common::file_text(&log);
    let secrets = [by_env, by_old_form, by_flag, named, in_json, in_url];
    for s in &secrets[..5] {
        assert!(printed.contains(s), "the server printed {s}: {printed}");
    }
    // A later look at the run prints and reads what was stored.
    let show = env.fd("show").arg(r.run_id()).output();
    let history = env.fd("history").json().output();
    for s in secrets {
        assert!(
            !r.stdout.contains(s),
            "{s} in the JSON verdict: {}",
            r.stdout
        );
        assert!(!r.stderr.contains(s), "{s} on stderr: {}", r.stderr);
        let stored = files_holding(env.state.path(), s);
        assert!(stored.is_empty(), "{s} stored in {stored:?}");
        let ev = common::file_text(&events);
        assert!(!ev.contains(s), "{s} in the events: {ev}");
        assert!(!show.stdout.contains(s), "{s} in show: {}", show.stdout);
        assert!(!history.stdout.contains(s), "{s} in history");
    }
    // What was redacted is still there to read: the lines, with `<redacted>` in place.
    let context = r.json["context"].to_string();
    assert!(context.contains("api_key='<redacted>'"), "{context}");
    assert!(context.contains("connecting with <redacted>"), "{context}");
}
