//! GPU memory of the watched tree. (Stub: implemented in the probes change.)

/// GPU memory (MiB) held by the processes `pids`, from `nvidia-smi`. `Ok(None)` when there is no
/// `nvidia-smi`; `Err` when it exists but fails.
pub fn tree_memory_mib(pids: &[u32]) -> Result<Option<u64>, String> {
    let _ = pids;
    Ok(None)
}
