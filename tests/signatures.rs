//! Every failure signature of the README through the real binary: each line-level signature from a
//! fake server that prints a real example line from the catalog and exits 1, and the signal-level
//! ones from real signals.

mod common;
use common::Env;
use firedup::verdict::Signature;

#[test]
fn every_line_signature_is_reported_through_the_binary() {
    let catalog: toml::Value =
        toml::from_str(include_str!("../crates/judge/src/catalog/signatures.toml")).unwrap();
    let env = Env::new();
    let mut checked = std::collections::BTreeSet::new();
    let mut failures = Vec::new();
    for entry in catalog["signature"].as_array().unwrap() {
        let name = entry["name"].as_str().unwrap();
        if entry["strength"].as_str() != Some("fatal") || checked.contains(name) {
            continue;
        }
        let example = entry["examples"][0].as_str().unwrap();
        let r = env.cmd_json(
            &[
                "run",
                "--json",
                "--ready-line",
                "NEVER-PRINTED",
                "--",
                "sh",
                "-c",
                "printf '%s\\n' \"$LINE\"; exit 1",
            ],
            &[("LINE", example)],
        );
        if (r.verdict(), r.signature()) != ("failed", Some(name))
            || r.json["line"]["text"] != example
        {
            failures.push(format!(
                "{name}: {example:?} -> {} {:?}",
                r.verdict(),
                r.signature()
            ));
        }
        checked.insert(name.to_string());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every signature that a log line can name (the signal ones come from how a process ended).
    for sig in Signature::ALL
        .iter()
        .filter(|s| !s.is_signal_class() && **s != Signature::RankExited)
        .map(|s| s.as_str())
    {
        assert!(
            checked.contains(sig),
            "no fatal catalog entry exercised for {sig}"
        );
    }
}

#[test]
fn evidence_lines_name_the_cause_only_when_the_process_dies() {
    let env = Env::new();
    // A bare Python exception followed by a crash: python_exception.
    let r = env.firedup(&[
        "run",
        "--json",
        "--until",
        "exit",
        "--",
        "sh",
        "-c",
        "echo 'Traceback (most recent call last):'; echo 'KeyError: 0'; exit 1",
    ]);
    assert_eq!(
        (r.verdict(), r.signature()),
        ("failed", Some("python_exception")),
        "{}",
        r.explain()
    );
    // The same lines in a job that then succeeds: a handled exception, not a failure.
    let r = env.firedup(&[
        "run",
        "--json",
        "--until",
        "exit",
        "--",
        "sh",
        "-c",
        "echo 'Traceback (most recent call last):'; echo 'KeyError: 0'; echo recovered",
    ]);
    assert_eq!(r.verdict(), "succeeded", "{}", r.explain());
}

#[test]
fn precedence_picks_the_root_cause_over_the_whole_failure() {
    let env = Env::new();
    let r = env.firedup(&[
        "run", "--json", "--ready-line", "NEVER-PRINTED", "--", "sh", "-c",
        "echo 'Traceback (most recent call last):'; \
         echo 'RuntimeError: CUDA error: operation not permitted when stream is capturing'; \
         echo 'Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 1.00 GiB'; exit 1",
    ]);
    assert_eq!(
        (r.verdict(), r.signature()),
        ("failed", Some("cuda_oom")),
        "{}",
        r.explain()
    );
    let secondary: Vec<&str> = r.json["secondary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(secondary.contains(&"graph_capture"), "{secondary:?}");
}

#[test]
fn user_fail_lines_end_the_watch() {
    let env = Env::new();
    let r = env.firedup(&[
        "run",
        "--json",
        "--fail-line",
        "^FATAL-MINE",
        "--ready-line",
        "READY",
        "--",
        "sh",
        "-c",
        "echo 'FATAL-MINE disk array offline'; sleep 300",
    ]);
    assert_eq!(
        (r.code, r.verdict(), r.signature()),
        (1, "failed", None),
        "{}",
        r.explain()
    );
    assert!(r.json["reason"].as_str().unwrap().contains("--fail-line"));
}
