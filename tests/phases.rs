//! A stall names the phase the server stopped in: startup logs of `tests/fixtures/phases` (see
//! `SOURCES.md` there) are replayed through `firedup run`, then the replay goes quiet, and the
//! verdict is `stalled` in the phase the profile's markers name (sglang's capture progress bar,
//! vLLM's engine initialisation, TGI's CUDA graph warmup).

use crate::common;
use common::{Env, fixture};

#[test]
fn a_stall_names_the_phase_its_server_stopped_in() {
    // (profile, file, phase)
    let cases = [
        ("sglang", "sglang_capture_bar.log", "capture_cuda_graph"),
        ("vllm", "vllm_engine_init.log", "init_engine"),
        ("tgi", "tgi_cuda_graphs.log", "capture_cuda_graph"),
    ];
    let env = Env::new();
    let replay = fixture("replay.sh");
    for (profile, file, phase) in cases {
        let log = fixture(&format!("phases/{file}"));
        let r = env.cmd_json(
            &[
                "run",
                "--json",
                "--profile",
                profile,
                "--no-probe",
                "--stall",
                "2s",
                "--",
                "sh",
                &replay,
                &log,
                "hang",
            ],
            &[],
        );
        assert_eq!(r.verdict(), "stalled", "{file}: {}", r.explain());
        assert_eq!(
            r.json["phase"].as_str(),
            Some(phase),
            "{file}: {}",
            r.explain()
        );
    }
}
