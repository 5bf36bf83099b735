//! firedup's own stop of the run, as the judge's observation: read from the run directory's
//! `stop.json` when the exit is seen, so the judge knows, before the exit, that its signal was
//! firedup's and not someone else's.

use crate::judge::Observation;
use crate::target::Target;

/// [`Observation::FiredupStop`] when firedup stopped the run before the end now observed: the
/// stop began before the exit the supervisor recorded, or, for a followed daemon's end (which
/// has no record of its own) or an exit not recorded, whenever a stop was recorded at all.
pub(super) fn firedup_stop(target: &Target, following_daemon: bool) -> Option<Observation> {
    let run = target.run.as_ref()?;
    let stop = run.stop_record()?;
    let explains = match run.exit() {
        Some(exit) if !following_daemon => stop.explains_end_at(exit.ended_at),
        _ => true,
    };
    explains.then(|| Observation::FiredupStop {
        by: stop.describe(),
    })
}
