//! Redacting secrets: env values whose names look like tokens, keys or passwords are never printed
//! or written to disk.

const SECRET_WORDS: [&str; 9] = [
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
];

/// Whether an env var name looks like it holds a secret (`HF_TOKEN`, `AWS_SECRET_ACCESS_KEY`,
/// `PGPASSWORD`, `OPENAI_API_KEY`).
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_WORDS.iter().any(|w| upper.contains(w))
}

pub const REDACTED: &str = "<redacted>";

/// The value to show for `name=value`.
pub fn shown_value<'a>(name: &str, value: &'a str) -> &'a str {
    if looks_secret(name) { REDACTED } else { value }
}

/// `command` with the values of secret-looking flags replaced (`--api-key sk-1` and
/// `--hf-token=hf_1` become `--api-key <redacted>`, `--hf-token=<redacted>`).
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
                Some(_) => out.push(arg.clone()),
                None => {
                    hide_next = looks_secret(&flag.replace('-', "_"));
                    out.push(arg.clone());
                }
            },
            _ => out.push(arg.clone()),
        }
    }
    out
}

/// A shell command line with what looks secret replaced: `Bearer`/`Basic` credentials,
/// `NAME=VALUE` for secret-looking names, and the values of secret-looking flags.
pub fn redact_text(text: &str) -> String {
    use std::sync::OnceLock;
    static RES: OnceLock<[regex::Regex; 3]> = OnceLock::new();
    let [cred, assign, flag] = RES.get_or_init(|| {
        [
            regex::Regex::new(r#"(?i)\b(bearer|basic|token)(\s+)[^\s'"]+"#).expect("valid"),
            regex::Regex::new(r#"\b([A-Za-z_][A-Za-z0-9_]*)=([^\s'"]+)"#).expect("valid"),
            regex::Regex::new(r#"(--?[A-Za-z][A-Za-z0-9_-]*)(\s+|=)([^\s'"-][^\s'"]*)"#)
                .expect("valid"),
        ]
    });
    let text = cred.replace_all(text, format!("$1$2{REDACTED}"));
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

/// `command` as a person can paste it into a shell, secret flag values redacted.
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
            ("aws_secret_access_key", true),
            ("CUDA_VISIBLE_DEVICES", false),
            ("SGLANG_SM120_MMA_FLASHMLA", false),
            ("PATH", false),
        ];
        for (name, secret) in table {
            assert_eq!(looks_secret(name), secret, "{name}");
        }
        assert_eq!(shown_value("HF_TOKEN", "hf_abc"), REDACTED);
        assert_eq!(shown_value("PORT", "8000"), "8000");
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
        ];
        for (input, want) in table {
            assert_eq!(redact_text(input), want, "{input}");
        }
    }
}
