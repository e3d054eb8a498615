"""Helpers for the store tests: small random shards (no model) whose rows can be told apart."""

from __future__ import annotations

import torch

from interp.store import StoreMeta

CTX = 4
HOOKS = {"blocks.0.hook_resid_post": [8], "blocks.1.attn.hook_z": [2, 3]}


def make_meta(**changes) -> StoreMeta:
    fields = dict(
        model="tiny-gpt2",
        model_sha256="ab" * 32,
        hooks=HOOKS,
        dtype="float32",
        tokenizer="bytes",
        ctx_len=CTX,
        data={"source": "synthetic", "corpus_sha256": "cd" * 32},
    )
    return StoreMeta(**(fields | changes))


def shard_tensors(start: int, n_rows: int, hooks=HOOKS, dtype=torch.float32, seed: int = 0) -> dict[str, torch.Tensor]:
    """Rows start .. start+n_rows of a fake run; (seq, pos) identify a row: global row = seq * CTX + pos."""
    g = torch.Generator().manual_seed(seed * 1000 + start)
    rows = torch.arange(start, start + n_rows)
    out = {h: torch.randn((n_rows, *shape), generator=g).to(dtype) for h, shape in hooks.items()}
    out["tokens"] = torch.randint(0, 50_000, (n_rows,), generator=g, dtype=torch.int32)
    out["seq"] = (rows // CTX).to(torch.int64)
    out["pos"] = (rows % CTX).to(torch.int32)
    return out


def concat(parts: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}


def row_ids(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return batch["seq"] * CTX + batch["pos"].to(torch.int64)
