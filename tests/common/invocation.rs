//! A firedup command line, built fluently instead of as a hand-written argv vector:
//!
//! ```ignore
//! let r = env.run().json().ready_line("listening on").command(&[&server]).output();
//! let r = env.run().json().until("exit").shell("echo step 1").output();
//! let s = env.fd("stop").arg(r.run_id()).output();
//! ```
//!
//! Each method appends what the flag's name says, in call order, so the command line firedup
//! sees is the one the test reads; `args()` shows it in a failure message. `output()` runs it to
//! the end (the same `Run` as `Env::firedup`), `spawn()` starts it for a test that signals or
//! watches it midway.
use std::process::{Child, Stdio};
use std::time::Duration;

use super::{Env, Run};

pub struct Invocation<'a> {
    env: &'a Env,
    args: Vec<String>,
    vars: Vec<(String, String)>,
    bound: Option<Duration>,
}

impl Env {
    /// `firedup SUBCOMMAND ...`.
    pub fn fd(&self, subcommand: &str) -> Invocation<'_> {
        Invocation {
            env: self,
            args: vec![subcommand.to_string()],
            vars: Vec::new(),
            bound: None,
        }
    }

    /// `firedup run ...`.
    pub fn run(&self) -> Invocation<'_> {
        self.fd("run")
    }
}

impl Invocation<'_> {
    /// One more argument, as given.
    pub fn arg(mut self, a: impl ToString) -> Self {
        self.args.push(a.to_string());
        self
    }

    /// Several arguments, as given (a list a test builds case by case).
    pub fn args_from(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// `--NAME VALUE` (`name` without its dashes).
    pub fn opt(self, name: &str, value: impl ToString) -> Self {
        self.arg(format!("--{name}")).arg(value)
    }

    /// `--NAME` (`name` without its dashes).
    pub fn flag(self, name: &str) -> Self {
        self.arg(format!("--{name}"))
    }

    pub fn json(self) -> Self {
        self.flag("json")
    }

    pub fn ready_line(self, pattern: &str) -> Self {
        self.opt("ready-line", pattern)
    }

    /// `--until exit` (job mode) or `--until ready`.
    pub fn until(self, what: &str) -> Self {
        self.opt("until", what)
    }

    pub fn timeout(self, duration: &str) -> Self {
        self.opt("timeout", duration)
    }

    pub fn host(self, host: &str) -> Self {
        self.opt("host", host)
    }

    /// An environment variable for firedup (and so for the command it launches).
    pub fn var(mut self, name: &str, value: impl ToString) -> Self {
        self.vars.push((name.to_string(), value.to_string()));
        self
    }

    /// `-- ARGV...`: the command firedup launches.
    pub fn command(mut self, argv: &[&str]) -> Self {
        self.args.push("--".to_string());
        self.args.extend(argv.iter().map(|a| a.to_string()));
        self
    }

    /// `-- sh -c SCRIPT`.
    pub fn shell(self, script: &str) -> Self {
        self.command(&["sh", "-c", script])
    }

    /// Kill firedup and fail the test if it has not ended within `bound` (a test whose subject
    /// could hang says how long it waits instead of waiting forever).
    pub fn bounded(mut self, bound: Duration) -> Self {
        self.bound = Some(bound);
        self
    }

    /// The arguments so far, for a failure message.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// Runs firedup to its end; stdout parsed as JSON when it is JSON.
    pub fn output(self) -> Run {
        if let Some(bound) = self.bound {
            let mut c = self.env.cmd();
            c.envs(self.vars).args(&self.args);
            return super::bounded::run_bounded(c, bound).into();
        }
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let vars: Vec<(&str, &str)> = self
            .vars
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.env.cmd_json(&args, &vars)
    }

    /// Starts firedup, stdout and stderr piped, stdin null.
    pub fn spawn(self) -> Child {
        let mut c = self.env.cmd();
        c.envs(self.vars)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("firedup starts")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_appear_in_call_order_and_the_command_after_the_separator() {
        let env = Env::new();
        let i = env
            .run()
            .json()
            .ready_line("listening on")
            .timeout("30s")
            .shell("echo hi");
        assert_eq!(
            i.args(),
            [
                "run",
                "--json",
                "--ready-line",
                "listening on",
                "--timeout",
                "30s",
                "--",
                "sh",
                "-c",
                "echo hi"
            ]
        );
    }
}
