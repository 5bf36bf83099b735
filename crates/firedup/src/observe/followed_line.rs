//! What the log follower found, as the judge's observation.

use crate::follow::FollowEventRef;
use crate::judge::Observation;
use crate::lines::clean_text;

/// The observation of what the follower found: a line's text is copied once, cleaned (the
/// judge keeps it).
pub(super) fn follow_observation(ev: FollowEventRef<'_>) -> Observation {
    match ev {
        FollowEventRef::Line(line) => Observation::Line {
            number: line.number,
            text: clean_text(line.bytes).into_owned(),
        },
        FollowEventRef::State(s) => Observation::Log(s),
    }
}
