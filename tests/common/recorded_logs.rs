//! Logs recorded from a real server (`tests/fixtures/servers/DIR/CASE.log` with its ending in
//! `CASE.exit`, by a live test's `FIREDUP_TEST_LLAMA_RECORD`) replayed through the real binary
//! without the server: `tests/fixtures/replay.sh` prints each and ends as the server did, and
//! `firedup run --profile PROFILE --no-probe` must name the verdict, signature, decisive line,
//! phase and (for ready runs) timeline that the live run named. Used by `tests/replay_llamacpp.rs`
//! and `tests/replay_llama_cpp_python.rs`.

use super::{Env, alive, fixture};

pub struct Case {
    /// `tests/fixtures/servers/DIR/NAME.log` and `NAME.exit`.
    pub name: &'static str,
    pub extra: &'static [&'static str],
    pub verdict: &'static str,
    pub signature: Option<&'static str>,
    /// A substring of the decisive line.
    pub line: &'static str,
    pub phase: Option<&'static str>,
    /// For ready runs: the phases of the timeline, in order.
    pub timeline: &'static [&'static str],
}

/// The recordings of one server: `tests/fixtures/servers/DIR/`, replayed under `profile`.
pub struct Recordings {
    pub dir: &'static str,
    pub profile: &'static str,
    pub cases: &'static [Case],
}

impl Recordings {
    /// Every case replayed, a few side by side (not all at once: on a small loaded machine no
    /// hold is starved); panics with every case that went wrong.
    pub fn replay_all(&self) {
        let env = Env::new();
        let env = &env;
        let next = std::sync::atomic::AtomicUsize::new(0);
        let failures = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    while let Some(c) = self
                        .cases
                        .get(next.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
                    {
                        if let Err(e) = self.check(env, c) {
                            failures.lock().unwrap().push(format!("{}: {e}", c.name));
                        }
                    }
                });
            }
        });
        let failures = failures.into_inner().unwrap();
        assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
    }

    /// Every `.log` in the directory is one of the cases (`test_file` names where they are).
    pub fn every_log_has_a_case(&self, test_file: &str) {
        let dir = fixture(&format!("servers/{}", self.dir));
        for entry in std::fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".log") {
                assert!(
                    self.cases.iter().any(|c| c.name == stem),
                    "{dir}/{name} has no case in {test_file}"
                );
            }
        }
    }

    /// `CASE.exit` as `replay.sh`'s ending: an exit code, 128+N for signal N, `hang` for alive.
    fn ending(&self, name: &str) -> String {
        let exit = std::fs::read_to_string(fixture(&format!("servers/{}/{name}.exit", self.dir)))
            .unwrap_or_else(|e| panic!("{name}.exit: {e}"));
        let exit = exit.trim();
        match exit.strip_prefix("signal ") {
            Some(n) => (128 + n.parse::<i32>().unwrap()).to_string(),
            None if exit == "running" => "hang".into(),
            None => exit.to_string(),
        }
    }

    fn check(&self, env: &Env, c: &Case) -> Result<(), String> {
        let log = fixture(&format!("servers/{}/{}.log", self.dir, c.name));
        let then = self.ending(c.name);
        let replay = fixture("replay.sh");
        let mut args = vec![
            "run",
            "--json",
            "--profile",
            self.profile,
            "--no-probe",
            "--grace",
            "1s",
            "--timeout",
            "120s",
        ];
        args.extend_from_slice(c.extra);
        args.extend_from_slice(&["--", "sh", &replay, &log, &then]);
        let r = env.firedup(&args);
        if let Some(pid) = r.json["pid"].as_u64() {
            if r.verdict() == "ready" {
                let s = env.firedup(&["stop", r.run_id()]);
                if s.code != 0 {
                    return Err(format!("stop failed: {}", s.explain()));
                }
            }
            if alive(pid) {
                return Err(format!("process {pid} left running: {}", r.explain()));
            }
        }
        let line = r.json["line"]["text"].as_str().unwrap_or("");
        let timeline: Vec<&str> = r.json["timeline"]
            .as_array()
            .map(|a| a.iter().filter_map(|p| p["phase"].as_str()).collect())
            .unwrap_or_default();
        let mut wrong = Vec::new();
        if (r.verdict(), r.signature()) != (c.verdict, c.signature) {
            wrong.push(format!(
                "{} / {:?} (want {} / {:?})",
                r.verdict(),
                r.signature(),
                c.verdict,
                c.signature
            ));
        }
        if !line.contains(c.line) {
            wrong.push(format!("decisive line {line:?} (want {:?} in it)", c.line));
        }
        if r.json["phase"].as_str() != c.phase {
            wrong.push(format!("phase {} (want {:?})", r.json["phase"], c.phase));
        }
        if !c.timeline.is_empty() && timeline != c.timeline {
            wrong.push(format!("timeline {timeline:?} (want {:?})", c.timeline));
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(format!("{}\n  {}", wrong.join("\n  "), r.explain()))
        }
    }
}
