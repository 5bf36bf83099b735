//! `firedup matrix` over real servers with their real bench tools: Redis with `redis-benchmark`
//! and PostgreSQL with `pgbench`, each including cells that fail (a taken port, a bad option), the
//! metrics in the table and the history.

use crate::common;

use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use common::Env;
use common::bounded::run_bounded;

const BOUND: Duration = Duration::from_secs(240);

fn matrix_json(env: &Env, file: &std::path::Path) -> (i32, serde_json::Value, String) {
    let mut c = env.cmd();
    c.args(["matrix", file.to_str().unwrap(), "--format", "json"]);
    let out = run_bounded(c, BOUND);
    let json = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
    (
        out.code,
        json,
        format!(
            "exit {}\nstdout: {}\nstderr: {}",
            out.code, out.stdout, out.stderr
        ),
    )
}

fn cell<'a>(json: &'a serde_json::Value, label: &str) -> &'a serde_json::Value {
    json["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["label"] == label)
        .unwrap_or_else(|| panic!("no cell {label}: {json}"))
}

#[test]
fn a_redis_matrix_benches_ready_cells_and_names_the_failures() {
    assert!(
        Command::new("redis-benchmark")
            .arg("--version")
            .output()
            .is_ok(),
        "redis-benchmark is not installed"
    );
    let env = Env::new();
    let free = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Someone else holds this one for the whole matrix.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port();
    let file = env.path("redis.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[base]
# With STUBBORN_HELPER=1 the server has a helper that ignores SIGTERM: teardown must SIGKILL it.
command = ["sh", "-c", "if [ \"$STUBBORN_HELPER\" = 1 ]; then (trap '' TERM; exec sleep 300) & fi; exec redis-server \"$@\"", "sh",
           "--port", "{{port}}", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
profile = "redis"
timeout = "30s"
grace = "2s"

[[axis]]
var = "port"
values = ["{free}", "{taken_port}"]

[[axis]]
arg = "--maxmemory-policy"
values = ["allkeys-lru", "no-such-policy"]

[[axis]]
env = "STUBBORN_HELPER"
values = ["0"]

[[exclude]]
port = "{taken_port}"
maxmemory-policy = "no-such-policy"

[[include]]
port = "{free}"
maxmemory-policy = "allkeys-lru"
STUBBORN_HELPER = "1"

[bench]
command = "redis-benchmark -h 127.0.0.1 -p {{port}} -q -n 2000 -t set,get"
timeout = "60s"
metrics = {{ set_rps = 'SET: ([0-9.]+) requests per second', get_rps = 'GET: ([0-9.]+) requests per second' }}
"#
        ),
    )
    .unwrap();
    let (code, json, explain) = matrix_json(&env, &file);
    assert_eq!(code, 1, "{explain}");
    let ok = cell(
        &json,
        &format!("port={free} maxmemory-policy=allkeys-lru STUBBORN_HELPER=0"),
    );
    let run = &ok["runs"][0];
    assert_eq!(run["verdict"], "ready", "{explain}");
    assert!(
        run["metrics"]["set_rps"].as_f64().unwrap() > 0.0,
        "{explain}"
    );
    assert!(
        run["metrics"]["get_rps"].as_f64().unwrap() > 0.0,
        "{explain}"
    );
    assert_eq!(run["clean"], true, "{explain}");
    let bad = cell(
        &json,
        &format!("port={free} maxmemory-policy=no-such-policy STUBBORN_HELPER=0"),
    );
    assert_eq!(bad["runs"][0]["verdict"], "failed", "{explain}");
    assert_eq!(bad["runs"][0]["signature"], "config_error", "{explain}");
    let busy = cell(
        &json,
        &format!("port={taken_port} maxmemory-policy=allkeys-lru STUBBORN_HELPER=0"),
    );
    assert_eq!(busy["runs"][0]["signature"], "port_in_use", "{explain}");
    // The other process still holding the port is not the cell's doing: teardown is clean.
    assert_eq!(busy["runs"][0]["clean"], true, "{explain}");
    let groups: Vec<&str> = json["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["sentence"].as_str().unwrap())
        .collect();
    assert!(
        groups.contains(
            &format!(
                "1 cell failed with port_in_use during starting: port={taken_port} maxmemory-policy=allkeys-lru STUBBORN_HELPER=0"
            )
            .as_str()
        ),
        "{groups:?}"
    );
    // The cell whose helper ignores SIGTERM: ready, benched, and its teardown needed SIGKILL
    // but ended clean (nothing left, port free).
    let stubborn = cell(
        &json,
        &format!("port={free} maxmemory-policy=allkeys-lru STUBBORN_HELPER=1"),
    );
    let run = &stubborn["runs"][0];
    assert_eq!(run["verdict"], "ready", "{explain}");
    assert!(
        run["metrics"]["set_rps"].as_f64().unwrap() > 0.0,
        "{explain}"
    );
    assert_eq!(run["clean"], true, "{explain}");
    assert!(
        run["teardown"]
            .as_str()
            .unwrap()
            .contains("SIGKILL after the 2.0s grace"),
        "{explain}"
    );
    // The metrics landed in the history.
    let h = env
        .fd("history")
        .opt("matrix", json["matrix_id"].as_str().unwrap())
        .json()
        .output();
    assert!(h.stdout.contains("\"set_rps\""), "{}", h.explain());
    drop(taken);
}

#[test]
fn a_postgres_matrix_benches_with_pgbench() {
    let Some(pg) = common::pg::find_pg() else {
        return;
    };
    let pgbench = pg.postgres.with_file_name("pgbench");
    assert!(
        pgbench.is_file(),
        "pgbench is not installed next to {}",
        pg.postgres.display()
    );
    let dir = common::pg::pg_cluster(&pg);
    let d = dir.path().to_str().unwrap();
    let env = Env::new();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let file = env.path("pg.toml");
    let as_pg: Vec<String> = common::pg::AS_POSTGRES
        .iter()
        .map(|s| format!("{s:?}"))
        .collect();
    std::fs::write(
        &file,
        format!(
            r#"
[base]
command = [{as_pg}, "{postgres}", "-D", "{d}/data", "-p", "{port}", "-k", "{d}", "-c", "listen_addresses=127.0.0.1"]
profile = "postgres"
timeout = "60s"
stall = "45s"
grace = "5s"

[[axis]]
name = "setting"
arg = "-c"
values = ["shared_buffers=16MB", "work_mem=no-such-size"]

[bench]
command = "{pgbench} -i -q -s 1 -h {d} -p {port} -U postgres postgres && {pgbench} -c 2 -j 1 -T 2 -h {d} -p {port} -U postgres postgres"
timeout = "90s"
metrics = {{ tps = 'tps = ([0-9.]+)' }}
"#,
            as_pg = as_pg.join(", "),
            postgres = pg.postgres.display(),
            pgbench = pgbench.display(),
        ),
    )
    .unwrap();
    let (code, json, explain) = matrix_json(&env, &file);
    assert_eq!(code, 1, "{explain}");
    let ok = cell(&json, "setting=shared_buffers=16MB");
    assert_eq!(ok["runs"][0]["verdict"], "ready", "{explain}");
    assert!(
        ok["runs"][0]["metrics"]["tps"].as_f64().unwrap() > 0.0,
        "{explain}"
    );
    assert_eq!(ok["runs"][0]["clean"], true, "{explain}");
    let bad = cell(&json, "setting=work_mem=no-such-size");
    assert_eq!(bad["runs"][0]["verdict"], "failed", "{explain}");
    assert_eq!(bad["runs"][0]["signature"], "config_error", "{explain}");
}
