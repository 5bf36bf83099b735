//! The record of a multi-node run on the machine that launched it: its id and, per node, the
//! host and the run there (`groups/GROUP_ID.json` in the state directory), so that `firedup stop
//! GROUP_ID` stops every node.

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
}

/// A group as recorded at its launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupRecord {
    /// The group's id (`group-` and six hex digits).
    pub id: String,
    /// Its nodes, in node-rank order.
    pub nodes: Vec<RecordedNode>,
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
        std::fs::write(d.join(format!("{}.json", self.id)), text).map_err(io)
    }

    /// The group `id`, when this machine launched it.
    pub fn find(id: &str) -> Option<GroupRecord> {
        if !id.starts_with("group-") || id.contains('/') {
            return None;
        }
        let text = std::fs::read_to_string(dir().join(format!("{id}.json"))).ok()?;
        serde_json::from_str(&text).ok()
    }
}
