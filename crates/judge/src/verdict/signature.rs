//! The failure signatures: the named root causes, in the contract's precedence order.

use serde::{Deserialize, Serialize};

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
    /// A batch scheduler ended the job at its time limit (Slurm TIMEOUT).
    TimeLimit,
    /// The job's node failed under the scheduler (Slurm NODE_FAIL).
    NodeFail,
    /// The scheduler preempted the job (Slurm PREEMPTED).
    Preempted,
    /// The job was cancelled through the scheduler by someone other than firedup (Slurm
    /// CANCELLED).
    Cancelled,
}

impl Signature {
    /// Every signature, in precedence order.
    pub const ALL: [Signature; 27] = [
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
        Signature::TimeLimit,
        Signature::NodeFail,
        Signature::Preempted,
        Signature::Cancelled,
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
            Signature::TimeLimit => "time_limit",
            Signature::NodeFail => "node_fail",
            Signature::Preempted => "preempted",
            Signature::Cancelled => "cancelled",
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
                | Signature::TimeLimit
                | Signature::NodeFail
                | Signature::Preempted
                | Signature::Cancelled
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
            Signature::OomKilled => {
                "the kernel OOM killer ended it: its memory cgroup's limit or the host's memory ran out"
            }
            Signature::Sigkill => "it was sent SIGKILL",
            Signature::Segfault => "it crashed with a segmentation fault",
            Signature::IllegalInstruction => {
                "it crashed on an illegal instruction (SIGILL): a binary built for another CPU or GPU architecture"
            }
            Signature::Abort => "it aborted (SIGABRT)",
            Signature::Terminated => "someone else sent it SIGTERM/SIGINT/SIGHUP",
            Signature::TimeLimit => {
                "the scheduler ended the job at its time limit: ask for more time (--time) or make it start faster"
            }
            Signature::NodeFail => "the job's node failed: resubmit, and tell the cluster's admins",
            Signature::Preempted => {
                "the scheduler preempted the job for another one: resubmit, or use a partition or QOS that is not preempted"
            }
            Signature::Cancelled => {
                "someone else cancelled the job through the scheduler (scancel)"
            }
        }
    }
}

impl std::fmt::Display for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
