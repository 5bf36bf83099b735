//! Redacting secrets: what looks like a token, key or password is never printed or written to
//! disk (meta.json, `ps`, the history, reports, matrix tables), while the command itself runs with
//! the real values.
//!
//! A value is a secret by its name (env var or flag: `HF_TOKEN`, `GH_PAT`, `PGPASS`,
//! `--api-key`, `--requirepass`) or by its shape, whatever its name: the password of a URL
//! (`postgres://u:pw@h/db` → `postgres://u:<redacted>@h/db`), a well-known token prefix (`sk-`,
//! `ghp_`, `github_pat_`, `hf_`, `xoxb-`, `glpat-`, `AKIA`...), a JWT. [`redact_args`] (argv),
//! [`shown_value`] (one env value) and [`redact_text`] (a shell line, a log line) apply both
//! everywhere.
//!
//! Once a secret value is known by its name (an `--env` value, a secret-named flag of the
//! command, a secret-named variable of firedup's own environment: `known.rs`), it is redacted
//! wherever it appears, whatever surrounds it: a server that prints it is not a way around the
//! name. In a log line, the forms that name a secret lose their values too (`named.rs`).

use std::borrow::Cow;
use std::sync::OnceLock;

mod known;
mod named;

pub use known::learn_launch;

/// Endings of a name's part that make its value secret (`PGPASSWORD`, `REQUIREPASS`, `APIKEY`,
/// `HF_TOKEN`, `BASIC_AUTH`): a word that merely contains one (`NUM_PASSES`, `AUTHOR`,
/// `KEYBOARD`, `MAX_NUM_BATCHED_TOKENS`, `TOKENIZER`) does not.
const SECRET_ENDINGS: [&str; 16] = [
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWORDS",
    "PASSWD",
    "PASS",
    "PASSPHRASE",
    "KEY",
    "KEYS",
    "TOKEN",
    "CREDENTIAL",
    "CREDENTIALS",
    "COOKIE",
    "COOKIES",
    "AUTH",
    "AUTHORIZATION",
];

/// Whole parts of a name that make its value secret (`GH_PAT`, not `PATH`).
const SECRET_PARTS: [&str; 3] = ["PAT", "SESSION", "PRIVATE"];

/// Whether an env var or flag name looks like it holds a secret (`HF_TOKEN`,
/// `AWS_SECRET_ACCESS_KEY`, `PGPASSWORD`, `PGPASS`, `GH_PAT`, `OPENAI_API_KEY`), part by part
/// (split at anything not a letter or digit): a part that ends in a secret word counts, a word
/// that only contains one does not (`NUM_PASSES`, `AUTHOR`, a count of tokens).
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|part| {
            SECRET_ENDINGS.iter().any(|w| part.ends_with(w)) || SECRET_PARTS.contains(&part)
        })
}

/// What a secret value is replaced by wherever it is shown or stored.
pub const REDACTED: &str = "<redacted>";

/// The compiled shapes of secret values.
struct Shapes {
    /// `scheme://user:password@` (the password is group 2).
    url_password: regex::Regex,
    /// A token with a well-known prefix, or a JWT, anywhere in a text.
    token: regex::Regex,
}

fn shapes() -> &'static Shapes {
    static SHAPES: OnceLock<Shapes> = OnceLock::new();
    SHAPES.get_or_init(|| Shapes {
        url_password: regex::Regex::new(
            r"([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@'\x22]*):([^@\s/'\x22]+)@",
        )
        .expect("valid"),
        token: regex::Regex::new(concat!(
            r"\b(?:",
            r"sk-(?:proj-|ant-)?[A-Za-z0-9_-]{10,}",
            r"|(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{10,}",
            r"|github_pat_[A-Za-z0-9_]{10,}",
            r"|hf_[A-Za-z0-9]{10,}",
            r"|xox[abposr]-[A-Za-z0-9-]{10,}",
            r"|glpat-[A-Za-z0-9_-]{10,}",
            r"|(?:AKIA|ASIA)[A-Z0-9]{16}",
            r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
            r")"
        ))
        .expect("valid"),
    })
}

/// `text` with secret-shaped values replaced: URL passwords, tokens with well-known prefixes,
/// and the secret values firedup knows by name (`known.rs`).
pub fn redact_values(text: &str) -> Cow<'_, str> {
    let s = shapes();
    let text = match known::replace_known(text) {
        Some(t) => Cow::Owned(t),
        None => Cow::Borrowed(text),
    };
    let shaped = match s.url_password.replace_all(&text, format!("$1:{REDACTED}@")) {
        Cow::Borrowed(_) => match s.token.replace_all(&text, REDACTED) {
            Cow::Borrowed(_) => None,
            Cow::Owned(t) => Some(t),
        },
        Cow::Owned(t) => Some(s.token.replace_all(&t, REDACTED).into_owned()),
    };
    match (shaped, text) {
        (Some(t), _) => Cow::Owned(t),
        (None, t) => t,
    }
}

/// The values of `command`'s secret-named flags (`--api-key K`, `--hf-token=T`) and
/// `NAME=VALUE` words (`env GH_PAT=x cmd`): what [`redact_args`] hides.
pub(crate) fn secret_flag_values(command: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut next = false;
    for arg in command {
        if std::mem::take(&mut next) {
            out.push(arg.as_str());
            continue;
        }
        match arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) {
            Some(flag) if !flag.is_empty() => match flag.split_once('=') {
                Some((name, v)) if looks_secret(&name.replace('-', "_")) => out.push(v),
                Some(_) => {}
                None => next = looks_secret(&flag.replace('-', "_")),
            },
            _ => {
                if let Some((name, v)) = arg.split_once('=') {
                    if is_env_name(name) && looks_secret(name) {
                        out.push(v);
                    }
                }
            }
        }
    }
    out
}

/// `url` without the password of its userinfo (`http://u:pw@h/` becomes `http://u@h/`): a URL
/// that still parses, for a record that is read back.
pub fn url_without_password(url: &str) -> String {
    shapes().url_password.replace_all(url, "$1@").into_owned()
}

/// The value to show for `name=value`: all of it redacted for a secret-looking name, else what
/// looks secret in it.
pub fn shown_value<'a>(name: &str, value: &'a str) -> Cow<'a, str> {
    if looks_secret(name) {
        Cow::Borrowed(REDACTED)
    } else {
        redact_values(value)
    }
}

/// `command` with what looks secret replaced: the values of secret-looking flags (`--api-key
/// sk-1` and `--hf-token=hf_1` become `--api-key <redacted>`, `--hf-token=<redacted>`), of
/// secret-looking `NAME=VALUE` words (`env GH_PAT=x cmd`), and secret-shaped values anywhere.
pub fn redact_args(command: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(command.len());
    let mut hide_next = false;
    for arg in command {
        if hide_next {
            out.push(REDACTED.to_string());
            hide_next = false;
            continue;
        }
        match arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) {
            Some(flag) if !flag.is_empty() => match flag.split_once('=') {
                Some((name, _)) if looks_secret(&name.replace('-', "_")) => {
                    out.push(format!(
                        "{}={REDACTED}",
                        &arg[..arg.len() - flag.len() + name.len()]
                    ));
                }
                Some(_) => out.push(redact_values(arg).into_owned()),
                None => {
                    hide_next = looks_secret(&flag.replace('-', "_"));
                    out.push(arg.clone());
                }
            },
            _ => match arg.split_once('=') {
                Some((name, _)) if is_env_name(name) && looks_secret(name) => {
                    out.push(format!("{name}={REDACTED}"))
                }
                _ => out.push(redact_values(arg).into_owned()),
            },
        }
    }
    out
}

fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Compiles the patterns [`redact_text`] uses and runs them once, so that the first verdict's
/// redaction does not pay for it (issue 28: about 1.3 ms between the ready line and the verdict).
/// Called by a watch while it waits.
pub fn prepare() {
    let _ = redact_text("prepare: url=postgres://u:p@h/db token=hf_0123456789ab --api-key k");
}

/// A shell command line or a log line with what looks secret replaced: known secret values,
/// secret-shaped values, and the values of the forms that name a secret (`NAME=VALUE`,
/// `name='v'`, `"name": "v"`, `--flag v`, `Bearer t`; see `named.rs`).
pub fn redact_text(text: &str) -> String {
    let text = redact_values(text);
    named::redact_named(&text).into_owned()
}

/// `command` as a person can paste it into a shell, what looks secret redacted.
pub fn shown_command(command: &[String]) -> String {
    let redacted = redact_args(command);
    shlex::try_join(redacted.iter().map(String::as_str)).unwrap_or_else(|_| redacted.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_what_looks_secret() {
        let table = [
            ("HF_TOKEN", true),
            ("OPENAI_API_KEY", true),
            ("PGPASSWORD", true),
            ("PGPASS", true),
            ("GH_PAT", true),
            ("GITHUB_TOKEN", true),
            ("hf-token", true),
            ("api_key", true),
            ("requirepass", true),
            ("MAX_NUM_BATCHED_TOKENS", false),
            ("max-tokens", false),
            ("TOKENIZERS_PARALLELISM", false),
            ("DATABASE_URL", false),
            ("aws_secret_access_key", true),
            ("CUDA_VISIBLE_DEVICES", false),
            ("SGLANG_SM120_MMA_FLASHMLA", false),
            ("PATH", false),
            ("author", false),
            ("num_passes", false),
            ("keyboard_layout", false),
            ("MY_SERVICE_PASSWD", true),
            ("SESSION_SECRET", true),
            ("session", true),
            ("ssh_private_key", true),
            ("x-api-keys", true),
            ("BASIC_AUTH", true),
            ("oauth_token", true),
        ];
        for (name, secret) in table {
            assert_eq!(looks_secret(name), secret, "{name}");
        }
        let values = [
            ("HF_TOKEN", "hf_abc", REDACTED),
            ("PORT", "8000", "8000"),
            (
                "DATABASE_URL",
                "postgres://u:pw@h/db",
                "postgres://u:<redacted>@h/db",
            ),
            ("DATABASE_URL", "postgres://u@h/db", "postgres://u@h/db"),
            (
                "REDIS",
                "redis://:hunter2@localhost:6379/0",
                "redis://:<redacted>@localhost:6379/0",
            ),
            ("SOMETHING", "sk-proj-abcdefghijklmnop", REDACTED),
            ("X", "ghp_abcdefghijklmnopqrstu", REDACTED),
            ("X", "github_pat_11ABCDEFG0123456789_abc", REDACTED),
            ("X", "hf_abcdefghijklmnop", REDACTED),
            ("X", "xoxb-1234567890-abcdef", REDACTED),
            ("X", "glpat-abcdefghij1234", REDACTED),
            ("X", "AKIAIOSFODNN7EXAMPLE", REDACTED),
            (
                "X",
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig",
                REDACTED,
            ),
            (
                "MODEL",
                "Qwen/Qwen2.5-7B-Instruct",
                "Qwen/Qwen2.5-7B-Instruct",
            ),
            ("LOAD", "hf_transfer", "hf_transfer"),
            ("ASK", "sk-1", "sk-1"),
        ];
        for (name, value, want) in values {
            assert_eq!(shown_value(name, value), want, "{name}={value}");
        }
    }

    #[test]
    fn redacts_secret_flag_values() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let table = [
            (
                v(&["vllm", "serve", "m", "--api-key", "sk-1", "--port", "8000"]),
                v(&[
                    "vllm",
                    "serve",
                    "m",
                    "--api-key",
                    REDACTED,
                    "--port",
                    "8000",
                ]),
            ),
            (
                v(&["x", "--hf-token=hf_1", "--tp=2"]),
                v(&["x", &format!("--hf-token={REDACTED}"), "--tp=2"]),
            ),
            (v(&["x", "--keyfile"]), v(&["x", "--keyfile"])),
            (
                v(&["psql", "-password", "p"]),
                v(&["psql", "-password", REDACTED]),
            ),
            (v(&["a", "-", "--"]), v(&["a", "-", "--"])),
            (
                v(&["x", "--token", "t", "--secret=s", "--password", "p"]),
                v(&[
                    "x",
                    "--token",
                    REDACTED,
                    &format!("--secret={REDACTED}"),
                    "--password",
                    REDACTED,
                ]),
            ),
            (
                v(&["x", "--max-num-batched-tokens", "8192", "--max-tokens=5"]),
                v(&["x", "--max-num-batched-tokens", "8192", "--max-tokens=5"]),
            ),
            (
                v(&[
                    "env",
                    "GH_PAT=abc",
                    "PORT=1",
                    "psql",
                    "postgres://u:pw@h/db",
                ]),
                v(&[
                    "env",
                    &format!("GH_PAT={REDACTED}"),
                    "PORT=1",
                    "psql",
                    "postgres://u:<redacted>@h/db",
                ]),
            ),
            (
                v(&[
                    "x",
                    "ghp_abcdefghijklmnopqrstu",
                    "--url=https://a:b@c",
                    "--model",
                    "m",
                ]),
                v(&[
                    "x",
                    REDACTED,
                    "--url=https://a:<redacted>@c",
                    "--model",
                    "m",
                ]),
            ),
        ];
        for (input, want) in table {
            assert_eq!(redact_args(&input), want, "{input:?}");
        }
    }

    #[test]
    fn redacts_secrets_in_shell_text() {
        let table = [
            (
                "curl -H 'Authorization: Bearer sk-live-123' http://x",
                "curl -H 'Authorization: Bearer <redacted>' http://x",
            ),
            (
                "HF_TOKEN=hf_abc python bench.py --api-key k1 --port 8000",
                "HF_TOKEN=<redacted> python bench.py --api-key <redacted> --port 8000",
            ),
            (
                "redis-benchmark -p 6379 -q -t set,get",
                "redis-benchmark -p 6379 -q -t set,get",
            ),
            (
                "pgbench --password=pw1 -c 2",
                "pgbench --password=<redacted> -c 2",
            ),
            (
                "psql postgres://u:pw@h/db -c 'select 1'",
                "psql postgres://u:<redacted>@h/db -c 'select 1'",
            ),
            (
                "GH_PAT=abc curl -H 'x: ghp_abcdefghijklmnopqrstu' http://x",
                "GH_PAT=<redacted> curl -H 'x: <redacted>' http://x",
            ),
        ];
        for (input, want) in table {
            assert_eq!(redact_text(input), want, "{input}");
        }
    }
}
