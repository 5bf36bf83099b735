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
}
