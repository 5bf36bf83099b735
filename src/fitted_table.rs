//! Tables that fit the terminal (`ps`, `history`, `compare`, the matrix's): the width they get is
//! `COLUMNS` when it is set (a number), else the terminal's when stdout is one. Within it, the
//! columns that hold run ids are never wrapped or cut (people copy them), the elastic column (a
//! command) takes what is left and is cut with an ellipsis, columns with nothing in them are
//! dropped, and the others wrap. With no width (stdout is a pipe or a file and `COLUMNS` unset)
//! or with `--wide`, every column is printed whole, as scripts reading the text always got it.

use comfy_table::{
    Cell, ColumnConstraint, ContentArrangement, Table, Width, presets::UTF8_FULL_CONDENSED,
};

/// Which columns a table must keep whole and which may give way.
#[derive(Debug, Default)]
pub(crate) struct Fit {
    /// Columns (by index in the header) never cut or wrapped: run ids.
    pub(crate) whole: Vec<usize>,
    /// The whole columns' width is their header's (`compare`: the run ids head the columns and
    /// the cells below wrap), not their cells'.
    pub(crate) whole_by_header: bool,
    /// The column cut to what is left (a command), if any.
    pub(crate) elastic: Option<usize>,
    /// `--wide`: every column, whole, whatever the width.
    pub(crate) wide: bool,
}

/// The width tables are fitted to: `COLUMNS` when set, else the terminal's when stdout is one.
/// A width under 20 (a pseudo-terminal of width 0 under `script`) is taken as unknown.
pub(crate) fn table_width() -> Option<usize> {
    let from_env = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok());
    let width = match from_env {
        Some(w) => Some(w),
        None => Table::new().width().map(usize::from),
    };
    width.filter(|w| *w >= 20)
}

/// Display width of a cell's text (its longest line): run ids and flags are ASCII; other text is
/// counted by chars.
fn text_width(s: &str) -> usize {
    s.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// `s` cut to `max` chars, the cut marked with an ellipsis.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let kept: String = s.chars().take(max.saturating_sub(1)).collect();
    format!("{kept}…")
}

fn is_empty_cell(s: &str) -> bool {
    let s = s.trim();
    s.is_empty() || s == "-"
}

/// A table of `header` and `rows` (in the project's style) fitted to `width` as `fit` says.
pub(crate) fn fitted(
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    fit: &Fit,
    width: Option<usize>,
) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    let width = match width {
        Some(w) if !fit.wide => w,
        _ => {
            t.set_content_arrangement(ContentArrangement::Disabled)
                .set_header(header);
            for r in rows {
                t.add_row(r);
            }
            return t;
        }
    };
    // Drop the columns nobody filled (never a whole one: the run id).
    let mut keep: Vec<usize> = (0..header.len())
        .filter(|&c| {
            fit.whole.contains(&c)
                || rows
                    .iter()
                    .any(|r| r.get(c).is_some_and(|s| !is_empty_cell(s)))
        })
        .collect();
    let cell = |r: &[String], c: usize| r.get(c).cloned().unwrap_or_default();
    let natural = |c: usize| {
        rows.iter()
            .map(|r| text_width(&cell(r, c)))
            .chain([text_width(&header[c])])
            .max()
            .unwrap_or(0)
    };
    // The narrowest a column may get: whole columns their width, the elastic one 12, the others
    // their longest word (a header or value never split inside a word).
    let least = |c: usize| {
        if fit.whole.contains(&c) {
            if fit.whole_by_header {
                text_width(&header[c])
            } else {
                natural(c)
            }
        } else if Some(c) == fit.elastic {
            natural(c).min(12)
        } else {
            rows.iter()
                .map(|r| cell(r, c))
                .chain([header[c].clone()])
                .flat_map(|t| t.split_whitespace().map(|w| w.chars().count()).max())
                .max()
                .unwrap_or(0)
        }
    };
    // Each column costs its content, a space either side and a border; one more border closes.
    let frame = |n: usize| 3 * n + 1;
    // Too many columns even at their narrowest: the last ones that may go, go (`--wide` has them).
    while keep.iter().map(|&c| least(c)).sum::<usize>() + frame(keep.len()) > width {
        let Some(i) = keep
            .iter()
            .rposition(|&c| !fit.whole.contains(&c) && Some(c) != fit.elastic)
        else {
            break;
        };
        keep.remove(i);
    }
    let others: usize = keep
        .iter()
        .filter(|&&c| Some(c) != fit.elastic)
        .map(|&c| natural(c))
        .sum();
    let room = width.saturating_sub(frame(keep.len()) + others).max(12);
    let shown = |r: &[String]| -> Vec<String> {
        keep.iter()
            .map(|&c| {
                let text = cell(r, c);
                if Some(c) == fit.elastic {
                    cut(&text, room)
                } else {
                    text
                }
            })
            .collect()
    };
    t.set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(u16::try_from(width).unwrap_or(u16::MAX))
        .set_header(keep.iter().map(|&c| Cell::new(&header[c])));
    for r in &rows {
        t.add_row(shown(r));
    }
    for (i, &c) in keep.iter().enumerate() {
        if let Some(col) = t.column_mut(i) {
            // A constraint's width counts the cell's padding (a space either side).
            let w = u16::try_from(least(c) + 2).unwrap_or(u16::MAX);
            col.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(w)));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn cuts_mark_the_cut() {
        for (text, max, want) in [
            ("python -m x", 20, "python -m x"),
            ("python -m sglang", 8, "python …"),
            ("abc", 3, "abc"),
        ] {
            assert_eq!(cut(text, max), want);
        }
    }

    #[test]
    fn a_narrow_table_keeps_ids_whole_drops_empty_columns_and_fits() {
        let id = "python-m-sglang-launch-server-3fa2c1";
        let long = "python -m sglang.launch_server --model-path /models/a/very/long/path --port 30000 --tp 8";
        let t = fitted(
            s(&["run", "name", "command", "verdict"]),
            vec![s(&[id, "-", long, "ready"]), s(&[id, "", long, "failed"])],
            &Fit {
                whole: vec![0],
                elastic: Some(2),
                ..Fit::default()
            },
            Some(80),
        );
        let text = t.to_string();
        for line in text.lines() {
            assert!(line.chars().count() <= 80, "{line}");
        }
        assert!(text.contains(id) && text.contains('…'), "{text}");
        assert!(!text.contains("name"), "{text}");
        let wide = fitted(
            s(&["run", "name", "command"]),
            vec![s(&[id, "-", long])],
            &Fit {
                whole: vec![0],
                elastic: Some(2),
                wide: true,
                ..Fit::default()
            },
            Some(80),
        )
        .to_string();
        assert!(wide.contains(long) && wide.contains("name"), "{wide}");
    }
}
