//! A `--name` means one thing on this machine at a time (CONTRACT: `--name` on `run`; `stop`,
//! `logs`, `watch`, `show` take it where a RUN_ID goes): as a single run's name is refused while
//! a live run has it, a name is refused for a run or a group while a group launched from here
//! that is not over has it, and a group's id (`group-XXXXXX`) is never a name.

use anyhow::{Result, bail};
use firedup::group::record::GroupRecord;

/// Refuses `name` for a new run or group launched from here while a group that is not over has
/// it, or when it is a group's id.
pub(crate) fn refuse_a_live_groups(name: &str) -> Result<()> {
    if name.starts_with("group-") && GroupRecord::find(name).is_some() {
        bail!("--name {name}: that is the id of a multi-node run; choose another name");
    }
    if let Some(g) = GroupRecord::live_named(name) {
        bail!(
            "--name {name}: multi-node run {} of that name is still running; stop it (`firedup stop {name}`) or choose another name",
            g.id
        );
    }
    Ok(())
}

/// Refuses `name` for a new group: as [`refuse_a_live_groups`], and while a live run on this
/// machine has it or it is a run's id here (`stop NAME` would mean that run).
pub(crate) fn refuse_for_a_group(name: &str) -> Result<()> {
    firedup::rundir::check_name_free(name)?;
    refuse_a_live_groups(name)
}
