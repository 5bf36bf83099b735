"""Writes the tiny Llama of make_tiny_llama.py as a GGUF that llama-server loads, offline.

    PYTHONPATH=GGUF_PY python make_tiny_gguf.py HF_DIR OUT.gguf

HF_DIR is make_tiny_llama.py's output (config.json, model.safetensors, tokenizer.json);
GGUF_PY is the gguf package of the same llama.cpp sources as the server
(build_llama_server.sh leaves it in CACHE_DIR/llama.cpp-VERSION/gguf-py). Needs torch and
safetensors (the vLLM venv has both) and numpy.

Written with the gguf package directly rather than llama.cpp's convert_hf_to_gguf.py: the
converter knows BPE tokenizers by the hash of their pre-tokenizer output and refuses one trained
here. The tokenizer is written as what it is, a byte-level BPE: model "gpt2", pre-tokenizer
"default" (GPT-2's split regex, which is the byte-level pre-tokenizer the HF tokenizer uses).
The tensors get llama.cpp's Llama names and, for q and k, the converter's permutation (HF's
rotary layout to GGML's), in F32: the model is about 1 MB either way.
"""

import json
import sys
from pathlib import Path

import gguf
import numpy as np
from safetensors.torch import load_file


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    # convert_hf_to_gguf.py's LlamaModel.permute, for q (n_head) and k (n_kv_head).
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


NAMES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}


def gguf_name(hf: str) -> str:
    base = hf.removeprefix("model.").removesuffix(".weight")
    if base == "embed_tokens":
        return "token_embd.weight"
    if base == "norm":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    _, layer, rest = base.split(".", 2)
    return f"blk.{layer}.{NAMES[rest]}.weight"


def tokenizer(writer: gguf.GGUFWriter, hf_dir: Path, config: dict) -> None:
    tok = json.loads((hf_dir / "tokenizer.json").read_text())
    vocab = dict(tok["model"]["vocab"])
    special = set()
    for added in tok["added_tokens"]:
        vocab[added["content"]] = added["id"]
        if added["special"]:
            special.add(added["id"])
    size = config["vocab_size"]
    by_id = {i: t for t, i in vocab.items()}
    tokens, types = [], []
    for i in range(size):
        if i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(config["bos_token_id"])
    writer.add_eos_token_id(config["eos_token_id"])
    writer.add_unk_token_id(vocab["<unk>"])
    writer.add_add_bos_token(True)
    template = hf_dir / "chat_template.jinja"
    if template.exists():
        writer.add_chat_template(template.read_text())


def main() -> None:
    hf_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
    config = json.loads((hf_dir / "config.json").read_text())
    n_head, n_kv = config["num_attention_heads"], config["num_key_value_heads"]
    rope = config.get("rope_parameters") or {}
    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name("firedup tiny llama")
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_kv)
    writer.add_rope_dimension_count(config["head_dim"])
    writer.add_rope_freq_base(rope.get("rope_theta", config.get("rope_theta", 10000.0)))
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_vocab_size(config["vocab_size"])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    tokenizer(writer, hf_dir, config)
    for name, tensor in sorted(load_file(str(hf_dir / "model.safetensors")).items()):
        data = tensor.float().numpy()
        if name.endswith("self_attn.q_proj.weight"):
            data = permute(data, n_head)
        elif name.endswith("self_attn.k_proj.weight"):
            data = permute(data, n_kv)
        writer.add_tensor(gguf_name(name), np.ascontiguousarray(data, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(json.dumps({"gguf": str(out), "bytes": out.stat().st_size}))


if __name__ == "__main__":
    main()
