//! `{node_rank}`, `{nnodes}`, `{master_addr}` and `{master_port}` in a multi-node COMMAND's
//! arguments, and the `FIREDUP_*` variables that carry the same values (CONTRACT: multi-node
//! runs). A `{name}` firedup does not fill in is refused before anything is launched: a typo
//! would otherwise reach every node as text. `${VAR}` (a shell's) is not a placeholder, and
//! `{port}` is `--port auto`'s own.

/// What one node's command is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeVars {
    /// The node's position among the hosts.
    pub node_rank: u32,
    /// How many nodes the run has.
    pub nnodes: u32,
    /// Where node 0 is reached.
    pub master_addr: String,
    /// The rendezvous port on node 0.
    pub master_port: u16,
}

/// The placeholders filled in, by name.
pub const NAMES: [&str; 4] = ["node_rank", "nnodes", "master_addr", "master_port"];

/// Placeholders left for someone else to fill in.
const NOT_OURS: [&str; 1] = ["port"];

impl NodeVars {
    fn value(&self, name: &str) -> Option<String> {
        Some(match name {
            "node_rank" => self.node_rank.to_string(),
            "nnodes" => self.nnodes.to_string(),
            "master_addr" => self.master_addr.clone(),
            "master_port" => self.master_port.to_string(),
            _ => return None,
        })
    }

    /// The variables set for the node's command.
    pub fn env(&self) -> Vec<(String, String)> {
        NAMES
            .iter()
            .map(|n| {
                let value = self.value(n).unwrap_or_default();
                (format!("FIREDUP_{}", n.to_uppercase()), value)
            })
            .collect()
    }

    /// `command` with every placeholder filled in.
    pub fn fill(&self, command: &[String]) -> Vec<String> {
        command
            .iter()
            .map(|arg| {
                let mut out = String::with_capacity(arg.len());
                let mut rest = arg.as_str();
                while let Some((before, name, after)) = next_placeholder(rest) {
                    out.push_str(before);
                    match self.value(name) {
                        Some(v) => out.push_str(&v),
                        None => {
                            out.push('{');
                            out.push_str(name);
                            out.push('}');
                        }
                    }
                    rest = after;
                }
                out.push_str(rest);
                out
            })
            .collect()
    }
}

/// Refuses a command with a `{name}` that firedup does not fill in.
pub fn check(command: &[String]) -> Result<(), String> {
    for arg in command {
        let mut rest = arg.as_str();
        while let Some((_, name, after)) = next_placeholder(rest) {
            if !NAMES.contains(&name) && !NOT_OURS.contains(&name) {
                return Err(format!(
                    "COMMAND has {{{name}}}, which a multi-node run does not fill in (it fills in {}); nothing was launched",
                    NAMES.map(|n| format!("{{{n}}}")).join(", ")
                ));
            }
            rest = after;
        }
    }
    Ok(())
}

/// The next `{identifier}` in `s` not written `${...}`: the text before it, its name, the rest.
fn next_placeholder(s: &str) -> Option<(&str, &str, &str)> {
    let mut from = 0;
    while let Some(open) = s[from..].find('{').map(|i| i + from) {
        let shell = s[..open].ends_with('$');
        let body = &s[open + 1..];
        let len = body
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(body.len());
        if !shell && len > 0 && body[len..].starts_with('}') {
            return Some((&s[..open], &body[..len], &body[len + 1..]));
        }
        from = open + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> NodeVars {
        NodeVars {
            node_rank: 1,
            nnodes: 2,
            master_addr: "10.0.0.7".into(),
            master_port: 29500,
        }
    }

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn placeholders_are_filled_in_each_argument() {
        let cases: [(&[&str], &[&str]); 4] = [
            (
                &[
                    "torchrun",
                    "--nnodes",
                    "{nnodes}",
                    "--node_rank={node_rank}",
                ],
                &["torchrun", "--nnodes", "2", "--node_rank=1"],
            ),
            (
                &["--dist-init-addr", "{master_addr}:{master_port}"],
                &["--dist-init-addr", "10.0.0.7:29500"],
            ),
            (
                &["sh", "-c", "echo ${HOME} {port} {}"],
                &["sh", "-c", "echo ${HOME} {port} {}"],
            ),
            (&["{{node_rank}}"], &["{1}"]),
        ];
        for (given, want) in cases {
            assert_eq!(vars().fill(&args(given)), args(want), "{given:?}");
        }
    }

    #[test]
    fn an_unknown_placeholder_is_refused_and_named() {
        for (given, refused) in [
            (&["x", "{node_rank}", "{master_port}"][..], None),
            (&["sh", "-c", "echo ${NODE}"][..], None),
            (&["x", "--port={port}"][..], None),
            (&["x", "{rank}"][..], Some("{rank}")),
            (&["x", "--addr={master_host}:1"][..], Some("{master_host}")),
        ] {
            match (check(&args(given)), refused) {
                (Ok(()), None) => {}
                (Err(e), Some(name)) => assert!(e.contains(name), "{e}"),
                (got, want) => panic!("{given:?}: {got:?}, want refusal of {want:?}"),
            }
        }
    }

    #[test]
    fn the_variables_carry_the_same_values() {
        assert_eq!(
            vars().env(),
            [
                ("FIREDUP_NODE_RANK", "1"),
                ("FIREDUP_NNODES", "2"),
                ("FIREDUP_MASTER_ADDR", "10.0.0.7"),
                ("FIREDUP_MASTER_PORT", "29500"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }
}
