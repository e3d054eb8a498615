"""A gradient store held open: the store, its model, projector and preconditioner loaded once, so each further
query set costs its own gradients and the search, not a start-up.

    from attribution.resident import GradientIndex

    index = GradientIndex("runs/grads", precondition="diag")     # QueryConfig's settings, or a QueryConfig
    first = index.query("tokens:q1.safetensors", top=10)          # the summary `interp attribute query` prints
    again = index.query(query_tokens)                             # a [n, ctx] token tensor works too

`interp attribute query --queries A --queries B ...` answers several query sets through one index. When the
store's rows take under `max_resident_bytes` (2 GB) they stay in memory and a search is one matmul; otherwise (and
for a single query set, `query_store`, where holding them buys nothing) each search streams the shards, one in
memory at a time.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from attribution.gradstore import (
    HOOK,
    Projection,
    QueryConfig,
    _check_compatible,
    _check_projection,
    _preconditioner,
    _projector,
    faiss_topk,
    open_gradient_store,
    query_vectors,
    read_gradient_shard,
    streamed_topk,
    write_results,
)


class GradientIndex:
    """One gradient store, ready for any number of query sets (see the module doc)."""

    def __init__(self, store: Any, opened: Any = None, max_resident_bytes: int = 2 << 30, **settings: Any):
        cfg = store if isinstance(store, QueryConfig) else QueryConfig(store=str(store), queries="", **settings)
        self.cfg = cfg
        self.store = opened or open_gradient_store(cfg.store)
        data = self.store.meta.data
        sp = data["projection"]
        _check_projection(cfg, self.store)  # before the model is loaded
        modules = data["modules"] if cfg.modules is None else list(cfg.modules)
        self.model, self.proj = _projector(
            cfg.model or self.store.meta.model,
            cfg.device,
            modules,
            Projection(sp["kind"], int(sp["dim"]), int(sp["seed"])),
        )
        _check_compatible(cfg, self.store, self.model, self.proj)
        self.pre = _preconditioner(cfg, self.store, self.model, self.proj)
        self.rows: Tensor | None = None
        self.seq: Tensor | None = None
        if not cfg.faiss and len(self.store) * self.store.hooks[HOOK][0] * 4 <= max_resident_bytes:
            shards = [read_gradient_shard(self.store, i) for i in self.store.shard_indices]
            self.rows = torch.cat([sh[HOOK] for sh in shards])
            self.seq = torch.cat([sh["seq"] for sh in shards])

    def search(self, q: Tensor, top: int) -> tuple[Tensor, Tensor]:
        """(scores, training rows) [n_query, top] of the projected query vectors `q`."""
        if self.rows is None:
            return (faiss_topk if self.cfg.faiss else streamed_topk)(self.store, q, top)
        s, pos = (q @ self.rows.T).topk(min(top, len(self.rows)), dim=1)
        return s, self.seq[pos]

    def query_measurement(
        self, measure: Any, queries: str | Tensor, top: int | None = None, out: str | None = None
    ) -> dict:
        """Top-k training rows per prompt for a measurement (`attribution.measurements`: an SAE latent, a
        direction) in place of the loss: rows whose gradient step would raise it most."""
        import copy

        from attribution.capture import GradientFeaturizer
        from attribution.measurements import as_loss

        exact = self.proj.exact
        proj = copy.copy(self.proj)
        proj.exact = GradientFeaturizer(exact.groups, exact.sketch_dim, exact.seed, loss_fn=as_loss(measure))
        held, self.proj = self.proj, proj
        try:
            return self.query(queries, top, out)
        finally:
            self.proj = held

    def query(self, queries: str | Tensor, top: int | None = None, out: str | None = None) -> dict:
        """Top-k training rows per query: a query spec (as `--queries`) or token ids [n, ctx]."""
        from attribution.jobs import load_tokens

        top = self.cfg.top if top is None else top
        if top <= 0:
            raise ValueError(f"--top must be positive, got {top}")
        t0 = time.perf_counter()
        cfg = replace(self.cfg, queries=queries if isinstance(queries, str) else "(tokens)", out=out, top=top)
        if isinstance(queries, str):
            tokens, _ = load_tokens(
                queries, self.model.tokenizer, cfg.ctx_len, cfg.max_queries, 1, self.model, "--queries"
            )
        else:
            tokens = torch.as_tensor(queries, dtype=torch.long)
        t1 = time.perf_counter()
        q = query_vectors(cfg, self.store, self.model, self.proj, tokens, pre=self.pre)
        t2 = time.perf_counter()
        scores, rows = self.search(q, top)
        t3 = time.perf_counter()
        summary = {
            "store": str(self.store.path),
            "n_train": len(self.store),
            "n_queries": len(tokens),
            "top": top,
            "precondition": cfg.precondition,
            "search": "faiss" if cfg.faiss else ("resident" if self.rows is not None else "streamed"),
            "query_gradients_seconds": round(t2 - t1, 4),
            "search_seconds": round(t3 - t2, 4),
            "seconds": round(time.perf_counter() - t0, 4),
            "topk": [[{"row": int(r), "score": float(s)} for r, s in zip(rr, ss)] for rr, ss in zip(rows, scores)],
        }
        if out:
            write_results(out, summary, scores, rows)
        summary["rows"], summary["scores"] = rows, scores
        return summary


def query_store(cfg: QueryConfig, store: Any = None) -> dict:
    """Top-k training rows per query set of `cfg` through the store; writes `out/topk.json` and
    `out/topk.safetensors`. One set, so the shards are streamed (memory: one shard at a time)."""
    return GradientIndex(cfg, store, max_resident_bytes=0).query(cfg.queries, out=cfg.out)
