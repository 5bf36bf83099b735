//! The harness of `tests/live_llamacpp.rs`: the real llama-server and tiny GGUF from the
//! environment (`FIREDUP_TEST_LLAMA_SERVER`, `FIREDUP_TEST_TINY_GGUF`; "not run" without them
//! unless `FIREDUP_TEST_REQUIRE_SERVERS` requires their group), one case's directories, port and
//! log, bounded firedup runs, the recording of logs as fixtures (`FIREDUP_TEST_LLAMA_RECORD=DIR`),
//! and the checks that nothing of a run is left (`/proc` by `FIREDUP_RUN_ID`, the port).

use super::bounded::wait_output;
use super::{Env, Run, free_port};

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A hang bound for any one firedup or helper process, not a speed check.
pub const BOUND: Duration = Duration::from_secs(300);

pub struct Llama {
    pub server: String,
    pub gguf: String,
}

pub fn llama() -> Option<Llama> {
    let [server, gguf] = input_files(
        "llamacpp",
        ["FIREDUP_TEST_LLAMA_SERVER", "FIREDUP_TEST_TINY_GGUF"],
        "tests/live_servers/build_llama_server.sh and make_tiny_gguf.py make them",
    )?;
    Some(Llama { server, gguf })
}

/// The files that the environment variables `vars` name; `None` ("not run", said on stderr) when
/// one is not set to a file, a panic instead when the test group `group` is required
/// ([`super::server_groups`]). `made_by` says what makes them.
pub fn input_files<const N: usize>(
    group: &str,
    vars: [&'static str; N],
    made_by: &str,
) -> Option<[String; N]> {
    let file = |var: &str| std::env::var(var).ok().filter(|p| Path::new(p).is_file());
    let missing: Vec<&str> = vars.iter().copied().filter(|v| file(v).is_none()).collect();
    if missing.is_empty() {
        return Some(vars.map(|v| file(v).unwrap()));
    }
    let what = format!("{} not set to a file ({made_by})", missing.join(" and "));
    if super::server_groups::required(group) {
        panic!("FIREDUP_TEST_REQUIRE_SERVERS requires the {group} group but {what}");
    }
    eprintln!("note: {what}: not run");
    None
}

/// One case: its own state and work directories, a free port and the log path.
pub struct Case {
    pub env: Env,
    pub name: &'static str,
    pub port: u16,
    pub log: PathBuf,
}

impl Case {
    pub fn new(name: &'static str) -> Case {
        let env = Env::new();
        let log = env.path("server.log");
        Case {
            env,
            name,
            port: free_port(),
            log,
        }
    }

    /// `llama-server -m MODEL` on this case's port, small and on one thread, then `extra`.
    pub fn server_args(&self, l: &Llama, model: &str, extra: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = [
            &l.server,
            "-m",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            &self.port.to_string(),
            "-c",
            "256",
            "-t",
            "1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }

    /// `firedup run --json --log LOG FLAGS -- SERVER`, to be spawned.
    pub fn command(&self, flags: &[&str], server: &[String]) -> Command {
        let mut cmd = self.env.cmd();
        cmd.args(["run", "--json", "--log"])
            .arg(&self.log)
            .args(flags)
            .arg("--")
            .args(server);
        cmd
    }

    /// [`Case::command`] spawned (stdout and stderr piped).
    pub fn spawn(&self, flags: &[&str], server: &[String]) -> Child {
        piped(self.command(flags, server))
    }

    /// [`Case::command`] spawned inside the memory cgroup whose `cgroup.procs` is `procs`.
    pub fn spawn_in_cgroup(&self, procs: &Path, flags: &[&str], server: &[String]) -> Child {
        piped(super::cgroup::in_cgroup(procs, self.command(flags, server)))
    }

    /// Like `spawn`, waiting (bounded) for the verdict.
    pub fn run(&self, flags: &[&str], server: &[String]) -> Run {
        let r = finish(self.spawn(flags, server));
        self.record(&r);
        r
    }

    pub fn firedup(&self, args: &[&str]) -> Run {
        let mut cmd = self.env.cmd();
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        finish(cmd.spawn().expect("firedup starts"))
    }

    /// With `FIREDUP_TEST_LLAMA_RECORD=DIR`: the log as `DIR/CASE.log`, the exit as `DIR/CASE.exit`.
    pub fn record(&self, r: &Run) {
        let Some(dir) = std::env::var_os("FIREDUP_TEST_LLAMA_RECORD") else {
            return;
        };
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        let work = self.env.work.path().display().to_string();
        let mut text = super::file_text(&self.log).replace(&work, "/work");
        if let Some(models) = std::env::var_os("FIREDUP_TEST_TINY_GGUF")
            .and_then(|g| Some(PathBuf::from(g).parent()?.display().to_string()))
        {
            text = text.replace(&models, "/models");
        }
        std::fs::write(dir.join(format!("{}.log", self.name)), text).unwrap();
        let exit = &r.json["exit"];
        let status = match (exit["code"].as_i64(), exit["signal"].as_i64()) {
            (Some(c), _) => c.to_string(),
            (None, Some(s)) => format!("signal {s}"),
            (None, None) => "running".into(),
        };
        std::fs::write(dir.join(format!("{}.exit", self.name)), status + "\n").unwrap();
        let verdict = serde_json::json!({
            "verdict": r.json["verdict"], "signature": r.json["signature"],
            "line": r.json["line"]["text"], "phase": r.json["phase"], "code": r.code,
        });
        std::fs::write(
            dir.join(format!("{}.verdict", self.name)),
            verdict.to_string(),
        )
        .unwrap();
    }

    /// Waits (bounded) until the log holds `text`.
    /// The `--events` file of this case's run (`run_args_with_events` passes it).
    pub fn events(&self) -> PathBuf {
        self.env.path("events.ndjson")
    }

    /// Waits (bounded) until firedup itself has seen the ready condition hold (its `ready`
    /// event in [`Case::events`]): a server that answered the test may not have answered
    /// firedup's probe yet, and a kill before that is judged before ready.
    pub fn wait_until_firedup_saw_ready(&self) {
        let deadline = Instant::now() + BOUND;
        while !super::file_text(&self.events()).contains(r#""kind":"ready""#) {
            assert!(
                Instant::now() < deadline,
                "{}: firedup never saw it ready:\n{}",
                self.name,
                super::file_text(&self.events())
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_for_log(&self, text: &str) {
        let deadline = Instant::now() + BOUND;
        while !super::file_text(&self.log).contains(text) {
            assert!(
                Instant::now() < deadline,
                "{}: the log never showed {text:?}:\n{}",
                self.name,
                super::file_text(&self.log)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server process of this case, llama-server or `python -m llama_cpp.server` (found by
    /// its port on its command line).
    pub fn server_pid(&self) -> u32 {
        let port = self.port.to_string();
        let deadline = Instant::now() + BOUND;
        loop {
            let found = pids().into_iter().find(|p| {
                let argv = cmdline(*p);
                let server = argv.first().is_some_and(|a| a.ends_with("llama-server"))
                    || argv.get(1..3) == Some(&["-m".to_string(), "llama_cpp.server".to_string()]);
                server && argv.windows(2).any(|w| w[0] == "--port" && w[1] == port)
            });
            if let Some(p) = found {
                return p;
            }
            assert!(
                Instant::now() < deadline,
                "{}: no server process",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// No process of any run of this case is left (a bounded moment for one on its way out;
    /// survivors are killed, then the case fails), and the port is free.
    pub fn assert_nothing_left(&self) {
        let ids = self.run_ids();
        let left = || -> Vec<(u32, Vec<String>)> {
            pids()
                .into_iter()
                .filter(|p| ids.iter().any(|id| carries(*p, id)))
                .map(|p| (p, cmdline(p)))
                .collect()
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut survivors = left();
        while !survivors.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            survivors = left();
        }
        for (pid, _) in &survivors {
            // SAFETY: kill(2) on a process carrying this case's FIREDUP_RUN_ID.
            unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
        }
        assert!(
            survivors.is_empty(),
            "{}: processes of the run left: {survivors:?}",
            self.name
        );
        assert!(
            refuses(self.port),
            "{}: port {} still accepts",
            self.name,
            self.port
        );
    }
}

impl Case {
    /// Someone else's HTTP server (`python3 -m http.server`) on this case's port, listening.
    pub fn occupy_port_with_http_server(&self) -> Child {
        let other = Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1"])
            .arg(self.port.to_string())
            .current_dir(self.env.work.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + BOUND;
        while refuses(self.port) {
            assert!(Instant::now() < deadline, "http.server never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        other
    }

    /// `argv` started with nohup and setsid, outside firedup, writing this case's log; killed
    /// when the guard drops.
    pub fn start_with_nohup(&self, argv: &[String]) -> KillOnDrop {
        let quoted: Vec<String> = argv.iter().map(|a| format!("'{a}'")).collect();
        let started = Command::new("sh")
            .args([
                "-c",
                &format!(
                    "nohup setsid {} > '{}' 2>&1 < /dev/null & echo $!",
                    quoted.join(" "),
                    self.log.display()
                ),
            ])
            .output()
            .unwrap();
        KillOnDrop(
            String::from_utf8_lossy(&started.stdout)
                .trim()
                .parse()
                .unwrap(),
        )
    }

    /// `firedup stop --json RUN`: a clean stop with the port free, and nothing of the case left.
    pub fn stop_cleanly(&self, r: &Run) {
        let s = self.firedup(&["stop", "--json", r.run_id()]);
        assert_eq!(s.code, 0, "{}", s.explain());
        assert_eq!(s.json["clean"], true, "{}", s.explain());
        assert_eq!(s.json["port_free"], true, "{}", s.explain());
        self.assert_nothing_left();
    }

    /// Sends `sig` to the server `pid` of the run `child`, waits (bounded) for the verdict,
    /// records it, and asserts `killed`/`want` with that signal as the server's end.
    pub fn kill_server(&self, child: Child, pid: u32, sig: i32, want: &str) -> Run {
        signal(pid, sig);
        let r = finish(child);
        self.record(&r);
        assert_eq!(
            (r.code, r.verdict(), r.signature()),
            (4, "killed", Some(want)),
            "{}",
            r.explain()
        );
        assert_eq!(r.json["exit"]["signal"], sig, "{}", r.explain());
        r
    }

    /// `server` run inside a memory cgroup limited to `limit` bytes (firedup joins it first):
    /// asserts `killed`/`oom_killed` by SIGKILL and nothing left. "Not run" where no memory
    /// cgroup can be written.
    pub fn assert_oom_killed_in_cgroup(&self, limit: u64, server: &[String]) {
        let name = format!("firedup-{}-{}", self.name, std::process::id());
        let Some(procs) = super::cgroup::limited_cgroup(&name, limit) else {
            eprintln!("note: no writable memory cgroup on this machine: not run");
            return;
        };
        let r = finish(self.spawn_in_cgroup(&procs, &["--timeout", "120s"], server));
        let _ = std::fs::remove_dir(procs.parent().unwrap());
        self.record(&r);
        assert_eq!(
            (r.code, r.verdict(), r.signature()),
            (4, "killed", Some("oom_killed")),
            "{}",
            r.explain()
        );
        assert_eq!(r.json["exit"]["signal"], 9, "{}", r.explain());
        self.assert_nothing_left();
    }

    /// SIGSTOPs the server `pid` of the run `child` (started with a short `--stall`): asserts
    /// `stalled` and nothing left (the teardown sends SIGCONT with its SIGTERM).
    pub fn stop_server_and_assert_stalled(&self, child: Child, pid: u32) -> Run {
        signal(pid, libc::SIGSTOP);
        let r = finish(child);
        self.record(&r);
        assert_eq!(
            (r.code, r.verdict(), r.signature()),
            (6, "stalled", None),
            "{}",
            r.explain()
        );
        self.assert_nothing_left();
        r
    }

    /// Ctrl-C (SIGINT) to the `firedup run` `child`: asserts exit 130, one line saying it was
    /// interrupted, nothing left, and `interrupted` in the history.
    pub fn interrupt_and_assert_torn_down(&self, child: Child) {
        // SAFETY: kill(2) on our own child, not yet reaped (finish() reaps it).
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let r = finish(child);
        self.record(&r);
        assert_eq!(r.code, 130, "{}", r.explain());
        assert!(
            r.stderr.to_lowercase().contains("interrupt"),
            "{}",
            r.explain()
        );
        self.assert_nothing_left();
        let h = self.firedup(&["history", "--json"]);
        assert!(h.stdout.contains("interrupted"), "{}", h.explain());
    }

    /// `firedup watch --json --from-start --log LOG` (bounded), recorded.
    pub fn watch_log(&self) -> Run {
        let r = self.firedup(&[
            "watch",
            "--json",
            "--from-start",
            "--timeout",
            "120s",
            "--log",
            self.log.to_str().unwrap(),
        ]);
        self.record(&r);
        r
    }
}

/// A process this test started, SIGKILLed when this drops.
pub struct KillOnDrop(pub u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the server this test started.
        unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
    }
}

/// One real completion token from the server on `port` (`POST /v1/completions`), bounded: it
/// serves.
pub fn complete_one_token(port: u16) {
    let mut post = Command::new("python3");
    post.args([
        "-c",
        "import json, sys, urllib.request as u
r = u.urlopen(u.Request(f'http://127.0.0.1:{sys.argv[1]}/v1/completions',
    data=json.dumps({'prompt': 'Hello', 'max_tokens': 1}).encode(),
    headers={'Content-Type': 'application/json'}), timeout=120)
print(r.status)",
        &port.to_string(),
    ]);
    let out = super::bounded::run_bounded(post, BOUND);
    assert_eq!(out.stdout.trim(), "200", "{}", out.stderr);
}

impl Case {
    /// Every run this case made (its state directory's runs).
    fn run_ids(&self) -> Vec<String> {
        std::fs::read_dir(self.env.state.path().join("runs"))
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A case that failed half-way leaves nothing running either: whatever still carries one of
/// its runs' `FIREDUP_RUN_ID` is killed.
impl Drop for Case {
    fn drop(&mut self) {
        let ids = self.run_ids();
        for pid in pids() {
            if ids.iter().any(|id| carries(pid, id)) {
                // SAFETY: kill(2) on a process carrying this case's FIREDUP_RUN_ID.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
    }
}

pub fn finish(child: Child) -> Run {
    let out = wait_output(child, BOUND);
    Run {
        code: out.code,
        json: serde_json::from_str(out.stdout.trim()).unwrap_or(serde_json::Value::Null),
        stdout: out.stdout,
        stderr: out.stderr,
        took: out.took,
    }
}

pub fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

pub fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| {
            c.split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

pub fn carries(pid: u32, run_id: &str) -> bool {
    let marker = format!("FIREDUP_RUN_ID={run_id}");
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|b| *b == 0).any(|kv| kv == marker.as_bytes()))
        .unwrap_or(false)
}

pub fn refuses(port: u16) -> bool {
    match TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Duration::from_secs(2),
    ) {
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionRefused,
        Ok(_) => false,
    }
}

pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a llama-server this case started (found by its port).
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0, "kill {pid}");
}

pub fn line(r: &Run) -> &str {
    r.json["line"]["text"].as_str().unwrap_or("")
}

/// Verdict, signature and (a substring of) the decisive line, with firedup's exit code.
pub fn assert_verdict(r: &Run, code: i32, verdict: &str, signature: Option<&str>, decisive: &str) {
    assert_eq!(
        (r.code, r.verdict(), r.signature()),
        (code, verdict, signature),
        "{}",
        r.explain()
    );
    assert!(
        line(r).contains(decisive),
        "decisive line {:?}, want one with {decisive:?}\n{}",
        line(r),
        r.explain()
    );
}

/// `cmd` spawned, its stdin empty, its stdout and stderr piped.
fn piped(mut cmd: Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().expect("firedup starts")
}

/// `args` with the context size in tokens (llama-server's `-c`, llama-cpp-python's `--n_ctx`)
/// set to `tokens`.
pub fn with_context(mut args: Vec<String>, tokens: u64) -> Vec<String> {
    let at = args
        .iter()
        .position(|a| a == "-c" || a == "--n_ctx")
        .unwrap();
    args[at + 1] = tokens.to_string();
    args
}

/// Whether this host could map and touch `gib` GiB (memory and swap near it, or overcommit
/// always on): a case that needs the allocation to fail is not run there.
pub fn host_could_map(gib: u64) -> bool {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kib = |key: &str| -> u64 {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(key)?.split_whitespace().next()?.parse().ok())
            .unwrap_or(u64::MAX / 4)
    };
    let overcommit = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
    kib("MemTotal:").saturating_add(kib("SwapTotal:")) > (gib * 3 / 4) << 20
        || overcommit.trim() == "1"
}

/// A FIFO in the work dir: a model file whose reader waits until someone writes it.
pub fn fifo(case: &Case) -> String {
    let p = case.env.path("model.gguf");
    let made = Command::new("mkfifo").arg(&p).status().unwrap();
    assert!(made.success(), "mkfifo");
    p.display().to_string()
}

/// The probe of kind `kind` in the verdict.
pub fn probe<'a>(r: &'a Run, kind: &str) -> &'a serde_json::Value {
    r.json["probes"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["kind"] == kind))
        .unwrap_or_else(|| panic!("no {kind} probe\n{}", r.explain()))
}
