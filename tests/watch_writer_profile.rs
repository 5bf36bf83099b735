//! `firedup watch --log` without `--profile` or `--pid`: the process found writing the log gives
//! the profile and the address, from its own command line, as a launch would. A llama-server
//! started with nohup (`tests/live_llamacpp.rs` has the real one) was a usage error ("no
//! readiness condition") because the writer's command line was not read.
//!
//! The writer here is a script named `llama-server` that prints a real llama-server's log
//! (`tests/fixtures/servers/llamacpp-real/ready.log`) and stays alive (its `sleep` not holding the
//! log, so the script is the writer found); `--no-probe`, so its
//! ready line decides and nothing needs to answer on the port.

use crate::common;
use common::{Env, fixture};

use std::time::{Duration, Instant};

#[test]
fn the_writer_of_the_log_gives_the_profile_and_the_port() {
    let env = Env::new();
    let log = env.path("server.log");
    let server = env.script(
        "llama-server",
        &format!(
            "exec >> '{}' 2>&1; cat '{}'; sleep 60 > /dev/null 2>&1",
            log.display(),
            fixture("servers/llamacpp-real/ready.log")
        ),
    );
    let mut writer = std::process::Command::new(&server)
        .args(["-m", "tiny.gguf", "--host", "127.0.0.1", "--port", "18431"])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !common::file_text(&log).contains("listening on") {
        assert!(Instant::now() < deadline, "the script never wrote its log");
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = env
        .fd("watch")
        .json()
        .flag("from-start")
        .flag("no-probe")
        .timeout("60s")
        .opt("log", log.to_str().unwrap())
        .output();
    let _ = writer.kill();
    let _ = writer.wait();
    assert_eq!((r.code, r.verdict()), (0, "ready"), "{}", r.explain());
    assert_eq!(r.json["pid"], writer.id(), "{}", r.explain());
    assert_eq!(r.json["port"], 18431, "{}", r.explain());
    let line = r.json["line"]["text"].as_str().unwrap_or("");
    assert!(
        line.contains("llama_server: listening on"),
        "{}",
        r.explain()
    );
}
