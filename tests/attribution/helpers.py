"""Tiny looped models and checkpoints shared by the attribution tests."""

from __future__ import annotations

import torch

from attribution.looped import random_looped_gpt
from attribution.tracin import Checkpoint


def tiny_looped(seed: int = 0, loops: int = 4, vocab: int = 32, ctx: int = 16):
    return random_looped_gpt(
        seed=seed,
        vocab_size=vocab,
        hidden_size=32,
        num_attention_heads=2,
        num_hidden_layers=loops,
        intermediate_size=64,
        max_position_embeddings=ctx,
    )


def trained_checkpoints(model, steps=(5, 10), lr=1e-2, seed=0, vocab=32, ctx=16):
    """A few AdamW steps on random tokens; in-memory checkpoints at the given steps."""
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, vocab, (64, ctx), generator=g)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    out = []
    model.train()
    for step in range(1, max(steps) + 1):
        batch = data[torch.randint(0, len(data), (8,), generator=g)]
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step in steps:
            out.append(Checkpoint(None, lr, {k: v.detach().clone() for k, v in model.state_dict().items()}))
    model.eval()
    return out


def exact_ggn(model, theta, params, ids):
    """The slow exact reference for EK-FAC: mean over sequences of sum_l J_l^T (diag p - p p^T) J_l, with
    J = d logits / d theta built row by row. `params` maps parameter names of `model.hf_model` to tensors
    that depend on `theta` (the slice under test spliced into the frozen rest), fed through `functional_call`."""
    from torch.func import functional_call

    total = 0
    for b in range(len(ids)):
        logits = functional_call(model.hf_model, params, kwargs={"input_ids": ids[b : b + 1]}).logits[0, :-1]
        p = logits.softmax(-1).detach()
        for pos in range(logits.shape[0]):
            jac = torch.stack(
                [
                    torch.autograd.grad(logits[pos, y], theta, retain_graph=True)[0].flatten()
                    for y in range(logits.shape[1])
                ]
            )  # [V, n]
            total = total + jac.T @ (torch.diag(p[pos]) - torch.outer(p[pos], p[pos])) @ jac
    return total / len(ids)
