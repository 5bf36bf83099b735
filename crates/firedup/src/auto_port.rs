//! `--port auto` (`firedup run`, [`Launch::auto_port`](crate::Launch::auto_port)): firedup picks a
//! free TCP port on this machine, puts it in place of every `{port}` in the command's arguments,
//! gives it to the command as `FIREDUP_PORT`, and probes it as `--port N` would.
//!
//! The port is free when picked: the kernel hands out an unused one for a bind to port 0 on every
//! IPv4 address, and that socket is closed before the server starts, so the server can bind it.
//! Between the two another program could take it. That is never a false `ready`: the port probe
//! only counts a listener owned by the run's own processes, and a server that cannot bind fails
//! with `port_in_use`.

use std::net::{Ipv4Addr, TcpListener};

use crate::error::Error;
use crate::plan::WatchOptions;

/// What is replaced by the port in the command's arguments.
pub const PLACEHOLDER: &str = "{port}";

/// The environment variable the command finds the port in.
pub const PORT_ENV: &str = "FIREDUP_PORT";

/// A TCP port no one on this machine listens on now.
pub fn pick_free_port() -> Result<u16, Error> {
    let picked = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|l| l.local_addr())
        .map_err(|source| Error::Io {
            context: "--port auto: cannot find a free TCP port on this machine; give --port N"
                .into(),
            source,
        })?;
    Ok(picked.port())
}

/// `command` with every `{port}` in its arguments (also inside one, as in `--port={port}`)
/// replaced by `port`.
pub fn fill_port(command: &[String], port: u16) -> Vec<String> {
    let port = port.to_string();
    command
        .iter()
        .map(|a| a.replace(PLACEHOLDER, &port))
        .collect()
}

/// Applies `--port auto` to a launch: picks the port, fills the command, sets `FIREDUP_PORT` in
/// `env` and makes the port a readiness probe (`options.port`). Returns the port.
pub fn apply(
    command: &mut Vec<String>,
    env: &mut Vec<(String, String)>,
    options: &mut WatchOptions,
) -> Result<u16, Error> {
    let port = pick_free_port()?;
    *command = fill_port(command, port);
    env.retain(|(k, _)| k != PORT_ENV);
    env.push((PORT_ENV.into(), port.to_string()));
    options.port = Some(port);
    Ok(port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_filled() {
        let table: [(&[&str], &[&str]); 4] = [
            (
                &["python", "-m", "http.server", "{port}"],
                &["python", "-m", "http.server", "4711"],
            ),
            (&["srv", "--port={port}"], &["srv", "--port=4711"]),
            (
                &["sh", "-c", "echo {port}; serve {port}"],
                &["sh", "-c", "echo 4711; serve 4711"],
            ),
            (
                &["srv", "--port", "80", "{ port }"],
                &["srv", "--port", "80", "{ port }"],
            ),
        ];
        for (command, want) in table {
            let command: Vec<String> = command.iter().map(|s| s.to_string()).collect();
            assert_eq!(fill_port(&command, 4711), want, "{command:?}");
        }
    }

    #[test]
    fn a_picked_port_can_be_bound() {
        let port = pick_free_port().expect("a free port");
        assert_ne!(port, 0);
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("the picked port is free");
    }
}
