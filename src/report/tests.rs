//! Unit tests of the reports to people (report.rs): the final block, the progress display, ETAs.

use super::*;
use crate::verdict::Signature;

#[test]
fn next_names_the_host_and_only_known_fields_are_shown() {
    let outcome = |verdict, run_id: &str, log: &str, host: Option<&str>| Outcome {
        verdict,
        signature: None,
        reason: "r".into(),
        line: None,
        context: Vec::new(),
        phase: None,
        elapsed_s: 1.0,
        exit: None,
        pid: None,
        log: log.into(),
        run_id: run_id.into(),
        timeline: Vec::new(),
        secondary: Vec::new(),
        server_running: verdict == Verdict::Ready,
        probes: Vec::new(),
        request_gap_s: None,
        gpu: None,
        ready_s: None,
        host: host.map(String::from),
        attached: false,
        schema: crate::verdict::OUTCOME_SCHEMA,
        name: None,
        log_from_line: None,
        rank: None,
        url: None,
        port: None,
        job: None,
        owner: None,
        node: None,
        nodes: None,
        settled: None,
        cause: None,
        placed: Vec::new(),
    };
    let (r, f, m) = (Verdict::Ready, Verdict::Failed, Verdict::MonitorError);
    let table = [
        (
            outcome(r, "sh-3fa2c1", "/l", None),
            Some("firedup stop sh-3fa2c1    (logs: firedup logs sh-3fa2c1 --follow)"),
        ),
        (
            outcome(r, "sh-3fa2c1", "/l", Some("gpu")),
            Some(
                "firedup stop --host gpu sh-3fa2c1    (logs: firedup logs --host gpu sh-3fa2c1 --follow)",
            ),
        ),
        (
            outcome(f, "sh-3fa2c1", "/l", Some("gpu")),
            Some("firedup logs --host gpu sh-3fa2c1 --meaningful"),
        ),
        (outcome(f, "", "/var/l", None), Some("less +G /var/l")),
        (
            outcome(f, "", "/var/l", Some("gpu")),
            Some("ssh gpu less +G /var/l"),
        ),
        // A host that could not be reached: no run, no log, nothing to look at.
        (outcome(m, "", "", Some("gpu")), None),
    ];
    for (o, want) in table {
        assert_eq!(next_command(&o, true).as_deref(), want, "{o:?}");
        let text = render_final(&o, None);
        assert!(
            !text.contains("log:     \n") && !text.ends_with(' '),
            "{text}"
        );
        assert_eq!(text.contains("  log:"), !o.log.is_empty(), "{text}");
    }
    // A log that was never written (or cannot be read) gets no `less +G` that would fail: the
    // next line says that no log was written, and where it was expected.
    let o = outcome(Verdict::NeverStarted, "", "/no/such/dir/server.log", None);
    let next = next_command(&o, false).unwrap();
    assert!(
        next.starts_with("no log to read: nothing readable was written at /no/such/dir/server.log"),
        "{next}"
    );
    // Through the rendering, which looks at the file itself.
    let text = render_final(&o, None);
    assert!(text.contains("next:    no log to read: "), "{text}");
    assert!(!text.contains("less +G"), "{text}");
}

#[test]
fn the_verdict_line_names_the_rank_of_the_root_cause() {
    let o = |signature, rank| Outcome {
        verdict: Verdict::Killed,
        signature,
        reason: "r".into(),
        line: None,
        context: Vec::new(),
        phase: None,
        elapsed_s: 12.0,
        exit: None,
        pid: None,
        log: String::new(),
        run_id: String::new(),
        timeline: Vec::new(),
        secondary: Vec::new(),
        server_running: false,
        probes: Vec::new(),
        request_gap_s: None,
        gpu: None,
        ready_s: None,
        host: None,
        attached: false,
        schema: crate::verdict::OUTCOME_SCHEMA,
        name: None,
        log_from_line: None,
        rank,
        url: None,
        port: None,
        job: None,
        owner: None,
        node: None,
        nodes: None,
        settled: None,
        cause: None,
        placed: Vec::new(),
    };
    let table = [
        (
            Some(Signature::Sigkill),
            Some(1),
            "firedup: KILLED (sigkill, rank 1) after 12.0s\n",
        ),
        (
            Some(Signature::Sigkill),
            None,
            "firedup: KILLED (sigkill) after 12.0s\n",
        ),
        (None, Some(3), "firedup: KILLED (rank 3) after 12.0s\n"),
        (None, None, "firedup: KILLED after 12.0s\n"),
    ];
    for (signature, rank, first) in table {
        let text = render_final(&o(signature, rank), None);
        assert!(text.starts_with(first), "{text}");
    }
    // A multi-node run's verdict names the node before the rank.
    let mut grouped = o(Some(Signature::Sigkill), Some(1));
    grouped.node = Some("gpu-b".into());
    let text = render_final(&grouped, None);
    assert!(
        text.starts_with("firedup: KILLED (sigkill, node gpu-b, rank 1) after 12.0s\n"),
        "{text}"
    );
}

#[test]
fn last_time_hints_name_the_phase_or_ready() {
    let lt = LastTime {
        phases: vec![("capture_cuda_graph".into(), 130.0)],
        ready_s: Some(200.0),
    };
    let table = [
        (
            Some("capture_cuda_graph"),
            90,
            Some("capture_cuda_graph took 2m10s last time; 1m30s so far"),
        ),
        (None, 5, Some("ready took 3m20s last time; 5.0s so far")),
        (Some("load_weights"), 5, None),
    ];
    for (phase, so_far, want) in table {
        assert_eq!(
            lt.hint(phase, Duration::from_secs(so_far)).as_deref(),
            want,
            "{phase:?}"
        );
    }
}

/// A remote run's URL is said with what it is relative to (issue 29); a local run's is not
/// repeated in the block (the JSON has it).
#[test]
fn a_remote_url_says_which_host_it_is_on() {
    let mut o = Outcome::without_watch(Verdict::Ready, "r".into(), "sh-1", "/var/l", None);
    o.host = Some("gpu-box".into());
    o.url = Some("http://gpu-box:30000".into());
    let text = render_final(&o, None);
    assert!(
        text.contains("  url:     http://gpu-box:30000 (on gpu-box, as given to --host)\n"),
        "{text}"
    );
    o.host = None;
    o.url = Some("http://127.0.0.1:30000".into());
    assert!(!render_final(&o, None).contains("url:"));
}
