//! Nodes of a multi-node run on this machine: one real sshd per node (tests/common/sshd.rs),
//! reached through one ssh config in which `node0`, `node1`, ... are their aliases, and one
//! remote state directory (every node is this machine, as this user).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use super::sshd::Sshd;
use super::{Env, Run};

/// The nodes, alive as long as this value.
pub struct Nodes {
    pub sshd: Vec<Sshd>,
    pub config: PathBuf,
    pub remote_state: PathBuf,
}

impl Nodes {
    /// `n` sshd, aliased `node0` ... in one config under `env`.
    pub fn start(env: &Env, n: usize) -> Nodes {
        let sshd: Vec<Sshd> = (0..n).map(|_| Sshd::start()).collect();
        let config = env.path("nodes_ssh_config");
        let text: String = sshd
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let one = std::fs::read_to_string(s.config_path()).unwrap();
                one.replacen(
                    &format!("Host {}", s.host_alias()),
                    &format!("Host node{i}"),
                    1,
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(&config, text).unwrap();
        Nodes {
            sshd,
            config,
            remote_state: env.path("remote-state"),
        }
    }

    /// `--host node0 --host node1 ...`.
    pub fn host_args(&self) -> Vec<String> {
        (0..self.sshd.len())
            .flat_map(|i| ["--host".to_string(), format!("node{i}")])
            .collect()
    }

    fn vars(&self) -> [(&'static str, String); 2] {
        [
            ("FIREDUP_SSH_CONFIG", self.config.display().to_string()),
            (
                "FIREDUP_REMOTE_STATE_DIR",
                self.remote_state.display().to_string(),
            ),
        ]
    }

    /// firedup with these nodes' settings, to its end.
    pub fn fd(&self, env: &Env, args: &[String]) -> Run {
        let vars = self.vars();
        let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = env.cmd_json(&args, &refs);
        // What each case's verdict named, for a person reading `--nocapture` output.
        if r.json["nodes"].is_array() {
            eprintln!(
                "group verdict: {} {} node {} rank {} line {} | {}",
                r.json["verdict"],
                r.json["signature"],
                r.json["node"],
                r.json["rank"],
                r.json["line"]["text"],
                r.json["reason"]
            );
        }
        r
    }

    /// firedup with these nodes' settings, started (stdout and stderr piped).
    pub fn spawn(&self, env: &Env, args: &[String]) -> Child {
        let mut c: Command = env.cmd();
        for (k, v) in self.vars() {
            c.env(k, v);
        }
        c.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("firedup starts")
    }
}

/// A command line's words as owned strings (the node tests add host lists to them).
pub fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// A two-node server: node 0 passes a phase, says it is ready and serves; node 1 only lives (as
/// sglang's other nodes, which serve a dummy health endpoint).
pub fn server_script(env: &Env) -> String {
    env.script(
        "server.sh",
        "if [ \"$FIREDUP_NODE_RANK\" = 1 ]; then echo 'node 1: dummy health endpoint'; sleep 300; fi\n\
         echo 'Load weight begin'; sleep 0.5; echo 'fired up and ready to roll'; sleep 300",
    )
}
