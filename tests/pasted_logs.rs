//! Real startup and failure logs that users pasted into GitHub issues of sglang, vLLM, TGI,
//! llama.cpp, Ollama, Triton and PyTorch (`tests/fixtures/pasted/*.log`), replayed through
//! `firedup run --json --until exit` with the exit code the log reports. Each log's verdict,
//! signature, decisive line and rank are compared with what a careful reader names under
//! docs/contract.md (`tests/fixtures/pasted/expected.toml`, with each log's issue address), the
//! way the held-out review sets are scored; a table per log and the totals are printed.

use crate::common;
use common::{Env, fixture};

/// What a careful reader of one log names, as `expected.toml` states it.
struct Expected {
    file: String,
    exit: i64,
    verdict: String,
    signature: Option<String>,
    /// Any one of these substrings makes the decisive line right; empty: not scored.
    decisive: Vec<String>,
    rank: RankExpectation,
}

/// The rank a log names: a failing rank, none (one process), or not said (not scored).
#[derive(PartialEq)]
enum RankExpectation {
    Rank(i64),
    NoRank,
    NotScored,
}

/// What `firedup run` said about one log, and which parts of it were right.
struct Scored {
    verdict: String,
    signature: Option<String>,
    line: String,
    rank: Option<i64>,
    verdict_ok: bool,
    signature_ok: bool,
    decisive_ok: Option<bool>,
    rank_ok: Option<bool>,
}

impl Scored {
    fn all_right(&self) -> bool {
        self.verdict_ok
            && self.signature_ok
            && self.decisive_ok != Some(false)
            && self.rank_ok != Some(false)
    }
}

fn expectations() -> Vec<Expected> {
    let doc: toml::Value =
        toml::from_str(include_str!("fixtures/pasted/expected.toml")).expect("expected.toml");
    doc["log"]
        .as_array()
        .expect("[[log]] entries")
        .iter()
        .map(|entry| {
            let text = |key: &str| entry.get(key).and_then(|v| v.as_str()).map(String::from);
            let decisive = match entry.get("decisive") {
                Some(toml::Value::String(s)) => vec![s.clone()],
                Some(toml::Value::Array(items)) => items
                    .iter()
                    .map(|v| v.as_str().expect("decisive strings").to_string())
                    .collect(),
                _ => Vec::new(),
            };
            let rank = match entry.get("rank") {
                Some(toml::Value::Integer(n)) => RankExpectation::Rank(*n),
                Some(toml::Value::String(s)) if s == "none" => RankExpectation::NoRank,
                None => RankExpectation::NotScored,
                Some(other) => panic!("rank must be an integer or \"none\", not {other}"),
            };
            Expected {
                file: text("file").expect("file"),
                exit: entry["exit"].as_integer().expect("exit"),
                verdict: text("verdict").expect("verdict"),
                signature: text("signature"),
                decisive,
                rank,
            }
        })
        .collect()
}

fn replay(env: &Env, expected: &Expected) -> Scored {
    let log = fixture(&format!("pasted/{}", expected.file));
    let exit = expected.exit.to_string();
    let r = env.replay(&log, &exit);
    let verdict = r.verdict().to_string();
    let signature = r.signature().map(String::from);
    let line = r.json["line"]["text"].as_str().unwrap_or("").to_string();
    let rank = r.json["rank"].as_i64();
    let decisive_ok = (!expected.decisive.is_empty())
        .then(|| expected.decisive.iter().any(|want| line.contains(want)));
    let rank_ok = match expected.rank {
        RankExpectation::Rank(n) => Some(rank == Some(n)),
        RankExpectation::NoRank => Some(rank.is_none()),
        RankExpectation::NotScored => None,
    };
    Scored {
        verdict_ok: verdict == expected.verdict,
        signature_ok: signature == expected.signature,
        verdict,
        signature,
        line,
        rank,
        decisive_ok,
        rank_ok,
    }
}

fn mark(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "ok",
        Some(false) => "MISS",
        None => "-",
    }
}

fn shorten(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}

fn rank_text(rank: &RankExpectation) -> String {
    match rank {
        RankExpectation::Rank(n) => n.to_string(),
        RankExpectation::NoRank => "none".into(),
        RankExpectation::NotScored => "?".into(),
    }
}

fn percent(right: usize, of: usize) -> String {
    if of == 0 {
        "-".into()
    } else {
        format!("{right}/{of} ({:.0} %)", 100.0 * right as f64 / of as f64)
    }
}

// `cargo test --release --test pasted_logs -- --nocapture` prints the table.
#[test]
fn pasted_logs_get_the_verdict_signature_decisive_line_and_rank_a_reader_names() {
    let env = Env::new();
    let expected = expectations();
    assert!(!expected.is_empty());
    let scored: Vec<Scored> = expected.iter().map(|e| replay(&env, e)).collect();

    println!(
        "\n{:<47} {:<28} {:<28} {:<5} {:<10} line",
        "log", "expected", "got", "line", "rank e/g"
    );
    for (e, s) in expected.iter().zip(&scored) {
        let want = format!("{} {}", e.verdict, e.signature.as_deref().unwrap_or("-"));
        let got = format!("{} {}", s.verdict, s.signature.as_deref().unwrap_or("-"));
        let got_rank = s.rank.map_or("none".into(), |n| n.to_string());
        println!(
            "{:<47} {:<28} {:<28} {:<5} {:<10} {}",
            e.file,
            want,
            if s.verdict_ok && s.signature_ok {
                "ok".to_string()
            } else {
                got
            },
            mark(s.decisive_ok),
            format!("{}/{} {}", rank_text(&e.rank), got_rank, mark(s.rank_ok)),
            if s.decisive_ok == Some(false) {
                shorten(&s.line, 90)
            } else {
                String::new()
            }
        );
    }
    let count = |f: &dyn Fn(&Scored) -> Option<bool>| {
        let scoredx: Vec<bool> = scored.iter().filter_map(f).collect();
        (scoredx.iter().filter(|ok| **ok).count(), scoredx.len())
    };
    let (verdicts, n) = count(&|s| Some(s.verdict_ok));
    let (signatures, _) = count(&|s| Some(s.signature_ok));
    let (lines, n_lines) = count(&|s| s.decisive_ok);
    let (ranks, n_ranks) = count(&|s| s.rank_ok);
    println!(
        "\ntotals over {n} logs: verdict {}, signature {}, decisive line {}, rank {}",
        percent(verdicts, n),
        percent(signatures, n),
        percent(lines, n_lines),
        percent(ranks, n_ranks)
    );

    let wrong: Vec<&str> = expected
        .iter()
        .zip(&scored)
        .filter(|(_, s)| !s.all_right())
        .map(|(e, _)| e.file.as_str())
        .collect();
    assert!(wrong.is_empty(), "not as a reader names them: {wrong:?}");
}
