"""Tiny Llama-architecture language models trained here, wrapped as `HookedModel`s (shared by the demos)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

import interp
from interp.contrib.common.fit import fit, make_optimizer


def tiny_lm(
    vocab: int, d_model: int = 64, n_layers: int = 2, n_heads: int = 4, ctx: int = 32, seed: int = 0
) -> interp.HookedModel:
    """A randomly initialised tiny Llama (eager attention), wrapped; no tokenizer (token ids in, logits out)."""
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        num_key_value_heads=n_heads,
        intermediate_size=4 * d_model,
        max_position_embeddings=ctx,
        tie_word_embeddings=False,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    return interp.HookedModel(LlamaForCausalLM(cfg))


def train_lm(
    model: interp.HookedModel,
    batch_fn: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]],
    steps: int,
    lr: float = 1e-3,
    seed: int = 0,
    log_every: int = 0,
) -> list[float]:
    """Next-token training where `batch_fn(gen) -> (ids [b, p], loss_mask [b, p])` marks the target tokens.

    loss_mask[:, t] = 1 means token t is predicted (from position t-1) and counts in the loss.
    """
    hf = model.hf_model.train()
    opt = make_optimizer(hf.parameters(), lr=lr, name="adamw", weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(seed)

    def loss_fn(_) -> torch.Tensor:
        ids, mask = batch_fn(gen)
        logits = hf(input_ids=ids, use_cache=False).logits[:, :-1]
        m = mask[:, 1:].float()
        ce = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten(), reduction="none")
        return (ce * m.flatten()).sum() / m.sum()

    def after_step(steps: int, loss: torch.Tensor) -> None:
        sched.step()
        if log_every and (steps - 1) % log_every == 0:
            print(f"step {steps - 1} loss {loss.item():.4f}", flush=True)

    losses = fit(opt, loss_fn, range(steps), record_losses=True, callback=after_step).losses
    hf.eval()
    return losses


def mean_over_runs(runs):
    """Mean of per-seed results, recursing into dicts; rounded to 4 places (shared by the demos)."""
    if isinstance(runs[0], dict):
        return {k: mean_over_runs([r[k] for r in runs]) for k in runs[0]}
    return round(sum(runs) / len(runs), 4)
