//! A run's names: its id (`STEM-` and six hex digits, the stem what the command runs: wrappers
//! and interpreters skipped, nothing secret) and the name a person gives it (`run --name`).

use std::path::Path;

use super::{RunDir, runs_root};
use crate::error::{Result, usage};

/// Programs that run the server rather than being it: the run is named after what they run.
const WRAPPERS: [&str; 10] = [
    "setpriv", "runuser", "sudo", "env", "nohup", "numactl", "taskset", "nice", "stdbuf", "timeout",
];

/// Interpreters: the run is named after their script (`demo-server` for `sh demo-server.sh`) or
/// module (`sglang` for `python -m sglang.launch_server`).
fn is_interpreter(word: &str) -> bool {
    let base = word.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    matches!(
        base,
        "python" | "sh" | "bash" | "dash" | "zsh" | "node" | "perl" | "ruby" | "uv" | "uvx"
    )
}

/// The first part of a run id: what the command runs, in at most 24 of `[A-Za-z0-9_-]` (`run`
/// when nothing is left).
pub fn id_stem(command: &[String]) -> String {
    // An id is shown everywhere: nothing secret may go into it.
    let command = crate::secrets::redact_args(command);
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    let base = |w: &str| {
        Path::new(w)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let is_program = |w: &str| {
        let b = base(w);
        !w.starts_with('-')
            && !w.contains('=')
            && !b.is_empty()
            && !WRAPPERS.contains(&b.as_str())
            && !b.chars().all(|c| c.is_ascii_digit())
    };
    let mut name = String::new();
    if let Some(i) = words.iter().position(|w| is_program(w)) {
        name = base(words[i]);
        if is_interpreter(&name) {
            let rest = &words[i + 1..];
            if rest.contains(&"-c") {
                // `sh -c 'a script' ARGS`: no file runs; what follows are arguments.
            } else if let Some(m) = rest.iter().position(|w| *w == "-m") {
                if let Some(module) = rest.get(m + 1) {
                    name = module.split('.').next().unwrap_or(module).to_string();
                }
            } else if let Some(script) = rest
                .iter()
                .find(|w| is_program(w) && !w.chars().any(char::is_whitespace))
            {
                name = base(script);
            }
        }
        // A script's extension says nothing about the server (`demo-server.sh`).
        if let Some((stem, ext)) = name.rsplit_once('.') {
            if !stem.is_empty() && matches!(ext, "sh" | "py" | "js" | "pl" | "rb" | "bash") {
                name = stem.to_string();
            }
        }
    }
    let stem: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(24)
        .collect();
    if stem.is_empty() { "run".into() } else { stem }
}

/// A run id: `STEM-` and six hex digits, different for each `attempt`, process and moment.
pub fn fresh_id(stem: &str, attempt: u64) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mix = (nanos ^ ((std::process::id() as u64) << 20) ^ attempt.wrapping_mul(0x9e37_79b9))
        .wrapping_mul(0x2545_f491_4f6c_dd1d);
    format!("{stem}-{:06x}", (mix >> 40) & 0xff_ffff)
}

/// A run name a person chose (`run --name`): 1 to 64 of `[A-Za-z0-9._-]`, not starting with `.`
/// or `-`; one sentence saying what is wrong otherwise.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !ok {
        usage!(
            "--name {name:?} is not a run name: use 1 to 64 letters, digits, '.', '_' or '-', not starting with '.' or '-'"
        );
    }
    Ok(())
}

/// Refuses `name` while a live run has it (names are what `stop` and `watch` take); a run that
/// ended leaves its name free (the newest run of a name is the one a name means).
pub fn check_name_free(name: &str) -> Result<()> {
    check_name(name)?;
    if runs_root().join(name).join("meta.json").is_file() {
        usage!("--name {name}: that is the id of another run; choose another name");
    }
    let live = RunDir::list()
        .into_iter()
        .find(|r| r.meta().is_ok_and(|m| m.name.as_deref() == Some(name)) && r.is_live());
    if let Some(r) = live {
        usage!(
            "--name {name}: run {} of that name is still running; stop it (`firedup stop {name}`) or choose another name",
            r.id
        );
    }
    Ok(())
}
