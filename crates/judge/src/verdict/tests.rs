//! The names scripts depend on: exit codes, verdict and signature names, and signal decoding.

use super::*;

#[test]
fn exit_codes_follow_the_contract() {
    let table = [
        (Verdict::Ready, 0),
        (Verdict::Succeeded, 0),
        (Verdict::Failed, 1),
        (Verdict::Exited, 3),
        (Verdict::Killed, 4),
        (Verdict::NeverStarted, 5),
        (Verdict::Stalled, 6),
        (Verdict::TimedOut, 124),
        (Verdict::MonitorError, 7),
    ];
    for (v, code) in table {
        assert_eq!(v.exit_code(), code, "{v}");
        let json = serde_json::to_string(&v).unwrap();
        assert_eq!(json, format!("\"{}\"", v.as_str()));
    }
}

#[test]
fn signature_names_round_trip_in_precedence_order() {
    let names = [
        "cuda_oom",
        "host_oom",
        "graph_capture",
        "nccl_error",
        "dist_timeout",
        "gpu_unavailable",
        "model_not_found",
        "model_load_failed",
        "port_in_use",
        "import_error",
        "disk_full",
        "permission_denied",
        "config_error",
        "compile_error",
        "cuda_error",
        "rank_exited",
        "python_exception",
        "oom_killed",
        "sigkill",
        "segfault",
        "illegal_instruction",
        "abort",
        "terminated",
    ];
    for (i, name) in names.iter().enumerate() {
        let s = Signature::from_name(name).unwrap();
        assert_eq!(s, Signature::ALL[i]);
        assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{name}\""));
    }
    assert!(Signature::CudaOom < Signature::GraphCapture);
}

#[test]
fn shell_exit_codes_decode_signals() {
    assert_eq!(ExitInfo::code(137).effective_signal(), Some(9));
    assert_eq!(ExitInfo::code(139).effective_signal(), Some(11));
    assert_eq!(ExitInfo::code(1).effective_signal(), None);
    assert_eq!(ExitInfo::code(128).effective_signal(), None);
    assert_eq!(ExitInfo::signal(15, false).effective_signal(), Some(15));
}
