//! The inner cause beats its wrapper (CONTRACT: root cause precedence). One line can name two
//! causes when one failure is reported inside another's message: NCCL's watchdog "Process group
//! watchdog thread terminated with exception: CUDA error: an illegal memory access was
//! encountered", vLLM's "Worker failed with error '...'", an engine core's "... failed: ...".
//! The wrapper says how the failure travelled; the text it quotes says what failed. So when a
//! line shows two or more named causes (not counting the generic `python_exception` and the
//! echoes), the innermost text that still shows one decides: the suffix after the last `: `
//! (or opening quote) whose own classification names a cause. The wrapper's signatures that the
//! inner text does not show are dropped from that line.
//!
//! Only lines with two competing named causes pay for the extra classifications (a few a
//! failure), never a healthy line.

use crate::classify::{Classifier, Hit, LineClass, Strength};
use crate::verdict::Signature;

/// Keeps of `class` (what `classifier` found on `text`) only the causes its innermost text
/// shows, when it shows two named causes or more.
pub(super) fn keep_inner_cause(classifier: &Classifier, text: &str, class: &mut LineClass) {
    let named = |h: &Hit| {
        h.strength != Strength::Echo
            && h.signature
                .is_some_and(|s| s != Signature::PythonException && !s.is_signal_class())
    };
    let mut causes: Vec<Signature> = class
        .hits
        .iter()
        .filter(|h| named(h))
        .filter_map(|h| h.signature)
        .collect();
    causes.dedup();
    if causes.len() < 2 {
        return;
    }
    for start in inner_starts(text) {
        let inner: Vec<Signature> = classifier
            .classify(&text[start..])
            .hits
            .iter()
            .filter(|h| named(h))
            .filter_map(|h| h.signature)
            .collect();
        if inner.is_empty() {
            continue;
        }
        if inner.len() < causes.len() || causes.iter().any(|c| !inner.contains(c)) {
            class
                .hits
                .retain(|h| !named(h) || h.signature.is_some_and(|s| inner.contains(&s)));
        }
        return;
    }
}

/// Where the texts a line wraps start, innermost (rightmost) first: after each `: ` and after
/// each opening quote (`'` or `"` after a space).
fn inner_starts(text: &str) -> impl Iterator<Item = usize> + '_ {
    let b = text.as_bytes();
    (2..b.len()).rev().filter(move |&i| {
        (b[i - 2] == b':' && b[i - 1] == b' ')
            || (b[i - 2] == b' ' && matches!(b[i - 1], b'\'' | b'"'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{ClassifierSpec, builtin_catalog};

    #[test]
    fn the_innermost_named_cause_of_a_line_is_kept() {
        let c = Classifier::new(&ClassifierSpec {
            signatures: builtin_catalog().signatures,
            ..ClassifierSpec::default()
        })
        .unwrap();
        let cases = [
            (
                "[PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered",
                Some(Signature::CudaError),
            ),
            (
                "RuntimeError: Worker failed with error 'CUDA error: an illegal memory access was encountered', please check the stack trace above",
                Some(Signature::CudaError),
            ),
            // Two causes in the same innermost text: both stay (precedence decides).
            (
                "RuntimeError: CUDA error: out of memory",
                Some(Signature::CudaOom),
            ),
            (
                "[2025-03-01 10:00:00 TP0] Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 1024.00 MiB.",
                Some(Signature::CudaOom),
            ),
            // One named cause: untouched.
            (
                "torch.distributed.DistBackendError: NCCL error in: NCCLUtils.cpp:77, unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
                Some(Signature::NcclError),
            ),
        ];
        for (text, want) in cases {
            let mut class = c.classify(text);
            keep_inner_cause(&c, text, &mut class);
            assert_eq!(class.strongest().and_then(|h| h.signature), want, "{text}");
        }
        // No catalog example changes its signature: the rule only ever picks, among a line's
        // causes, one its innermost text shows, and the catalog's examples are whole causes.
        let mut changed = Vec::new();
        for spec in builtin_catalog().signatures {
            for text in &spec.examples {
                let before = c.classify(text);
                let mut after = before.clone();
                keep_inner_cause(&c, text, &mut after);
                let name = |cl: &LineClass| cl.strongest().and_then(|h| h.signature);
                if name(&before) != name(&after) {
                    changed.push(format!(
                        "{text:?}: {:?} -> {:?}",
                        name(&before),
                        name(&after)
                    ));
                }
            }
        }
        assert!(changed.is_empty(), "{}", changed.join("\n"));
        // The wrapper's own signature is gone from the watchdog's line.
        let text = cases[0].0;
        let mut class = c.classify(text);
        keep_inner_cause(&c, text, &mut class);
        assert!(
            !class
                .hits
                .iter()
                .any(|h| h.signature == Some(Signature::NcclError)),
            "{class:?}"
        );
    }
}
