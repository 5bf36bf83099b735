//! Python tracebacks replayed through `firedup run`: the recorded logs of
//! `tests/fixtures/tracebacks` (see `SOURCES.md` there). A traceback is a structure: a source line
//! under a frame is not the error, the exception line is, and a chain of tracebacks is one failure
//! named by its most specific cause (a compiler wrapper does not hide the capture failure or the
//! full disk it wraps).

use crate::common;
use common::{Env, fixture};

#[test]
fn replayed_tracebacks_name_their_cause_on_the_right_line() {
    // (file, exit status, signature, decisive line number, decisive line starts with)
    let cases = [
        (
            "inductor_enospc.log",
            "1",
            "disk_full",
            62,
            "torch._inductor.exc.InductorError: OSError: [Errno 28] No space left on device",
        ),
        (
            "chained_permission.log",
            "1",
            "permission_denied",
            5,
            "PermissionError: [Errno 13] Permission denied",
        ),
        (
            "source_line_valueerror.log",
            "1",
            "python_exception",
            6,
            "ValueError: batch of 3 rows has no labels",
        ),
        // The FileNotFoundError was caught; the RuntimeError its handler raised is what ended the
        // script: after "During handling of the above exception" the last exception is the
        // error (issue 26; before, the first one was shown).
        (
            "during_handling.log",
            "1",
            "python_exception",
            24,
            "RuntimeError: mm: mat1 and mat2 shapes cannot be multiplied",
        ),
        (
            "compiled_raise.log",
            "1",
            "python_exception",
            9,
            "ValueError: step count 3 is odd",
        ),
        (
            "sglang_dynamo_capture.log",
            "1",
            "graph_capture",
            4,
            "torch._dynamo.exc.InternalTorchDynamoError: RuntimeError: Cannot call",
        ),
        (
            "compiler_wraps_capture.log",
            "1",
            "graph_capture",
            7,
            "RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture",
        ),
        // The same chain from a process that exits 0: the chain still names the capture.
        (
            "compiler_wraps_capture.log",
            "0",
            "graph_capture",
            7,
            "RuntimeError: Cannot call CUDAGeneratorImpl::current_seed",
        ),
    ];
    let env = Env::new();
    for (file, status, signature, number, starts) in cases {
        let log = fixture(&format!("tracebacks/{file}"));
        let r = env.replay(&log, status);
        assert_eq!(
            (r.verdict(), r.signature()),
            ("failed", Some(signature)),
            "{file} (exit {status}): {}",
            r.explain()
        );
        let line = &r.json["line"];
        assert_eq!(line["number"].as_u64(), Some(number), "{file}: {line}");
        let text = line["text"].as_str().unwrap_or("");
        assert!(text.starts_with(starts), "{file}: {text:?}");
    }
}
