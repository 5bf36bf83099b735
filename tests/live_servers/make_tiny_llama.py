"""Writes a tiny random-weight Llama that real inference servers load, offline, in seconds.

    python make_tiny_llama.py OUT_DIR

OUT_DIR gets a Hugging Face model directory (config.json, model.safetensors, tokenizer.json and
its configs) for vLLM and sglang. The weights are random (seeded: the same files every run) and
the tokenizer is a byte-level BPE trained here on a few sentences, so nothing is fetched from a
hub. The model is tiny (two layers, hidden size 128, head size 64, which the CPU attention
backends support) but a real Llama: a completion request runs the whole model.
"""

import json
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SENTENCES = [
    "The server loads its weights, compiles its graphs and then answers requests.",
    "A health check that answers is not yet a server that completes a request.",
    "firedup follows the log, inspects the processes and ends with one verdict.",
    "Hello, world! How are you today? I am fine, thank you.",
    "0 1 2 3 4 5 6 7 8 9 10 100 1000",
]


def tokenizer(out: Path) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=384,
        special_tokens=["<s>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(SENTENCES * 20, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 0)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=512,
    )
    fast.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
    )
    fast.save_pretrained(out)
    return fast


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    tok = tokenizer(out)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=512,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    files = sorted(p.name for p in out.iterdir())
    print(json.dumps({"dir": str(out), "vocab": len(tok), "files": files}))


if __name__ == "__main__":
    main()
