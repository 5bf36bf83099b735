//! Time, history, names and secrets through the real binary (issue 11, cases 13-16): times count
//! from the launch, also for a later `watch RUN_ID`; one history row per run; runs have names a
//! person chose; what looks secret by name or by value is never stored or shown.
//!
//! No wall-clock bound on what firedup takes: each firedup call is bounded only so that a hang
//! fails the test instead of blocking it; what is asserted is the verdict and the reported times
//! (which only ever have lower bounds here).

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Env, Run};

/// What no firedup call here may take (a hang, not a speed limit).
const BOUND: Duration = Duration::from_secs(60);

/// Runs firedup with `args` (bounded), JSON on stdout parsed when it is JSON.
fn firedup(env: &Env, args: &[&str]) -> Run {
    firedup_with(env, args, &[])
}

fn firedup_with(env: &Env, args: &[&str], vars: &[(&str, &str)]) -> Run {
    let mut call = env.fd(args[0]).args_from(&args[1..]).bounded(BOUND);
    for (k, v) in vars {
        call = call.var(k, v);
    }
    call.output()
}

/// The history rows, newest first.
fn history(env: &Env) -> Vec<serde_json::Value> {
    let h = env
        .fd("history")
        .json()
        .opt("limit", "0")
        .bounded(BOUND)
        .output();
    assert_eq!(h.code, 0, "{}", h.explain());
    h.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn rows_of(env: &Env, run_id: &str) -> Vec<serde_json::Value> {
    history(env)
        .into_iter()
        .filter(|r| r["run_id"] == run_id)
        .collect()
}

/// `ps --all --json`, or `ps --json` on a firedup that lists every run by default.
fn ps_all(env: &Env) -> Vec<serde_json::Value> {
    let mut p = env.fd("ps").flag("all").json().bounded(BOUND).output();
    if p.code == 2 {
        p = env.fd("ps").json().bounded(BOUND).output();
    }
    assert_eq!(p.code, 0, "{}", p.explain());
    p.json.as_array().cloned().unwrap_or_default()
}

/// Waits (bounded) until `ps` lists a run that is running; returns its id.
fn wait_running(env: &Env) -> String {
    let deadline = Instant::now() + BOUND;
    loop {
        if let Some(r) = ps_all(env).iter().find(|r| r["state"] == "running") {
            return r["run_id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "no run became running");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Launches a server with `firedup run` and kills that firedup (SIGKILL) `after` the run started
/// running: the server lives on, with nobody watching it. Returns the run id.
fn launch_and_abandon(env: &Env, args: &[&str], after: Duration) -> String {
    let mut c = env.cmd();
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = c.spawn().expect("firedup starts");
    let id = wait_running(env);
    std::thread::sleep(after);
    child.kill().unwrap();
    child.wait().unwrap();
    id
}

fn stop(env: &Env, id: &str) {
    let s = env
        .fd("stop")
        .opt("grace", "2s")
        .arg(id)
        .bounded(BOUND)
        .output();
    assert_eq!(s.code, 0, "{}", s.explain());
}

fn secs(v: &serde_json::Value) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("not a number of seconds: {v}"))
}

// ---- case 13: times count from the launch ----

#[test]
fn a_one_second_job_reports_at_least_one_second() {
    let env = Env::new();
    let r = env
        .run()
        .until("exit")
        .json()
        .command(&["sleep", "1"])
        .bounded(BOUND)
        .output();
    assert_eq!(r.verdict(), "succeeded", "{}", r.explain());
    let elapsed = secs(&r.json["elapsed_s"]);
    assert!(elapsed >= 1.0, "elapsed_s {elapsed} < 1 s: {}", r.explain());
}

const READY_AFTER_2S: &str = "echo starting; sleep 2; echo READY; exec sleep 300";

#[test]
fn a_later_watch_counts_from_the_launch() {
    let env = Env::new();
    let id = launch_and_abandon(
        &env,
        &[
            "run",
            "--ready-line",
            "READY",
            "--",
            "sh",
            "-c",
            READY_AFTER_2S,
        ],
        Duration::from_secs(1),
    );
    let w = env.fd("watch").arg(&id).json().bounded(BOUND).output();
    stop(&env, &id);
    assert_eq!(w.verdict(), "ready", "{}", w.explain());
    let (elapsed, ready) = (secs(&w.json["elapsed_s"]), secs(&w.json["ready_s"]));
    assert!(elapsed >= 2.0, "elapsed_s {elapsed} < 2 s: {}", w.explain());
    assert!(ready >= 2.0, "ready_s {ready} < 2 s: {}", w.explain());
    let timeline = w.json["timeline"].as_array().unwrap();
    let at_ready = timeline
        .iter()
        .find(|p| p["phase"] == "ready")
        .map(|p| secs(&p["at_s"]))
        .unwrap_or_else(|| panic!("no ready in the timeline: {}", w.explain()));
    assert!(at_ready >= 2.0, "ready @{at_ready} < 2 s: {}", w.explain());
}

/// A watch that attaches long after the launch is not judged for the time it did not see: the
/// start deadline counts from the attach (the times it reports count from the launch), so a
/// server that has been ready for longer than its `--timeout` is still `ready`.
#[test]
fn a_late_watch_waits_from_the_attach() {
    let env = Env::new();
    let port = common::free_port().to_string();
    let r = env
        .run()
        .json()
        .opt("port", &port)
        .timeout("2s")
        .command(&["python3", "-m", "http.server", &port, "--bind", "127.0.0.1"])
        .bounded(BOUND)
        .output();
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    let id = r.run_id().to_string();
    std::thread::sleep(Duration::from_millis(2500));
    let w = env.fd("watch").arg(&id).json().bounded(BOUND).output();
    stop(&env, &id);
    assert_eq!(w.verdict(), "ready", "{}", w.explain());
    assert!(secs(&w.json["elapsed_s"]) >= 2.5, "{}", w.explain());
}

// ---- case 14: one history row per run ----

const PHASED_SERVER: &str = "echo 'Load weight begin'; sleep 0.3; echo 'Capture cuda graph begin'; sleep 0.6; echo 'The server is fired up and ready to roll!'; exec sleep 300";

const RUN_PHASED: [&str; 9] = [
    "run",
    "--json",
    "--profile",
    "sglang",
    "--no-probe",
    "--",
    "sh",
    "-c",
    PHASED_SERVER,
];

fn run_phased_args() -> Vec<&'static str> {
    RUN_PHASED.to_vec()
}

#[test]
fn a_reattach_updates_the_runs_one_row_and_keeps_the_launchs_times() {
    let env = Env::new();
    let r = firedup(&env, &run_phased_args());
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    let id = r.run_id().to_string();
    for _ in 0..2 {
        let w = env.fd("watch").arg(&id).json().bounded(BOUND).output();
        assert_eq!(w.verdict(), "ready", "{}", w.explain());
    }
    stop(&env, &id);
    let rows = rows_of(&env, &id);
    assert_eq!(rows.len(), 1, "one run, one row: {rows:#?}");
    let o = &rows[0]["outcome"];
    assert_eq!(o["ready_s"], r.json["ready_s"], "{rows:#?}");
    assert_eq!(o["timeline"], r.json["timeline"], "{rows:#?}");
}

#[test]
fn times_of_a_reattach_make_no_eta() {
    let env = Env::new();
    let id = launch_and_abandon(&env, &run_phased_args(), Duration::ZERO);
    let w = env.fd("watch").arg(&id).json().bounded(BOUND).output();
    assert_eq!(w.verdict(), "ready", "{}", w.explain());
    stop(&env, &id);
    assert_eq!(rows_of(&env, &id).len(), 1);
    let next = firedup(&env, &run_phased_args());
    assert_eq!(next.verdict(), "ready", "{}", next.explain());
    stop(&env, next.run_id());
    assert!(
        !next.stderr.contains("last time"),
        "an ETA from a re-attach's times: {}",
        next.explain()
    );
}

// ---- case 15: names, ps, prune, ids ----

const UP_SERVER: [&str; 4] = ["sh", "-c", "echo up; exec sleep 300", ""];

fn run_up(env: &Env, name: Option<&str>) -> Run {
    let mut args = vec!["run", "--json", "--ready-line", "up"];
    if let Some(n) = name {
        args.extend(["--name", n]);
    }
    args.push("--");
    args.extend(&UP_SERVER[..3]);
    firedup(env, &args)
}

fn ps_ids(env: &Env, all: bool) -> Vec<String> {
    let p = if all {
        env.fd("ps").flag("all").json().bounded(BOUND).output()
    } else {
        env.fd("ps").json().bounded(BOUND).output()
    };
    assert_eq!(p.code, 0, "{}", p.explain());
    p.json
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_name_goes_where_a_run_id_goes() {
    let env = Env::new();
    let r = run_up(&env, Some("web"));
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    assert_eq!(r.json["name"], "web", "{}", r.explain());
    assert_eq!(r.json["schema"], 1, "{}", r.explain());
    let id = r.run_id().to_string();
    assert_ne!(id, "web");

    // A second live run of the name is refused, in one sentence, and launches nothing.
    let again = run_up(&env, Some("web"));
    assert_eq!(again.code, 2, "{}", again.explain());
    assert!(
        again.stderr.contains("still running"),
        "{}",
        again.explain()
    );
    assert_eq!(ps_ids(&env, true), vec![id.clone()]);
    let bad = run_up(&env, Some("no/slash"));
    assert_eq!(bad.code, 2, "{}", bad.explain());
    assert!(
        bad.stderr.contains("is not a run name"),
        "{}",
        bad.explain()
    );

    let w = env.fd("watch").arg("web").json().bounded(BOUND).output();
    assert_eq!(w.verdict(), "ready", "{}", w.explain());
    assert_eq!(w.run_id(), id);
    assert_eq!(w.json["name"], "web");
    let logs = env.fd("logs").arg("web").bounded(BOUND).output();
    assert_eq!(
        (logs.code, logs.stdout.as_str()),
        (0, "up\n"),
        "{}",
        logs.explain()
    );
    let p = env.fd("ps").json().bounded(BOUND).output();
    assert_eq!(p.json[0]["name"], "web", "{}", p.explain());
    stop(&env, "web");
    // ps lists live runs; --all every run.
    assert!(ps_ids(&env, false).is_empty());
    assert_eq!(ps_ids(&env, true), vec![id.clone()]);

    // The name is free again once its run ended; it then means the newest run of that name.
    let next = run_up(&env, Some("web"));
    assert_eq!(next.verdict(), "ready", "{}", next.explain());
    stop(&env, "web");
    let show = env.fd("show").arg("web").json().bounded(BOUND).output();
    assert_eq!(show.code, 0, "{}", show.explain());
    assert_eq!(show.json["run_id"], next.run_id(), "{}", show.explain());
    assert_eq!(show.json["name"], "web", "{}", show.explain());
    let cmp = env
        .fd("compare")
        .arg(&id)
        .arg("web")
        .json()
        .bounded(BOUND)
        .output();
    assert_eq!(cmp.json["b"]["run_id"], next.run_id(), "{}", cmp.explain());
}

#[test]
fn an_attach_by_log_gets_a_run_id_that_show_finds() {
    let env = Env::new();
    std::fs::write(env.path("server.log"), "booting\nup\n").unwrap();
    let w = env
        .fd("watch")
        .opt("log", "server.log")
        .flag("from-start")
        .ready_line("up")
        .json()
        .bounded(BOUND)
        .output();
    assert_eq!(w.verdict(), "ready", "{}", w.explain());
    let id = w.run_id().to_string();
    let shape = regex::Regex::new(r"^server-[0-9a-f]{6}$").unwrap();
    assert!(shape.is_match(&id), "run id {id:?}: {}", w.explain());
    let show = env.fd("show").arg(&id).json().bounded(BOUND).output();
    assert_eq!(show.code, 0, "{}", show.explain());
    assert_eq!(show.json["run_id"], id);
    let table = env.fd("history").bounded(BOUND).output();
    assert!(table.stdout.contains("command"), "{}", table.explain());
}

#[test]
fn prune_removes_old_ended_runs_and_never_a_live_one() {
    let env = Env::new();
    let ended = env
        .run()
        .json()
        .until("exit")
        .command(&["true"])
        .bounded(BOUND)
        .output();
    assert_eq!(ended.verdict(), "succeeded", "{}", ended.explain());
    let live = run_up(&env, None);
    assert_eq!(live.verdict(), "ready", "{}", live.explain());
    let runs = env.state.path().join("runs");

    let dry = env
        .fd("prune")
        .opt("older-than", "0s")
        .flag("dry-run")
        .bounded(BOUND)
        .output();
    assert_eq!(dry.code, 0, "{}", dry.explain());
    assert!(dry.stdout.contains(ended.run_id()), "{}", dry.explain());
    assert!(!dry.stdout.contains(live.run_id()), "{}", dry.explain());
    assert!(runs.join(ended.run_id()).exists());

    let recent = env.fd("prune").bounded(BOUND).output();
    assert_eq!(recent.code, 0, "{}", recent.explain());
    assert!(runs.join(ended.run_id()).exists(), "{}", recent.explain());

    let p = env
        .fd("prune")
        .opt("older-than", "0s")
        .bounded(BOUND)
        .output();
    assert_eq!(p.code, 0, "{}", p.explain());
    assert!(
        p.stdout.contains(&format!("removed {}", ended.run_id())),
        "{}",
        p.explain()
    );
    assert!(!runs.join(ended.run_id()).exists(), "{}", p.explain());
    assert!(runs.join(live.run_id()).join("meta.json").exists());
    assert_eq!(ps_ids(&env, true), vec![live.run_id()]);
    stop(&env, live.run_id());
    // The history keeps the pruned run.
    assert_eq!(rows_of(&env, ended.run_id()).len(), 1);
}

/// The README's example ids are ids the binary gives to the README's example commands.
#[test]
fn the_readmes_example_ids_are_ids_the_binary_produces() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let env = Env::new();
    let demo = common::fixture("../../examples/demo-server.sh");
    let cases: [(&str, Vec<&str>); 2] = [
        (
            "firedup stop ",
            vec![
                "run",
                "--json",
                "--profile",
                "sglang",
                "--no-probe",
                "--",
                &demo,
            ],
        ),
        (
            "firedup watch --host gpu-box ",
            vec![
                "run",
                "--json",
                "--until",
                "exit",
                "--",
                "python",
                "-m",
                "sglang.launch_server",
                "--model-path",
                "Qwen/Qwen2.5-7B-Instruct",
            ],
        ),
    ];
    let id_shape = regex::Regex::new(r"^(.+)-[0-9a-f]{6}$").unwrap();
    for (before_id, args) in cases {
        let shown = readme
            .lines()
            .filter_map(|l| l.split_once(before_id).map(|(_, rest)| rest))
            .filter_map(|rest| rest.split_whitespace().next())
            .find(|w| id_shape.is_match(w))
            .unwrap_or_else(|| panic!("no `{before_id}ID` in the README"));
        let r = firedup(&env, &args);
        let id = r.run_id().to_string();
        if r.verdict() == "ready" {
            stop(&env, &id);
        }
        let stem = |s: &str| {
            id_shape
                .captures(s)
                .map(|c| c[1].to_string())
                .unwrap_or_else(|| panic!("{s:?} is not STEM-6HEX"))
        };
        assert_eq!(
            stem(shown),
            stem(&id),
            "README shows {shown}, the binary made {id}: {}",
            r.explain()
        );
    }
}

// ---- case 16: secrets by name and by value ----

/// Secrets by name and by value shape never reach meta.json, `ps`, the JSON verdict, the history
/// or `show`, while the command runs with the real values.
#[test]
fn secrets_by_name_and_by_value_are_never_stored_or_shown() {
    let env = Env::new();
    // Each secret carries a marker the test greps for.
    let secrets = [
        "DATABASE_URL=postgres://u:Mark1pw@h/db",
        "GH_PAT=Mark2pat",
        "PGPASS=Mark3pass",
    ];
    let script = env.script(
        "server.sh",
        "echo \"connecting to $DATABASE_URL\"; \
         [ \"$GH_PAT\" = Mark2pat ] && [ \"$PGPASS\" = Mark3pass ] && [ \"$2\" = sk-Mark4abcdefghijkl ] \
           && [ \"$3\" = https://user:Mark5@example.com ] && [ \"$5\" = ghp_Mark6abcdefghijklmnop ] \
           && echo READY; exec sleep 300",
    );
    let mut args = vec!["run", "--json", "--ready-line", "READY"];
    for s in &secrets {
        args.extend(["--env", s]);
    }
    args.extend([
        "--",
        &script,
        "--api-key",
        "sk-Mark4abcdefghijkl",
        "https://user:Mark5@example.com",
        "--token",
        "ghp_Mark6abcdefghijklmnop",
    ]);
    let r = firedup(&env, &args);
    // The command got the real values (it checks them before saying READY).
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    let id = r.run_id().to_string();
    let meta =
        std::fs::read_to_string(env.state.path().join("runs").join(&id).join("meta.json")).unwrap();
    let ps = env.fd("ps").json().bounded(BOUND).output();
    let ps_all = env.fd("ps").flag("all").bounded(BOUND).output();
    let w = env.fd("watch").arg(&id).json().bounded(BOUND).output();
    assert_eq!(w.verdict(), "ready", "{}", w.explain());
    stop(&env, &id);
    let hist = env.fd("history").json().bounded(BOUND).output();
    let table = env.fd("history").bounded(BOUND).output();
    let show = env.fd("show").arg(&id).bounded(BOUND).output();
    assert!(meta.contains("<redacted>"), "{meta}");
    for (what, text) in [
        ("meta.json", meta.as_str()),
        ("run --json", &r.stdout),
        ("run's stderr", &r.stderr),
        ("ps --json", &ps.stdout),
        ("ps --all", &ps_all.stdout),
        ("watch --json", &w.stdout),
        ("history --json", &hist.stdout),
        ("history", &table.stdout),
        ("show", &show.stdout),
    ] {
        for n in 1..=6 {
            let mark = format!("Mark{n}");
            assert!(!text.contains(&mark), "{what} shows secret {mark}:\n{text}");
        }
    }
    // What is not secret is still shown.
    assert!(
        show.stdout.contains("postgres://u:<redacted>@h/db"),
        "{}",
        show.stdout
    );
    assert!(show.stdout.contains("--api-key"), "{}", show.stdout);
}

/// Over SSH a name goes where a run id goes too, and the remote run record keeps no secret.
#[test]
fn a_name_goes_where_a_run_id_goes_over_ssh() {
    let sshd = common::sshd::Sshd::start();
    let env = Env::new();
    let remote_state = env.path("remote-state");
    let config = sshd.config_path();
    let vars = [
        ("FIREDUP_SSH_CONFIG", config.to_str().unwrap()),
        ("FIREDUP_REMOTE_STATE_DIR", remote_state.to_str().unwrap()),
    ];
    let r = firedup_with(
        &env,
        &[
            "run",
            "--json",
            "--host",
            "fdtest",
            "--name",
            "far",
            "--ready-line",
            "up",
            "--",
            "sh",
            "-c",
            "echo up; exec sleep 300",
            "x",
            "--api-key",
            "sk-Mark7abcdefghijkl",
        ],
        &vars,
    );
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    assert_eq!(r.json["name"], "far", "{}", r.explain());
    let id = r.run_id().to_string();
    let w = firedup_with(&env, &["watch", "--host", "fdtest", "far", "--json"], &vars);
    assert_eq!(w.verdict(), "ready", "{}", w.explain());
    assert_eq!(
        (w.run_id(), &w.json["name"]),
        (id.as_str(), &serde_json::json!("far"))
    );
    let meta = std::fs::read_to_string(remote_state.join("runs").join(&id).join("meta.json"))
        .unwrap_or_default();
    let s = firedup_with(&env, &["stop", "--host", "fdtest", "far"], &vars);
    assert_eq!(s.code, 0, "{}", s.explain());
    assert!(meta.contains("\"far\""), "{meta}");
    assert!(!meta.contains("Mark7"), "{meta}");
}

/// The run record keeps `--api-key` redacted, yet a later `watch RUN_ID` with `--ready-request`
/// still sends the server's own key (read from the live server's arguments).
#[test]
fn a_later_watch_sends_the_servers_own_api_key() {
    let env = Env::new();
    let vllm = env.fake_vllm();
    let port = common::free_port().to_string();
    let r = env
        .run()
        .json()
        .timeout("30s")
        .flag("ready-request")
        .command(&[
            &vllm,
            "serve",
            "m",
            "--port",
            &port,
            "--api-key",
            "sk-Mark8abcdefghijkl",
        ])
        .bounded(BOUND)
        .output();
    assert_eq!(r.verdict(), "ready", "{}", r.explain());
    let id = r.run_id().to_string();
    let w = env
        .fd("watch")
        .arg(&id)
        .json()
        .timeout("30s")
        .bounded(BOUND)
        .output();
    stop(&env, &id);
    assert_eq!(w.verdict(), "ready", "{}", w.explain());
    assert!(
        !w.stdout.contains("Mark8") && !w.stderr.contains("Mark8"),
        "{}",
        w.explain()
    );
}

#[test]
fn the_event_stream_stores_no_secret_a_log_line_printed() {
    let env = Env::new();
    let events = env.path("events.ndjson");
    let events_arg = events.display().to_string();
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let script = format!("echo 'using token {token}'; echo done");
    let r = env
        .run()
        .until("exit")
        .json()
        .opt("events", &events_arg)
        .shell(&script)
        .bounded(BOUND)
        .output();
    assert_eq!(r.json["verdict"], "succeeded", "{}", r.explain());
    let stream = std::fs::read_to_string(&events).unwrap();
    assert!(stream.contains("using token"), "{stream}");
    assert!(!stream.contains(token), "{stream}");
}
