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


# Every decoder-only family with an adapter, as `config.model_type`, built from transformers' own config class.
FAMILIES = [
    "llama", "mistral", "qwen2", "gemma3_text", "gpt2", "gpt_neox",
    "qwen3", "qwen3_moe", "gemma", "gemma2", "phi", "phi3", "olmo", "olmo2", "olmoe", "mixtral", "granite",
    "stablelm", "starcoder2", "cohere", "smollm3", "glm", "gptj", "opt", "bloom", "falcon",
]  # fmt: skip

_FAMILY_SIZES = {
    # families whose config spells the sizes its own way
    "gpt2": dict(n_embd=64, n_layer=2, n_head=4, n_positions=128),
    "gptj": dict(n_embd=64, n_layer=2, n_head=4, n_positions=128, rotary_dim=8),
    "bloom": dict(hidden_size=64, n_layer=2, n_head=4),
    "opt": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128, word_embed_proj_dim=64),
    "falcon": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=128),
}
_FAMILY_EXTRAS = {
    # the quirk each family's adapter must handle, switched on where the default config leaves it off
    "granite": dict(residual_multiplier=0.25, embedding_multiplier=2.0, attention_multiplier=0.3, logits_scaling=4.0),
    "stablelm": dict(use_parallel_residual=True, qk_layernorm=True),
    "cohere": dict(use_qk_norm=True),
    "gemma3_text": dict(sliding_window=8, layer_types=["sliding_attention", "full_attention"]),
    "gemma2": dict(sliding_window=8),
    "phi": dict(partial_rotary_factor=0.5),
}
_MOE = dict(num_experts=4, num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)


def tiny_family(model_type: str, seed: int = 0, **overrides):
    """A tiny random causal LM of one family from `AutoConfig.for_model` (2 layers, d 64, 4 heads, 2 kv heads
    where the family has grouped queries, vocabulary 257), eager attention, eval mode."""
    from transformers import AutoConfig, AutoModelForCausalLM

    kw = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    if model_type in _FAMILY_SIZES:
        kw = {k: v for k, v in kw.items() if k in ("vocab_size", "pad_token_id", "bos_token_id", "eos_token_id")}
        kw.update(_FAMILY_SIZES[model_type])
    if model_type in ("gemma", "gemma2", "gemma3_text", "qwen3", "glm"):
        kw["head_dim"] = 16
    if model_type in ("mixtral", "qwen3_moe", "olmoe"):
        kw.update(_MOE)
    kw.update(_FAMILY_EXTRAS.get(model_type, {}))
    kw.update(overrides)
    if not hasattr(AutoConfig.for_model(model_type), "num_key_value_heads"):
        kw.pop("num_key_value_heads", None)  # no grouped queries in this family
    config = AutoConfig.for_model(model_type, **kw)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
