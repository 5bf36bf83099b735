//! GPU failures recorded for real (`tests/fixtures/gpuN/`, each `CASE.log` with the exit status the
//! shell saw in `CASE.code`), replayed through `firedup run` on a machine without a GPU: each must
//! name its verdict, signature, rank and a decisive line holding the expected text.

use super::Env;

/// One recorded case and what firedup must say of it.
pub struct GpuCase {
    /// `CASE.log` and `CASE.code` in the set's directory.
    pub name: &'static str,
    /// How the replay ends (`tests/fixtures/replay.sh`: a code, `sig:NAME`); empty: `CASE.code`.
    pub ending: &'static str,
    pub verdict: &'static str,
    pub signature: Option<&'static str>,
    /// A substring of the decisive line's text (empty: any line, or none).
    pub line: &'static str,
    pub rank: Option<u64>,
}

/// Replays every case of `tests/fixtures/DIR` ending as recorded; panics naming each case whose
/// verdict, signature, rank or decisive line differ.
pub fn replay_all(dir: &str, cases: &[GpuCase]) {
    let dir = super::fixture(dir);
    let env = Env::new();
    let mut wrong = Vec::new();
    for c in cases {
        let ending = match c.ending {
            "" => std::fs::read_to_string(format!("{dir}/{}.code", c.name)).unwrap(),
            given => given.to_string(),
        };
        let r = env.replay(&format!("{dir}/{}.log", c.name), ending.trim());
        let line = r.json["line"]["text"].as_str().unwrap_or("").to_string();
        let got = (
            r.verdict().to_string(),
            r.signature().map(str::to_string),
            line.contains(c.line),
            r.json["rank"].as_u64(),
        );
        let want = (
            c.verdict.to_string(),
            c.signature.map(str::to_string),
            true,
            c.rank,
        );
        if got != want {
            wrong.push(format!(
                "{}: got {} {:?} rank {:?} on line {line:?}; want {} {:?} rank {:?} on a line with {:?}",
                c.name, got.0, got.1, got.3, c.verdict, c.signature, c.rank, c.line
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
