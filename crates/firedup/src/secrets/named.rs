//! Secrets in text by the name they are given: `MY_SERVICE_PASSWD=hunter2`, `api_key='k'`
//! (sglang's `server_args=ServerArgs(...)`, Python's `Namespace(...)`), `"token": "t"` (JSON),
//! `{'api_key': 'k'}` (a dict's repr, vLLM's "non-default args"), `--api-key k`,
//! `--hf-token=t`, `Authorization: Bearer t`. The value goes when the name says secret
//! ([`looks_secret`](super::looks_secret)); `None`, `null`, booleans and empty values say nothing
//! and stay.

use std::borrow::Cow;
use std::sync::OnceLock;

use super::{REDACTED, looks_secret};

struct Forms {
    /// `name='v'`, `name="v"`, `'name': 'v'`, `"name": "v"`: prefix, name (group 1 or 2), value
    /// with its quotes.
    quoted: regex::Regex,
    /// `name=v`.
    assign: regex::Regex,
    /// `--flag v`, `--flag=v`, the flag at the start or after a space, quote, bracket or comma
    /// (not the `-key value` inside `non-key value`).
    flag: regex::Regex,
    /// `Bearer t`, `Basic t`, `Authorization: token t` (a bare "token" is a word of every LLM
    /// server's log: "token budget" keeps its budget).
    credential: regex::Regex,
}

fn forms() -> &'static Forms {
    static FORMS: OnceLock<Forms> = OnceLock::new();
    FORMS.get_or_init(|| Forms {
        quoted: regex::Regex::new(concat!(
            r#"(?:\b([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*|["']([A-Za-z_][A-Za-z0-9_.-]*)["']\s*:\s*)"#,
            r#"('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"#
        ))
        .expect("valid"),
        assign: regex::Regex::new(r#"\b([A-Za-z_][A-Za-z0-9_]*)=([^\s'"]+)"#).expect("valid"),
        flag: regex::Regex::new(
            r#"(^|[\s'"(\[,])(--?[A-Za-z][A-Za-z0-9_-]*)(\s+|=)([^\s'"-][^\s'"]*)"#,
        )
        .expect("valid"),
        credential: regex::Regex::new(
            r#"(?i)\b(bearer|basic|authorization:\s*token)(\s+)[^\s'"]+"#,
        )
        .expect("valid"),
    })
}

/// Whether a name (of a variable, key or flag: `-`, `.` count as `_`) says its value is secret.
fn secret_name(name: &str) -> bool {
    looks_secret(&name.trim_start_matches('-').replace(['-', '.'], "_"))
}

/// Whether a value says nothing that could be a secret.
fn says_nothing(value: &str) -> bool {
    matches!(
        value,
        "" | "None" | "null" | "nil" | "True" | "False" | "true" | "false" | REDACTED
    )
}

/// `text` with the values of its secret-named forms replaced.
pub(super) fn redact_named(text: &str) -> Cow<'_, str> {
    let f = forms();
    let mut out = Cow::Borrowed(text);
    let quoted = f.quoted.replace_all(&out, |c: &regex::Captures<'_>| {
        let name = c.get(1).or_else(|| c.get(2)).map_or("", |m| m.as_str());
        let value = &c[3];
        let inner = &value[1..value.len() - 1];
        if secret_name(name) && !says_nothing(inner) {
            let q = &value[..1];
            let whole = &c[0];
            format!("{}{q}{REDACTED}{q}", &whole[..whole.len() - value.len()])
        } else {
            c[0].to_string()
        }
    });
    if let Cow::Owned(t) = quoted {
        out = Cow::Owned(t);
    }
    let assign = f.assign.replace_all(&out, |c: &regex::Captures<'_>| {
        if secret_name(&c[1]) && !says_nothing(c[2].trim_end_matches([',', ')', ';'])) {
            format!("{}={REDACTED}", &c[1])
        } else {
            c[0].to_string()
        }
    });
    if let Cow::Owned(t) = assign {
        out = Cow::Owned(t);
    }
    let flag = f.flag.replace_all(&out, |c: &regex::Captures<'_>| {
        if secret_name(&c[2]) && !says_nothing(&c[4]) {
            format!("{}{}{}{REDACTED}", &c[1], &c[2], &c[3])
        } else {
            c[0].to_string()
        }
    });
    if let Cow::Owned(t) = flag {
        out = Cow::Owned(t);
    }
    let cred = f.credential.replace_all(&out, format!("$1$2{REDACTED}"));
    if let Cow::Owned(t) = cred {
        out = Cow::Owned(t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_forms_lose_their_values() {
        let table = [
            (
                "MY_SERVICE_PASSWD=hunter2x AWS_SECRET_ACCESS_KEY=wJalrXUtn PORT=8000",
                "MY_SERVICE_PASSWD=<redacted> AWS_SECRET_ACCESS_KEY=<redacted> PORT=8000",
            ),
            (
                "[2025-03-01 10:00:00] server_args=ServerArgs(model_path='m', api_key='k3y-v4lue', port=30000, admin_api_key=None)",
                "[2025-03-01 10:00:00] server_args=ServerArgs(model_path='m', api_key='<redacted>', port=30000, admin_api_key=None)",
            ),
            (
                "non-default args: {'model': 'm', 'api_key': 'k3y', \"hf_token\": \"t0k\"}",
                "non-default args: {'model': 'm', 'api_key': '<redacted>', \"hf_token\": \"<redacted>\"}",
            ),
            (
                "Namespace(password=\"it\\\"s\", max_tokens=5, auth_token=None)",
                "Namespace(password=\"<redacted>\", max_tokens=5, auth_token=None)",
            ),
            (
                "args: --api-key k3y --port 1",
                "args: --api-key <redacted> --port 1",
            ),
            ("--hf-token=t0k", "--hf-token=<redacted>"),
            (
                "Authorization: Bearer abc",
                "Authorization: Bearer <redacted>",
            ),
            (
                "max_num_batched_tokens=8192 use_auth=True",
                "max_num_batched_tokens=8192 use_auth=True",
            ),
            ("nothing here", "nothing here"),
            // Words of a log, not forms that name a secret.
            ("the token budget is 8192", "the token budget is 8192"),
            (
                "a non-key value, pre-auth step",
                "a non-key value, pre-auth step",
            ),
            (
                "curl -H 'Authorization: token ghp_x' -H \"x-api-key: k\"",
                "curl -H 'Authorization: token <redacted>' -H \"x-api-key: k\"",
            ),
        ];
        for (input, want) in table {
            assert_eq!(redact_named(input), want, "{input}");
        }
    }
}
