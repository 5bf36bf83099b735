//! Redacting secrets: what looks like a token, key or password is never printed or written to
//! disk (meta.json, `ps`, the history, reports, matrix tables), while the command itself runs with
//! the real values.
//!
//! A value is a secret by its name (env var or flag: `HF_TOKEN`, `GH_PAT`, `PGPASS`,
//! `--api-key`, `--requirepass`) or by its shape, whatever its name: the password of a URL
//! (`postgres://u:pw@h/db` → `postgres://u:<redacted>@h/db`), a well-known token prefix (`sk-`,
//! `ghp_`, `github_pat_`, `hf_`, `xoxb-`, `glpat-`, `AKIA`...), a JWT. [`redact_args`] (argv),
//! [`shown_value`] (one env value) and [`redact_text`] (a shell line) apply both everywhere.

use std::borrow::Cow;
use std::sync::OnceLock;

/// Name parts that make a value secret wherever they appear in the name.
const SECRET_WORDS: [&str; 8] = [
    "SECRET",
    "PASS",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
    "PRIVATE",
];

/// Whether an env var or flag name looks like it holds a secret (`HF_TOKEN`,
/// `AWS_SECRET_ACCESS_KEY`, `PGPASSWORD`, `PGPASS`, `GH_PAT`, `OPENAI_API_KEY`). A part that
/// ends in `TOKEN` counts (`HF_TOKEN`, `ACCESSTOKEN`), a count of tokens does not
/// (`MAX_NUM_BATCHED_TOKENS`, `TOKENIZER`); `PAT` counts as a whole part only (not `PATH`).
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_WORDS.iter().any(|w| upper.contains(w))
        || upper
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|part| part.ends_with("TOKEN") || part == "PAT")
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

/// `text` with secret-shaped values replaced: URL passwords and tokens with well-known prefixes.
pub fn redact_values(text: &str) -> Cow<'_, str> {
    let s = shapes();
    match s.url_password.replace_all(text, format!("$1:{REDACTED}@")) {
        Cow::Borrowed(_) => s.token.replace_all(text, REDACTED),
        Cow::Owned(t) => Cow::Owned(s.token.replace_all(&t, REDACTED).into_owned()),
    }
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

/// A shell command line with what looks secret replaced: `Bearer`/`Basic` credentials,
/// `NAME=VALUE` for secret-looking names, the values of secret-looking flags, and secret-shaped
/// values anywhere.
pub fn redact_text(text: &str) -> String {
    static RES: OnceLock<[regex::Regex; 3]> = OnceLock::new();
    let [cred, assign, flag] = RES.get_or_init(|| {
        [
            regex::Regex::new(r#"(?i)\b(bearer|basic|token)(\s+)[^\s'"]+"#).expect("valid"),
            regex::Regex::new(r#"\b([A-Za-z_][A-Za-z0-9_]*)=([^\s'"]+)"#).expect("valid"),
            regex::Regex::new(r#"(--?[A-Za-z][A-Za-z0-9_-]*)(\s+|=)([^\s'"-][^\s'"]*)"#)
                .expect("valid"),
        ]
    });
    let text = redact_values(text);
    let text = cred.replace_all(&text, format!("$1$2{REDACTED}"));
    let text = assign.replace_all(&text, |c: &regex::Captures<'_>| {
        if looks_secret(&c[1]) {
            format!("{}={REDACTED}", &c[1])
        } else {
            c[0].to_string()
        }
    });
    flag.replace_all(&text, |c: &regex::Captures<'_>| {
        if looks_secret(&c[1].trim_start_matches('-').replace('-', "_")) {
            format!("{}{}{REDACTED}", &c[1], &c[2])
        } else {
            c[0].to_string()
        }
    })
    .into_owned()
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
