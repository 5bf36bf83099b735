//! The names scripts depend on (README.md, "Verdicts and exit codes"): verdicts, failure signatures, exit codes, and
//! the JSON verdict object. Nothing here may be renamed; new variants may be added.

use serde::{Deserialize, Serialize};

/// How a watch ended. Exactly one per watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every readiness condition held (server mode).
    Ready,
    /// The job exited 0 (job mode).
    Succeeded,
    /// A failure was printed (a signature or a `--fail-line`), decisive line included.
    Failed,
    /// The process exited before ready, and no known failure was printed.
    Exited,
    /// A signal ended the process (OOM killer, SIGKILL, a segfault, ...).
    Killed,
    /// The command could not run, or nothing appeared at all.
    NeverStarted,
    /// No progress evidence for the stall window.
    Stalled,
    /// Not ready by the deadline (or a phase ran past its budget).
    TimedOut,
    /// firedup itself could not watch (log unreadable, a probe's own faults).
    MonitorError,
}

/// Exit code of firedup itself when it was called wrongly (no verdict).
pub const USAGE_EXIT_CODE: i32 = 2;

impl Verdict {
    /// The process exit code of `firedup run` / `firedup watch` for this verdict.
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Ready | Verdict::Succeeded => 0,
            Verdict::Failed => 1,
            Verdict::Exited => 3,
            Verdict::Killed => 4,
            Verdict::NeverStarted => 5,
            Verdict::Stalled => 6,
            Verdict::TimedOut => 124,
            Verdict::MonitorError => 7,
        }
    }

    /// Every verdict, in the order of the README.
    pub const ALL: [Verdict; 9] = [
        Verdict::Ready,
        Verdict::Succeeded,
        Verdict::Failed,
        Verdict::Exited,
        Verdict::Killed,
        Verdict::NeverStarted,
        Verdict::Stalled,
        Verdict::TimedOut,
        Verdict::MonitorError,
    ];

    /// The verdict called `name` (`timed_out`).
    pub fn from_name(name: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.as_str() == name)
    }

    /// The verdict's name, as in the JSON verdict object.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ready => "ready",
            Verdict::Succeeded => "succeeded",
            Verdict::Failed => "failed",
            Verdict::Exited => "exited",
            Verdict::Killed => "killed",
            Verdict::NeverStarted => "never_started",
            Verdict::Stalled => "stalled",
            Verdict::TimedOut => "timed_out",
            Verdict::MonitorError => "monitor_error",
        }
    }

    /// Verdicts after which the watched server is expected to keep running.
    pub fn leaves_server_running(self) -> bool {
        self == Verdict::Ready
    }
}

/// A named root cause. The declaration order is the precedence order of the README's signature list: when several
/// match in one failure, the one declared first wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Signature {
    /// CUDA out of memory.
    CudaOom,
    /// Host (CPU) memory ran out without the kernel OOM killer (`MemoryError`, ENOMEM).
    HostOom,
    /// CUDA graph capture failed.
    GraphCapture,
    /// NCCL (collective communication) failed.
    NcclError,
    /// A distributed rendezvous or collective timed out.
    DistTimeout,
    /// No usable GPU (driver, device busy or missing).
    GpuUnavailable,
    /// The model (weights, repository) could not be found.
    ModelNotFound,
    /// The model was found but cannot be loaded (corrupt weights, unknown architecture).
    ModelLoadFailed,
    /// The port to listen on is taken.
    PortInUse,
    /// A Python module or shared library could not be loaded.
    ImportError,
    /// No space left on a device.
    DiskFull,
    /// A file or resource was refused.
    PermissionDenied,
    /// The server rejected its configuration or arguments.
    ConfigError,
    /// A kernel or model compilation failed.
    CompileError,
    /// Another CUDA error.
    CudaError,
    /// A rank, worker or shard of a multi-process launch ended while its peers needed it, and no
    /// earlier cause was printed.
    RankExited,
    /// An uncaught Python exception (a traceback).
    PythonException,
    /// The kernel's OOM killer ended the process.
    OomKilled,
    /// SIGKILL, from someone else than the OOM killer.
    Sigkill,
    /// SIGSEGV.
    Segfault,
    /// SIGILL (also a launcher reporting signal 4 for a rank or shard).
    IllegalInstruction,
    /// SIGABRT (an assertion, a C++ exception not caught).
    Abort,
    /// SIGTERM, SIGINT or SIGHUP: asked to stop.
    Terminated,
}

impl Signature {
    /// Every signature, in precedence order.
    pub const ALL: [Signature; 23] = [
        Signature::CudaOom,
        Signature::HostOom,
        Signature::GraphCapture,
        Signature::NcclError,
        Signature::DistTimeout,
        Signature::GpuUnavailable,
        Signature::ModelNotFound,
        Signature::ModelLoadFailed,
        Signature::PortInUse,
        Signature::ImportError,
        Signature::DiskFull,
        Signature::PermissionDenied,
        Signature::ConfigError,
        Signature::CompileError,
        Signature::CudaError,
        Signature::RankExited,
        Signature::PythonException,
        Signature::OomKilled,
        Signature::Sigkill,
        Signature::Segfault,
        Signature::IllegalInstruction,
        Signature::Abort,
        Signature::Terminated,
    ];

    /// The signature's name, as in the JSON verdict object and the catalog.
    pub fn as_str(self) -> &'static str {
        match self {
            Signature::CudaOom => "cuda_oom",
            Signature::HostOom => "host_oom",
            Signature::GraphCapture => "graph_capture",
            Signature::NcclError => "nccl_error",
            Signature::DistTimeout => "dist_timeout",
            Signature::GpuUnavailable => "gpu_unavailable",
            Signature::ModelNotFound => "model_not_found",
            Signature::ModelLoadFailed => "model_load_failed",
            Signature::PortInUse => "port_in_use",
            Signature::ImportError => "import_error",
            Signature::DiskFull => "disk_full",
            Signature::PermissionDenied => "permission_denied",
            Signature::ConfigError => "config_error",
            Signature::CompileError => "compile_error",
            Signature::CudaError => "cuda_error",
            Signature::RankExited => "rank_exited",
            Signature::PythonException => "python_exception",
            Signature::OomKilled => "oom_killed",
            Signature::Sigkill => "sigkill",
            Signature::Segfault => "segfault",
            Signature::IllegalInstruction => "illegal_instruction",
            Signature::Abort => "abort",
            Signature::Terminated => "terminated",
        }
    }

    /// The signature called `name` (`cuda_oom`).
    pub fn from_name(name: &str) -> Option<Signature> {
        Signature::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Signatures that describe how a process ended (a signal) rather than a cause printed in the log.
    pub fn is_signal_class(self) -> bool {
        matches!(
            self,
            Signature::OomKilled
                | Signature::Sigkill
                | Signature::Segfault
                | Signature::IllegalInstruction
                | Signature::Abort
                | Signature::Terminated
        )
    }

    /// What a person should look at first for this cause.
    pub fn hint(self) -> &'static str {
        match self {
            Signature::CudaOom => {
                "GPU memory ran out: lower the memory fraction, batch size or context length"
            }
            Signature::HostOom => {
                "host (CPU) memory ran out: lower the batch, context or KV cache size, or free memory on the host"
            }
            Signature::GraphCapture => {
                "CUDA graph capture failed: try a smaller capture batch size or disable CUDA graphs / torch.compile to confirm"
            }
            Signature::NcclError => "a collective (NCCL) failed: rerun with NCCL_DEBUG=INFO",
            Signature::DistTimeout => {
                "distributed initialisation timed out: check that every rank started and the rendezvous address is reachable"
            }
            Signature::GpuUnavailable => {
                "no usable GPU: check nvidia-smi, CUDA_VISIBLE_DEVICES and the driver version"
            }
            Signature::ModelNotFound => {
                "the model could not be found or fetched: check the model id/path, HF_TOKEN and offline settings"
            }
            Signature::ModelLoadFailed => {
                "the model was found but cannot be loaded: check the weights files (corrupt or truncated?), the architecture and the format this server version supports"
            }
            Signature::PortInUse => {
                "the listen port is taken: stop the other process or choose another port"
            }
            Signature::ImportError => {
                "a module or shared library is missing: check the environment the command runs in"
            }
            Signature::DiskFull => "a disk is full: free space where the server writes",
            Signature::PermissionDenied => {
                "permission denied on a file, socket or device the server needs"
            }
            Signature::ConfigError => "the server rejected its arguments or configuration",
            Signature::CompileError => {
                "torch.compile / Triton compilation failed: try without torch.compile to confirm"
            }
            Signature::CudaError => {
                "a CUDA runtime error: rerun with CUDA_LAUNCH_BLOCKING=1 to locate it"
            }
            Signature::RankExited => {
                "a rank/worker ended while its peers still needed it: read that rank's own output above"
            }
            Signature::PythonException => "an uncaught Python exception: read the traceback",
            Signature::OomKilled => "the kernel OOM killer ended it: host memory ran out",
            Signature::Sigkill => "it was sent SIGKILL",
            Signature::Segfault => "it crashed with a segmentation fault",
            Signature::IllegalInstruction => {
                "it crashed on an illegal instruction (SIGILL): a binary built for another CPU or GPU architecture"
            }
            Signature::Abort => "it aborted (SIGABRT)",
            Signature::Terminated => "someone else sent it SIGTERM/SIGINT/SIGHUP",
        }
    }
}

impl std::fmt::Display for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the watched process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitInfo {
    /// The exit code, when it exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Whether it dumped core.
    pub core_dumped: bool,
}

impl ExitInfo {
    /// An exit with `code`.
    pub fn code(code: i32) -> Self {
        ExitInfo {
            code: Some(code),
            signal: None,
            core_dumped: false,
        }
    }
    /// An end by `signal`.
    pub fn signal(signal: i32, core_dumped: bool) -> Self {
        ExitInfo {
            code: None,
            signal: Some(signal),
            core_dumped,
        }
    }

    /// The signal that ended the process, counting a shell's `128+N` for a child killed by N.
    pub fn effective_signal(&self) -> Option<i32> {
        if let Some(s) = self.signal {
            return Some(s);
        }
        match self.code {
            Some(c) if (129..=159).contains(&c) => Some(c - 128),
            _ => None,
        }
    }

    /// In words: `exit code 1`, `signal 9 (SIGKILL)`.
    pub fn describe(&self) -> String {
        match (self.signal, self.code) {
            (Some(s), _) => format!(
                "signal {} ({}){}",
                s,
                signal_name(s),
                if self.core_dumped {
                    ", core dumped"
                } else {
                    ""
                }
            ),
            (None, Some(c)) => match self.effective_signal() {
                Some(s) => format!("exit code {c} (128+{s}: {})", signal_name(s)),
                None => format!("exit code {c}"),
            },
            (None, None) => "unknown exit status".to_string(),
        }
    }
}

/// The conventional name of a signal number (Linux).
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        31 => "SIGSYS",
        _ => "signal",
    }
}

/// The decisive log line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineRef {
    /// Its line number in the log.
    pub number: u64,
    /// Its text.
    pub text: String,
}

/// One phase of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseAt {
    /// The phase's name.
    pub phase: String,
    /// Seconds from launch (or attach) to its first line.
    pub at_s: f64,
}

/// What one readiness probe saw (additive JSON field `probes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    /// `port`, `http`, `request` or `notify`.
    pub kind: String,
    /// What was probed (`127.0.0.1:6379`, a URL, `NOTIFY_SOCKET`).
    pub target: String,
    /// Where the probe ran from (`local`).
    pub from: String,
    /// Seconds from launch (or attach) to the first success; null if it never succeeded.
    pub ready_s: Option<f64>,
    /// The last thing it saw, in words.
    pub last: String,
    /// Latency of the last success, in milliseconds.
    pub latency_ms: Option<f64>,
}

/// GPU memory held by the watched process tree (additive JSON field `gpu`), from nvidia-smi.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct GpuReport {
    /// The most the tree held at a sample (MiB).
    pub peak_mib: u64,
    /// What it held at the last sample (MiB).
    pub last_mib: u64,
    /// GPU memory still held by the tree's processes after teardown (null when not torn down).
    pub after_teardown_mib: Option<u64>,
    /// Why nvidia-smi could not tell, if it failed.
    pub error: Option<String>,
}

/// The verdict object printed by `--json` (README.md, "Verdicts and exit codes"), plus additive fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The version of this object's format ([`OUTCOME_SCHEMA`]; additive field).
    #[serde(default = "outcome_schema")]
    pub schema: u32,
    /// How the watch ended.
    pub verdict: Verdict,
    /// The failure signature that decided it, if any.
    pub signature: Option<Signature>,
    /// One sentence saying why (secret-shaped values redacted).
    pub reason: String,
    /// The decisive log line.
    pub line: Option<LineRef>,
    /// Lines around the decisive line.
    pub context: Vec<String>,
    /// The phase the server was in.
    pub phase: Option<String>,
    /// Seconds from launch (or attach) to the verdict.
    pub elapsed_s: f64,
    /// How the process ended, when it did.
    pub exit: Option<ExitInfo>,
    /// The watched process.
    pub pid: Option<u32>,
    /// The log followed.
    pub log: String,
    /// The run (`FIREDUP_RUN_ID`).
    pub run_id: String,
    /// When each phase first began.
    pub timeline: Vec<PhaseAt>,
    /// Other signatures seen in the same failure, by precedence (additive field).
    #[serde(default)]
    pub secondary: Vec<Signature>,
    /// Whether the server was left running (additive field).
    #[serde(default)]
    pub server_running: bool,
    /// Readiness probes and what each saw (additive field).
    #[serde(default)]
    pub probes: Vec<ProbeReport>,
    /// Seconds between the health probe and the real request succeeding (additive field).
    #[serde(default)]
    pub request_gap_s: Option<f64>,
    /// GPU memory of the watched tree, where nvidia-smi exists (additive field).
    #[serde(default)]
    pub gpu: Option<GpuReport>,
    /// Seconds from launch (or attach) to every readiness condition holding; null if never
    /// (additive field).
    #[serde(default)]
    pub ready_s: Option<f64>,
    /// The SSH host the server runs on, for `--host` (additive field; absent for local runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// An attach by `--log`: its run id names a history record (`firedup show`), not a run
    /// directory that `logs`, `stop` or `watch` could open. Not part of the JSON.
    #[serde(skip)]
    pub attached: bool,
    /// The log already held this many lines before the launch appended to it: this run's output
    /// (and what was judged) starts at this line of the file (additive field; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_from_line: Option<u64>,
    /// The name a person gave the run (`run --name`), else null (additive field).
    #[serde(default)]
    pub name: Option<String>,
    /// In a multi-process launch, the rank (shard, worker, task) where the root cause happened,
    /// else null (additive field).
    #[serde(default)]
    pub rank: Option<u32>,
}

/// The version of the JSON verdict's format: additive fields keep it, a change that breaks
/// readers bumps it.
pub const OUTCOME_SCHEMA: u32 = 1;

fn outcome_schema() -> u32 {
    OUTCOME_SCHEMA
}

#[cfg(test)]
mod tests;
