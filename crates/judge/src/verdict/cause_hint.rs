//! The hint for a cause as its decisive line tells it. A signature's own hint
//! ([`Signature::hint`]) is the advice for its usual case; some messages of the same signature need
//! the opposite advice. A KV cache that cannot hold the context length is `cuda_oom`, yet lowering the
//! memory fraction makes it worse. The rules here match the shape of such messages (the words
//! the servers print for that case, not one log) and fall back to the signature's hint.

use super::Signature;

/// One message shape with its own advice: every needle (lowercase) occurs in the line.
struct ShapeHint {
    signature: Signature,
    /// Alternatives: the line matches when every needle of any one of them occurs in it.
    any_of: &'static [&'static [&'static str]],
    hint: &'static str,
}

/// First match wins: put the narrower shape first.
const SHAPES: &[ShapeHint] = &[
    // sglang: "Capture cuda graph failed: CUDA out of memory ... set --mem-fraction-static to a
    // smaller value ... set --cuda-graph-max-bs to a smaller value".
    ShapeHint {
        signature: Signature::CudaOom,
        any_of: &[&["capture cuda graph failed", "out of memory"]],
        hint: "GPU memory ran out while capturing CUDA graphs: lower --mem-fraction-static or --cuda-graph-max-bs",
    },
    // vLLM: the KV cache left by the memory fraction cannot hold one sequence of the context length.
    ShapeHint {
        signature: Signature::CudaOom,
        any_of: &[
            &["larger than the maximum number of tokens that can be stored in kv cache"],
            &["larger than the available kv cache memory"],
            &["no available memory for the cache blocks"],
        ],
        hint: "the KV cache is too small for the context length: raise the memory fraction (--gpu-memory-utilization) or lower the context length (--max-model-len)",
    },
    // sglang: no room left for the KV cache pool after the weights.
    ShapeHint {
        signature: Signature::CudaOom,
        any_of: &[&["not enough memory", "increase --mem-fraction-static"]],
        hint: "no GPU memory is left for the KV cache: raise the memory fraction (--mem-fraction-static) or lower the context length (--context-length)",
    },
    // TGI's warmup: the prefill batch or the total tokens do not fit.
    ShapeHint {
        signature: Signature::CudaOom,
        any_of: &[&["not enough memory to handle", "prefill tokens"]],
        hint: "the prefill batch does not fit in GPU memory: lower --max-batch-prefill-tokens",
    },
    ShapeHint {
        signature: Signature::CudaOom,
        any_of: &[&["not enough memory to handle", "max_total_tokens"]],
        hint: "the total tokens do not fit in GPU memory: lower --max-total-tokens",
    },
    // vLLM at startup: other processes already hold the GPU memory the fraction asks for.
    ShapeHint {
        signature: Signature::CudaOom,
        any_of: &[&[
            "free memory on device",
            "less than desired gpu memory utilization",
        ]],
        hint: "other processes hold GPU memory: free the GPU or lower the memory fraction (--gpu-memory-utilization)",
    },
];

impl Signature {
    /// What a person should look at first for this cause, told by its decisive line `line`.
    pub fn hint_for_line(self, line: &str) -> &'static str {
        let line = line.to_lowercase();
        SHAPES
            .iter()
            .filter(|s| s.signature == self)
            .find(|s| {
                s.any_of
                    .iter()
                    .any(|needles| needles.iter().all(|n| line.contains(n)))
            })
            .map_or_else(|| self.hint(), |s| s.hint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hint_for_line_table() {
        let cases: &[(Signature, &str, &str)] = &[
            (
                Signature::CudaOom,
                "ValueError: The model's max seq len (131072) is larger than the maximum number of tokens that can be stored in KV cache (20464). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
                "raise the memory fraction (--gpu-memory-utilization) or lower the context length (--max-model-len)",
            ),
            (
                Signature::CudaOom,
                "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.43 GiB).",
                "raise the memory fraction (--gpu-memory-utilization) or lower the context length (--max-model-len)",
            ),
            (
                Signature::CudaOom,
                "(EngineCore_0 pid=12) ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
                "raise the memory fraction (--gpu-memory-utilization)",
            ),
            (
                Signature::CudaOom,
                "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 1024.00 MiB.",
                "lower --mem-fraction-static or --cuda-graph-max-bs",
            ),
            (
                Signature::CudaOom,
                "[2025-03-01 10:00:00 TP0] RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
                "raise the memory fraction (--mem-fraction-static)",
            ),
            (
                Signature::CudaOom,
                "Server error: Not enough memory to handle 4096 prefill tokens. You need to decrease `--max-batch-prefill-tokens`",
                "lower --max-batch-prefill-tokens",
            ),
            (
                Signature::CudaOom,
                "ValueError: Free memory on device (10.2/79.1 GiB) on startup is less than desired GPU memory utilization (0.9, 71.2 GiB).",
                "free the GPU or lower the memory fraction",
            ),
            // The usual case keeps the signature's own hint.
            (
                Signature::CudaOom,
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                "lower the memory fraction, batch size or context length",
            ),
            // A shape of one signature does not reword another's.
            (
                Signature::GraphCapture,
                "RuntimeError: Capture cuda graph failed: operation not permitted when stream is capturing",
                "try a smaller capture batch size",
            ),
        ];
        for (sig, line, want) in cases {
            let got = sig.hint_for_line(line);
            assert!(got.contains(want), "{sig} {line:?}: {got:?} lacks {want:?}");
        }
        // The generic cuda_oom advice never reaches a KV-cache-too-small message.
        assert!(
            !Signature::CudaOom
                .hint_for_line(cases[0].1)
                .contains("lower the memory fraction")
        );
    }
}
