//! Issue 29's small frictions, each through the real binary: what firedup says before a launch
//! (the most basic mistake first, every mistake named where it is) and after it (hints that can
//! be followed).

mod common;
use common::Env;

/// A command that does not exist is said before the missing readiness condition: that one is
/// the next round trip, not the first.
#[test]
fn a_missing_command_is_said_before_the_missing_readiness_condition() {
    let env = Env::new();
    for (program, says) in [
        ("/no/such/binary", "/no/such/binary does not exist"),
        ("no-such-command-29", "no-such-command-29 is not on PATH"),
    ] {
        let r = env.firedup(&["run", "--", program]);
        assert_eq!(r.code, 2, "{}", r.explain());
        let first = r
            .stderr
            .find(says)
            .unwrap_or_else(|| panic!("{}", r.explain()));
        let readiness = r.stderr.find("no readiness condition");
        assert!(readiness.is_none_or(|at| first < at), "{}", r.explain());
    }
    // A command that exists keeps the readiness complaint alone.
    let r = env.firedup(&["run", "--", "true"]);
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.starts_with("firedup: no readiness condition"),
        "{}",
        r.explain()
    );
}
