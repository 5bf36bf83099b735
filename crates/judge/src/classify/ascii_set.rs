//! Whether a pattern set can answer ASCII lines as one ASCII byte set (the classifier's fast
//! paths rest on it), and that set.

use super::prefilter;

/// The patterns as one ASCII byte set, when that means the same as the Unicode set on ASCII text:
/// every pattern must be ASCII itself, name no code point by number (under Unicode `(?i)` a `K`
/// (Kelvin sign) or `\x{212A}` matches `k`, and `\u{17F}` matches `s`; without Unicode they do
/// not), and compile without Unicode (`\p{..}` does not).
pub(super) fn ascii_set(patterns: &[String]) -> Option<regex::bytes::RegexSet> {
    let plain =
        |p: &String| p.is_ascii() && !p.contains("\\x") && !p.contains("\\u") && !p.contains("\\U");
    if !patterns.iter().all(plain) {
        return None;
    }
    prefilter::ascii_set(patterns)
}
