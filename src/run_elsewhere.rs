//! A run id (or name) given without `--host` that this machine has no run directory for, while
//! the history says the run was launched on another host: the command is refused with the one
//! that works (`firedup stop --host HOST RUN`), instead of "no run" (issue 29). A multi-node
//! run's id or name is refused the same way, with each node's command (its run there has its
//! own id).

use crate::history::History;
use crate::rundir::RunDir;

/// `Err` naming the command to use when run `run_id` is not here but the history places it on a
/// host; `Ok` otherwise (a run here, or one the history does not know: the command itself then
/// says what it says). `command` is the subcommand, as the user would type it again.
pub fn check_here(run_id: &str, command: &str) -> anyhow::Result<()> {
    if RunDir::open(run_id).is_ok() {
        return Ok(());
    }
    // A multi-node run is a run on each node, each with its own id there.
    if let Some(group) = firedup::group::record::GroupRecord::find(run_id) {
        let per_node: Vec<String> = group
            .nodes
            .iter()
            .map(|n| format!("firedup {command} --host {} {}", n.node, n.run_id))
            .collect();
        anyhow::bail!(
            "'{run_id}' is a multi-node run ({}), a run on each node: {}",
            group.id,
            per_node.join("; ")
        );
    }
    crate::history::wait_for_records_in_flight();
    let Ok(Some(history)) = History::open_default() else {
        return Ok(());
    };
    let Some(host) = history.find(run_id).ok().and_then(|r| r.host) else {
        return Ok(());
    };
    anyhow::bail!(
        "run '{run_id}' ran on {host}, not on this machine: firedup {command} --host {host} {run_id}"
    )
}
