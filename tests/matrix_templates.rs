//! Issue 29: a matrix's `[base]` `http` and `port` are templated like its command (`{port}` from
//! a `[[slot]]`), a `{name}` that is unknown or cannot be used is refused before anything
//! launches, and `--dry-run` shows each cell in its own slot, with its last run from any slot.

use crate::common;
use common::{Env, free_port};

/// Two slots, each with its own port; a real HTTP server per cell, ready by `http`.
fn slotted(env: &Env, extra_base: &str) -> (std::path::PathBuf, u16, u16) {
    let (p0, p1) = (free_port(), free_port());
    let file = env.path("slotted.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[base]
command = ["python3", "-m", "http.server", "{{port}}", "--bind", "127.0.0.1"]
http = "http://127.0.0.1:{{port}}/"
port = "{{port}}"
timeout = "60s"
grace = "2s"
{extra_base}

[[axis]]
env = "MODE"
values = ["a", "b"]

[[slot]]
vars = {{ port = "{p0}" }}
[[slot]]
vars = {{ port = "{p1}" }}
"#
        ),
    )
    .unwrap();
    (file, p0, p1)
}

#[test]
fn http_and_port_take_the_slots_port_and_dry_run_shows_it() {
    let env = Env::new();
    let (file, p0, p1) = slotted(&env, "");
    let file = file.to_str().unwrap();
    let dry = env.fd("matrix").arg(file).flag("dry-run").output();
    assert_eq!(dry.code, 0, "{}", dry.explain());
    // Cell 1 in slot 0, cell 2 in slot 1, each with its own port (before: slot 0's for both).
    let cell2 = dry.stdout.split("[2]").nth(1).unwrap_or_default();
    assert!(cell2.contains("(slot 1)"), "{}", dry.explain());
    assert!(
        cell2.contains(&format!("http.server {p1} ")),
        "{}",
        dry.explain()
    );
    assert!(
        cell2.contains(&format!("http     http://127.0.0.1:{p1}/")),
        "{}",
        dry.explain()
    );
    assert!(
        dry.stdout.contains(&format!("http.server {p0} ")),
        "{}",
        dry.explain()
    );

    let r = env.fd("matrix").arg(file).opt("format", "json").output();
    assert_eq!(r.code, 0, "{}", r.explain());
    for c in r.json["cells"].as_array().unwrap() {
        assert_eq!(c["runs"][0]["verdict"], "ready", "{}", r.explain());
    }

    // After the full run every cell has a last run, whichever slot it ran in.
    let again = env.fd("matrix").arg(file).flag("dry-run").output();
    assert_eq!(again.code, 0, "{}", again.explain());
    assert_eq!(
        again.stdout.matches("    last     ready").count(),
        2,
        "{}",
        again.explain()
    );
    assert!(
        !again.stdout.contains("never run before"),
        "{}",
        again.explain()
    );
}

#[test]
fn an_unknown_or_unusable_name_is_refused_before_anything_launches() {
    let env = Env::new();
    let table: &[(&str, &str, &str)] = &[
        (
            "http = \"http://127.0.0.1:{nope}/\"\nport = 1",
            "base.http: unknown variable {nope}",
            "",
        ),
        (
            "",
            "base.port: unknown variable {nope}",
            "port = \"{nope}\"",
        ),
        (
            "",
            "base.port: \"{MODE}\" gives \"a\", which is not a port number",
            "port = \"{MODE}\"",
        ),
        (
            "stall = \"{slot}s\"",
            "base.stall: {slot} is not replaced there",
            "",
        ),
    ];
    for (extra, want, port_line) in table {
        let (file, _, _) = slotted(&env, extra);
        let mut text = std::fs::read_to_string(&file).unwrap();
        if extra.contains("http =") {
            text = text.replacen("http = \"http://127.0.0.1:{port}/\"\n", "", 1);
            text = text.replacen("port = \"{port}\"\n", "", 1);
        }
        if !port_line.is_empty() {
            text = text.replacen("port = \"{port}\"", port_line, 1);
        }
        std::fs::write(&file, text).unwrap();
        let r = env.fd("matrix").arg(file.to_str().unwrap()).output();
        assert_eq!(r.code, 2, "{want}: {}", r.explain());
        assert!(r.stderr.contains(want), "{want}: {}", r.explain());
        assert!(
            !env.state.path().join("runs").exists(),
            "{want}: something was launched"
        );
    }
}
