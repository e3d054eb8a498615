"""Small Llama-shaped decoders that differ only in where the normalisation sits: pre-norm, post-norm, sandwich.

All three are a `LlamaForCausalLM` (RMSNorm, SwiGLU, rotary) with the same parameters; only the
decoder layer's forward changes, so the core's Llama adapter hooks them unchanged:

- "pre": the stock layer, `x + attn(norm(x))`, then `x + mlp(norm(x))` (SmolLM2, Llama).
- "post": the original Transformer, `norm(x + attn(x))`, then `norm(x + mlp(x))`; the residual stream is
  re-normalised after every sub-layer, so nothing can grow along it.
- "sandwich": pre-norm plus a norm on each sub-layer's output before it is added (Gemma 2/3 style);
  two extra RMSNorm modules per layer (`post_attn_out_norm`, `post_mlp_out_norm`).

In "post" the layer's `post_attention_layernorm` is the norm after the attention add (so
`hook_resid_mid`, its input, is still the residual after attention) and `input_layernorm` the norm after
the MLP add.
"""

from __future__ import annotations

from typing import Literal

import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm

Variant = Literal["pre", "post", "sandwich"]
VARIANTS: tuple[str, ...] = ("pre", "post", "sandwich")


class PostNormLayer(LlamaDecoderLayer):
    """`norm(x + attn(x))`, then `norm(x + mlp(x))`."""

    def forward(self, hidden_states, attention_mask=None, position_ids=None, position_embeddings=None, **kwargs):
        kwargs.pop("cache", None)
        kwargs.pop("use_cache", None)
        attn, _ = self.self_attn(
            hidden_states=hidden_states,
            attention_mask=attention_mask,
            position_ids=position_ids,
            position_embeddings=position_embeddings,
            **kwargs,
        )
        h = self.post_attention_layernorm(hidden_states + attn)
        return self.input_layernorm(h + self.mlp(h))


class SandwichLayer(LlamaDecoderLayer):
    """`x + norm(attn(norm(x)))`, then `x + norm(mlp(norm(x)))`."""

    def forward(self, hidden_states, attention_mask=None, position_ids=None, position_embeddings=None, **kwargs):
        kwargs.pop("cache", None)
        kwargs.pop("use_cache", None)
        attn, _ = self.self_attn(
            hidden_states=self.input_layernorm(hidden_states),
            attention_mask=attention_mask,
            position_ids=position_ids,
            position_embeddings=position_embeddings,
            **kwargs,
        )
        h = hidden_states + self.post_attn_out_norm(attn)
        return h + self.post_mlp_out_norm(self.mlp(self.post_attention_layernorm(h)))


def small_config(
    vocab_size: int = 257, d_model: int = 128, n_layers: int = 4, n_heads: int = 4, ctx: int = 128
) -> LlamaConfig:
    """The shared shape of the experiment's models (byte vocabulary by default)."""
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        num_key_value_heads=n_heads,
        intermediate_size=4 * d_model,
        max_position_embeddings=ctx,
        tie_word_embeddings=True,
        rms_norm_eps=1e-6,
        architectures=["LlamaForCausalLM"],
    )
    config._attn_implementation = "eager"
    return config


def build_model(variant: Variant, config: LlamaConfig, seed: int = 0) -> LlamaForCausalLM:
    """A freshly initialised model of one variant; the same seed gives the same shared weights."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown normalisation variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    if variant == "pre":
        return model
    for layer in model.model.layers:
        if variant == "post":
            layer.__class__ = PostNormLayer
        else:
            layer.__class__ = SandwichLayer
            layer.post_attn_out_norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
            layer.post_mlp_out_norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
    return model
