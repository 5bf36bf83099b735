//! Unit tests of `history`, `show` and `compare` (history_cmd.rs): filters, rendering, comparisons.

use super::*;

#[test]
fn since_takes_durations_and_times() {
    let now = crate::rundir::now_unix();
    let two_h = parse_since("2h").unwrap();
    assert!((now - 7200.0 - two_h).abs() < 5.0);
    assert_eq!(parse_since("2026-12-01").unwrap(), 1_796_083_200.0);
    assert_eq!(
        parse_since("2026-12-01T09:00:00Z").unwrap(),
        1_796_083_200.0 + 9.0 * 3600.0
    );
    let e = parse_since("yesterday").unwrap_err().to_string();
    assert!(e.contains("--since"), "{e}");
}
