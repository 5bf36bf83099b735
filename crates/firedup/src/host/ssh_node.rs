//! What a multi-node run asks of an SSH host beyond a single run's: the address its peers reach
//! it at (`{master_addr}`: the host name ssh itself would connect to, from `ssh -G`, so an alias
//! of `~/.ssh/config` gives its `HostName`), and a TCP port free there (`{master_port}`: picked
//! by the host's own firedup, `__free-port`, where the rendezvous will listen).

use super::HostError;
use super::ssh::SshHost;

impl SshHost {
    /// The address other machines reach this host at: ssh's resolved `HostName` (no
    /// connection is made).
    pub fn address(&self) -> Result<String, HostError> {
        let spec = self.spec();
        let mut cmd = std::process::Command::new("ssh");
        if let Some(cfg) = &spec.config_file {
            cmd.arg("-F").arg(cfg);
        }
        cmd.arg("-G").arg(&spec.destination);
        let out = cmd.output().map_err(|e| {
            HostError::Unreachable(format!(
                "cannot run `ssh -G {}` to learn its address: {e}; give --master-addr",
                spec.destination
            ))
        })?;
        let text = String::from_utf8_lossy(&out.stdout);
        hostname_of(&text).ok_or_else(|| {
            HostError::Unreachable(format!(
                "`ssh -G {}` named no host name; give --master-addr",
                spec.destination
            ))
        })
    }

    /// A TCP port no one listens on now on this host.
    pub fn free_port(&self) -> Result<u16, HostError> {
        let said = self.remote_request(vec!["__free-port".into()], None)?;
        said.trim().parse().map_err(|_| {
            HostError::Unreachable(format!(
                "{}: firedup there named no free port ({}); give --master-port",
                self.host(),
                said.trim()
            ))
        })
    }
}

/// The `hostname` line of `ssh -G`'s answer.
fn hostname_of(ssh_g: &str) -> Option<String> {
    ssh_g.lines().find_map(|l| {
        let (key, value) = l.split_once(' ')?;
        (key == "hostname" && !value.trim().is_empty()).then(|| value.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::hostname_of;

    #[test]
    fn the_host_name_is_ssh_gs_hostname_line() {
        for (answer, want) in [
            ("user root\nhostname 10.0.0.7\nport 22\n", Some("10.0.0.7")),
            ("hostname gpu-a.example\n", Some("gpu-a.example")),
            ("hostnamex 1\nuser u\n", None),
            ("", None),
        ] {
            assert_eq!(hostname_of(answer).as_deref(), want, "{answer:?}");
        }
    }
}
