//! What a calm record quotes is not the server's failure.
//!
//! A record whose level is not an error (INFO, WARNING, DEBUG; see `normalize/dress.rs`) may
//! quote text the server did not fail of: vLLM's request log `Received request cmpl-1: prompt:
//! '... torch.OutOfMemoryError: CUDA out of memory ...'` (the prompt as `%r`), a warning that
//! names what a client sent (`'OSError: [Errno 98] Address already in use'`), a JSON body
//! (`"error": "CUDA out of memory. Tried to allocate ..."`). Its fatal hits are the ones its
//! text shows outside quotes ([`calm_hits`]); an unquoted fatal line of any level, an ERROR or
//! CRITICAL record and a traceback are judged as before.
//!
//! Evidence stays whatever the quoting: it never ends a run on its own, names a cause only if
//! the process then ends badly, and a warning's quotes often hold the server's own error
//! (vLLM's `Failed to import from vllm._C with ImportError('libcudart.so.12: ...')`,
//! `HTTPSConnectionPool(host='huggingface.co', ...)`; the catalog examples below).
//!
//! A quote opens a span where it does not follow a word character (`can't` opens none) and
//! closes it where no word character follows it (Python's `%r` escapes its own quote as `\'`,
//! skipped). A span left open runs to the end of the line: a logged prompt cut by a line-length
//! cap is still a prompt.

use crate::classify::{Classifier, LineClass, Strength};

/// Keeps of `class` (what `classifier` found on `text`) only the fatal hits that `text` shows
/// outside its quoted spans, when `calm` (the record's level is not an error).
pub(super) fn calm_hits(classifier: &Classifier, text: &str, calm: bool, class: &mut LineClass) {
    if !calm || class.hits.is_empty() {
        return;
    }
    let Some(bare) = unquoted(text) else {
        return;
    };
    let outside = classifier.classify(&bare);
    class
        .hits
        .retain(|h| h.strength != Strength::Fatal || outside.hits.contains(h));
}

/// `text` with the content of each quoted span taken out (the quotes stay), or None when it
/// quotes nothing.
pub(super) fn unquoted(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let mut kept = 0; // `text[kept..]` is not yet in `out`
    let mut i = 0;
    while i < b.len() {
        let q = b[i];
        if !matches!(q, b'\'' | b'"') || (i > 0 && is_word(b[i - 1])) {
            i += 1;
            continue;
        }
        let end = closing(b, i + 1, q);
        let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
        o.push_str(&text[kept..=i]);
        match end {
            Some(c) => {
                o.push(char::from(q));
                kept = c + 1;
                i = c + 1;
            }
            None => {
                kept = b.len();
                break;
            }
        }
    }
    let mut o = out?;
    o.push_str(&text[kept..]);
    Some(o)
}

/// The offset of the quote `q` that closes a span whose content starts at `from`.
fn closing(b: &[u8], from: usize, q: u8) -> Option<usize> {
    let mut j = from;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            c if c == q && !b.get(j + 1).is_some_and(|n| is_word(*n)) => return Some(j),
            _ => j += 1,
        }
    }
    None
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::ClassifierSpec;
    use crate::normalize::normalize;

    #[test]
    fn quoted_spans_are_emptied() {
        let cases: &[(&str, Option<&str>)] = &[
            ("no quotes here", None),
            ("can't won't", None),
            ("a 'b' c", Some("a '' c")),
            (
                "prompt: 'it\\'s x', params: y",
                Some("prompt: '', params: y"),
            ),
            (
                "prompt: \"it's x\", params: y",
                Some("prompt: \"\", params: y"),
            ),
            ("{\"error\": \"boom\"}", Some("{\"\": \"\"}")),
            ("sent 'don't do it' then", Some("sent '' then")),
            ("cut: 'a prompt that goes on", Some("cut: '")),
            ("x='' y", Some("x='' y")),
        ];
        for (text, want) in cases {
            assert_eq!(unquoted(text).as_deref(), *want, "{text}");
        }
    }

    /// (raw line, whether a fatal hit remains): the level and the quoting decide.
    #[test]
    fn a_calm_record_is_not_failed_by_what_it_quotes() {
        let cases: &[(&str, bool)] = &[
            // vLLM's request log (vllm/entrypoints/logger.py: `prompt: %r`).
            (
                "INFO 03-01 10:00:01 [logger.py:39] Received request cmpl-abc-0: prompt: 'Why torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB?', params: SamplingParams(n=1), prompt_token_ids: [1, 2], lora_request: None.",
                false,
            ),
            (
                "(APIServer pid=7) INFO 03-01 10:00:01 [logger.py:39] Received request chatcmpl-1: prompt: \"<|user|>it's OSError: [Errno 98] Address already in use\", params: SamplingParams(n=1)",
                false,
            ),
            (
                "WARNING 03-01 10:00:02 [utils.py:10] Client sent 'OSError: [Errno 98] Address already in use' in its message",
                false,
            ),
            (
                "INFO:     client body {\"error\": \"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 MiB\"}",
                false,
            ),
            (
                "2025-03-01T10:00:00.000000Z  WARN text_generation_router: prompt='RuntimeError: CUDA error: out of memory'",
                false,
            ),
            // A prompt cut by a line-length cap: its quote never closes.
            (
                "INFO 03-01 10:00:01 [logger.py:39] Received request cmpl-2: prompt: 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
                false,
            ),
            // Still fatal: an error record quoting it, a bare exception line, an unquoted fatal
            // line in a calm record.
            (
                "ERROR 03-01 10:00:02 [core.py:700] 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 MiB'",
                true,
            ),
            (
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.",
                true,
            ),
            ("OSError: [Errno 98] Address already in use", true),
            (
                "WARNING 03-01 10:00:02 [worker.py:10] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 MiB for 'model'",
                true,
            ),
        ];
        let classifier = crate::test_classifier::classifier(&ClassifierSpec {
            signatures: crate::test_classifier::catalog().signatures.clone(),
            ..ClassifierSpec::default()
        })
        .unwrap();
        for (raw, fatal) in cases {
            let n = normalize(raw);
            let mut class = classifier.classify(&n.text);
            calm_hits(&classifier, &n.text, n.calm, &mut class);
            assert_eq!(class.is_fatal(), *fatal, "{raw}: {class:?}");
        }
    }
}

#[cfg(test)]
mod catalog_examples {
    use super::*;
    use crate::classify::ClassifierSpec;
    use crate::normalize::normalize;
    use crate::profile::builtin_profiles;

    /// The catalog's and the profiles' examples are real lines of the failures they name: a calm
    /// record among them (a warning that is evidence, like vLLM's "Failed to import from vllm._C
    /// with ImportError('...')") keeps the hits it had. (Had quotes taken every hit, not only
    /// fatal ones, two catalog examples would have lost their evidence.)
    #[test]
    fn calm_catalog_and_profile_examples_keep_their_hits() {
        let catalog = crate::test_classifier::catalog();
        let mut sets = vec![(catalog.signatures.clone(), catalog.signatures.clone())];
        for p in builtin_profiles() {
            let mut all = catalog.signatures.clone();
            all.extend(p.signatures.iter().cloned());
            sets.push((all, p.signatures.clone()));
        }
        let mut changed = Vec::new();
        for (all, examples_of) in sets {
            let classifier = crate::test_classifier::classifier(&ClassifierSpec {
                signatures: all,
                ..ClassifierSpec::default()
            })
            .unwrap();
            for s in &examples_of {
                for e in &s.examples {
                    let n = normalize(e);
                    let before = classifier.classify(&n.text);
                    let mut after = before.clone();
                    calm_hits(&classifier, &n.text, n.calm, &mut after);
                    if after.hits != before.hits {
                        changed.push(format!("{}: {e}", s.name));
                    }
                }
            }
        }
        assert!(changed.is_empty(), "{changed:#?}");
    }
}
