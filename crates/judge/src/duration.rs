//! Durations as users write them on the command line: `250ms`, `90s`, `20m`, `1h`, `1h30m`, `2.5s`.

use std::time::Duration;

/// Every unit the parser accepts, with its length in seconds: the error message lists them all
/// from here, so the two cannot disagree.
const UNITS: &[(&str, f64)] = &[
    ("ms", 0.001),
    ("s", 1.0),
    ("m", 60.0),
    ("min", 60.0),
    ("h", 3600.0),
    ("d", 86400.0),
];

/// "ms, s, m, min, h or d".
fn unit_names() -> String {
    let names: Vec<&str> = UNITS.iter().map(|(name, _)| *name).collect();
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Parses a duration; the error is one sentence naming what was wrong.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty duration: write it like 250ms, 90s, 20m or 1h".into());
    }
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(format!(
                "invalid duration '{text}': write it like 250ms, 90s, 20m or 1h"
            ));
        }
        let value: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("invalid number in duration '{text}'"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let factor = match UNITS.iter().find(|(name, _)| *name == unit) {
            Some((_, seconds)) => *seconds,
            // A bare number is seconds ("90").
            None if unit.is_empty() && rest.is_empty() => 1.0,
            None => {
                return Err(format!(
                    "invalid duration '{text}': unknown unit '{unit}' (use {})",
                    unit_names()
                ));
            }
        };
        total += value * factor;
    }
    if !total.is_finite() || total > 1e9 {
        return Err(format!("duration '{text}' is too large"));
    }
    Ok(Duration::from_secs_f64(total))
}

/// Writes a duration the way people read it: `850ms`, `12.3s`, `4m05s`, `1h02m`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else if ms < 3_600_000 {
        let s = d.as_secs();
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        let s = d.as_secs();
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The unknown-unit message names every unit the parser accepts, and only those.
    #[test]
    fn the_unit_error_lists_exactly_the_accepted_units() {
        let e = parse_duration("7x").unwrap_err();
        let list = e.split_once("(use ").unwrap().1.trim_end_matches(')');
        let named: Vec<&str> = list
            .split([',', ' '])
            .filter(|w| !w.is_empty() && *w != "or")
            .collect();
        for unit in ["ms", "s", "m", "min", "h", "d"] {
            assert!(parse_duration(&format!("2{unit}")).is_ok(), "{unit}");
            assert!(named.contains(&unit), "{unit} missing from {e:?}");
        }
        for unit in &named {
            assert!(
                parse_duration(&format!("2{unit}")).is_ok(),
                "{unit} in {e:?}"
            );
        }
    }

    #[test]
    fn parses_the_contract_forms() {
        let table = [
            ("250ms", 250),
            ("90s", 90_000),
            ("20m", 1_200_000),
            ("1h", 3_600_000),
            ("1h30m", 5_400_000),
            ("2.5s", 2_500),
            ("15", 15_000),
        ];
        for (text, ms) in table {
            assert_eq!(
                parse_duration(text).unwrap(),
                Duration::from_millis(ms),
                "{text}"
            );
        }
    }

    #[test]
    fn rejects_bad_forms_with_a_sentence() {
        for bad in ["5x", "", "m", "1..2s", "-3s", "10 parsecs"] {
            let err = parse_duration(bad).unwrap_err();
            assert!(
                err.contains("duration") || err.contains("number"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn formats_for_people() {
        assert_eq!(format_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(format_duration(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(format_duration(Duration::from_secs(245)), "4m05s");
        assert_eq!(format_duration(Duration::from_secs(3720)), "1h02m");
    }
}
