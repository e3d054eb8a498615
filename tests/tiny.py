"""Tiny randomly initialised models of each supported architecture, built in the test (no files, no hub)."""

from __future__ import annotations

import torch
from transformers import (
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    GPT2Config,
    GPT2LMHeadModel,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
)

VOCAB = 257  # the byte tokenizer's size


def tiny_hf(arch: str, seed: int = 0, **overrides):
    """A tiny HF causal LM of one architecture family, eager attention, eval mode."""
    common = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=128,
    )
    if arch == "llama":
        config = LlamaConfig(**common, num_key_value_heads=2, tie_word_embeddings=True)
        cls = LlamaForCausalLM
    elif arch in ("gpt_neox", "gpt_neox_seq"):
        config = GPTNeoXConfig(
            **common,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
            use_parallel_residual=(arch == "gpt_neox"),
        )
        cls = GPTNeoXForCausalLM
    elif arch == "gpt2":
        config = GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=128)
        cls = GPT2LMHeadModel
    elif arch == "gemma3":
        config = Gemma3TextConfig(
            **common,
            num_key_value_heads=1,
            head_dim=32,
            sliding_window=8,
            layer_types=["sliding_attention", "full_attention"],
        )
        cls = Gemma3ForCausalLM
    else:
        raise ValueError(arch)
    for k, v in overrides.items():
        setattr(config, k, v)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    return cls(config).eval()


ARCHS = ["llama", "gpt_neox", "gpt_neox_seq", "gpt2", "gemma3"]
