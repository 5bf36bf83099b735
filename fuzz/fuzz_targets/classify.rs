//! The classifier with the built-in catalog: no panic on any line, the same answer twice, a
//! progress fraction in 0..=1, hits in precedence order (`Hit::precedence`).
#![no_main]

use std::sync::OnceLock;

use firedup::classify::{Classifier, ClassifierSpec, ReadyLine, builtin_catalog};
use firedup::lines::clean_text;
use libfuzzer_sys::fuzz_target;

fn classifier() -> &'static Classifier {
    static C: OnceLock<Classifier> = OnceLock::new();
    C.get_or_init(|| {
        Classifier::new(&ClassifierSpec {
            signatures: builtin_catalog().signatures,
            ready_lines: vec![
                ReadyLine::new("fired up and ready to roll").unwrap(),
                ReadyLine::new(r"Uvicorn running on \S+").unwrap(),
            ],
            fail_lines: vec!["FATAL: .*".into()],
            noise: vec![r"^\s*$".into()],
            phases: vec![
                (
                    "load_weights".into(),
                    "Loading (weights|safetensors)".into(),
                ),
                ("capture_cuda_graph".into(), "Capture cuda graph".into()),
            ],
        })
        .expect("the built-in catalog compiles")
    })
}

fuzz_target!(|data: &[u8]| {
    let c = classifier();
    for text in [
        String::from_utf8_lossy(data).into_owned(),
        clean_text(data).into_owned(),
    ] {
        let a = c.classify(&text);
        let b = c.classify(&text);
        assert_eq!(a, b, "classification is not deterministic for {text:?}");
        if let Some(p) = a.progress {
            assert!(
                (0.0..=1.0).contains(&p),
                "progress {p} out of range for {text:?}"
            );
        }
        // Echoes last, whatever their signature: a named echo may follow a `--fail-line`.
        assert!(
            a.hits
                .windows(2)
                .all(|w| w[0].precedence() <= w[1].precedence()),
            "hits out of precedence order for {text:?}"
        );
        assert!(a.ready.iter().all(|&r| r < c.ready_count()));
        assert!(a.phase.is_none_or(|p| p < c.phase_names().len()));
    }
});
