//! The record of a multi-node run on the machine that launched it: its id (and `--name`), its
//! command and, per node, the host, the run there, its pid and log (`groups/GROUP_ID.json` in the
//! state directory), so that `firedup stop GROUP_ID` stops every node and `ps` lists the group
//! as one run. The launching firedup adds the group's verdict when it has one (also when a
//! signal ended it), and `over` once nothing of the group is left on any node (its verdict left
//! nothing serving, or a stop found every node clean): `ps` asks the nodes only of a group not
//! over.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One node of a recorded group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedNode {
    /// Its position among the hosts.
    pub node_rank: u32,
    /// The host as given.
    pub node: String,
    /// The run on that host.
    pub run_id: String,
    /// The node's watched process there, when known.
    #[serde(default)]
    pub pid: Option<u32>,
    /// The node's log (a path on that host).
    #[serde(default)]
    pub log: String,
}

/// A group as recorded at its launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupRecord {
    /// The group's id (`group-` and six hex digits).
    pub id: String,
    /// Its nodes, in node-rank order.
    pub nodes: Vec<RecordedNode>,
    /// `--name`.
    #[serde(default)]
    pub name: Option<String>,
    /// The command as given (secrets redacted), its placeholders not filled in.
    #[serde(default)]
    pub command: Vec<String>,
    /// When it was launched: Unix time in seconds.
    #[serde(default)]
    pub started_at: f64,
    /// The group's verdict, once it has one.
    #[serde(default)]
    pub outcome: Option<crate::verdict::Outcome>,
    /// Nothing of the group is left on any node.
    #[serde(default)]
    pub over: bool,
}

fn dir() -> PathBuf {
    crate::state_dir::state_root().join("groups")
}

/// A new group id: unique among this machine's groups.
pub fn new_id() -> String {
    loop {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let id = format!(
            "group-{:06x}",
            (nanos ^ std::process::id().rotate_left(7)) & 0xff_ffff
        );
        if !dir().join(format!("{id}.json")).exists() {
            return id;
        }
    }
}

impl GroupRecord {
    /// Writes the record (the directory made private first).
    pub fn write(&self) -> Result<(), crate::Error> {
        use std::os::unix::fs::DirBuilderExt;
        let d = dir();
        let io = |source| crate::Error::Io {
            context: format!("cannot record the group in {}", d.display()),
            source,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&d)
            .map_err(io)?;
        let text = serde_json::to_string_pretty(self).expect("a group record serializes");
        // Written aside and renamed: `ps` never reads half a record.
        let aside = d.join(format!(".{}.{}.tmp", self.id, std::process::id()));
        std::fs::write(&aside, text).map_err(io)?;
        std::fs::rename(&aside, d.join(format!("{}.json", self.id))).map_err(io)
    }

    /// The group `id`, when this machine launched it, else the newest group named `id`.
    pub fn find(id: &str) -> Option<GroupRecord> {
        if id.starts_with("group-") && !id.contains('/') {
            let text = std::fs::read_to_string(dir().join(format!("{id}.json"))).ok()?;
            return serde_json::from_str(&text).ok();
        }
        Self::list()
            .into_iter()
            .filter(|g| g.name.as_deref() == Some(id))
            .max_by(|a, b| a.started_at.total_cmp(&b.started_at))
    }

    /// The newest group named `name` that is not over (its nodes may still run): what `stop
    /// NAME` would stop, so no other run or group may take the name meanwhile.
    pub fn live_named(name: &str) -> Option<GroupRecord> {
        Self::list()
            .into_iter()
            .rfind(|g| !g.over && g.name.as_deref() == Some(name))
    }

    /// Every group launched from this machine, oldest first (a record that cannot be read is
    /// left out).
    pub fn list() -> Vec<GroupRecord> {
        let Ok(entries) = std::fs::read_dir(dir()) else {
            return Vec::new();
        };
        let mut groups: Vec<GroupRecord> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .filter_map(|text| serde_json::from_str(&text).ok())
            .collect();
        groups.sort_by(|a, b| a.started_at.total_cmp(&b.started_at));
        groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_from_before_the_group_was_listed_still_reads() {
        // As the first multi-node firedup wrote it: id and nodes only.
        let old = r#"{"id":"group-0a1b2c","nodes":[{"node_rank":0,"node":"a","run_id":"x-1"}]}"#;
        let g: GroupRecord = serde_json::from_str(old).unwrap();
        assert_eq!(g.nodes[0].run_id, "x-1");
        assert_eq!((g.nodes[0].pid, g.over, g.name), (None, false, None));
        assert!(g.outcome.is_none() && g.command.is_empty());
    }
}
