"""Caching activations over a corpus into an `ActivationStore`: the job behind `interp cache`.

The corpus (a [n_seq, ctx_len] token tensor, reproducible from its spec and seed) is cut into shards
of `seqs_per_shard` sequences. Each shard is an independent task: load the model once per worker,
run the sequences through `run_with_cache` (stopping after the last hook), write the shard file
atomically; the coordinating process commits it to the manifest. A rerun after a kill skips committed
shards and recomputes the rest, so no row is lost or written twice.

Rows are tokens. Attention scores and patterns are stored per query token: [row, head, key_pos].
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor

from interp.data import resolve_corpus
from interp.infra.checks import require_numbers
from interp.infra.jobs import run_tasks, worker_cache
from interp.infra.oom import advise_on_oom
from interp.infra.portable import tokenizer_identity
from interp.models import DEFAULT_MODEL, load_model
from interp.store import ActivationStore, StoreMeta, write_shard_file
from interp.store import lock as writer_lock
from interp.store.shards import ShardInfo
from interp.wrapper.parity import parity_certificate

DEFAULT_HOOKS = ("blocks.*.hook_resid_post",)


@dataclass
class CacheConfig:
    """Settings of one caching run; the CLI's `interp cache` options mirror these one to one."""

    out: str
    """Store folder; created, or resumed when it holds a store of the same settings."""
    model: str = DEFAULT_MODEL
    """Model spec (see `interp models`)."""
    hooks: list[str] = field(default_factory=lambda: list(DEFAULT_HOOKS))
    """Hook names or glob patterns (see `model.hook_names()`)."""
    data: str = "stdlib-docs"
    """Corpus spec: stdlib-docs, stdlib, pydoc-topics, usr-share-doc (varies with the installed packages),
    file:PATH, dir:PATH, synthetic:repeat, ..."""
    max_tokens: int = 65_536
    """Tokens to cache (rounded down to whole sequences)."""
    ctx_len: int = 128
    """Tokens per sequence."""
    seqs_per_shard: int = 64
    """Sequences per shard file (a shard is one task)."""
    batch_size: int = 16
    """Sequences per forward pass."""
    dtype: str = "float32"
    """Storage dtype of the activations: float32, bfloat16 or float16."""
    seed: int = 0
    """Corpus shuffling seed."""
    device: str = "cpu"
    """Where the model runs: auto, cpu, cuda or cuda:N (checked here: CUDA must be present)."""
    executor: Literal["inprocess", "ray"] = "inprocess"
    """Run shards in this process or on Ray."""
    ray_address: str | None = None
    """Ray cluster address; None starts a local Ray for the run."""
    num_workers: int | None = None
    """Ray workers (CPUs) for a local Ray."""
    wait: bool = False
    """When another run is writing to `out`, wait for it to finish (then resume from what it committed)
    instead of refusing with an error."""

    def __post_init__(self) -> None:
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"dtype must be float32, bfloat16 or float16, got {self.dtype!r}")
        require_numbers(
            self,
            positive_int=("max_tokens", "ctx_len", "seqs_per_shard", "batch_size", "num_workers"),
            non_negative_int=("seed",),
        )
        if self.executor not in ("inprocess", "ray"):  # before anything is written, not when the tasks start
            raise ValueError(f"unknown executor {self.executor!r}; use inprocess or ray")
        from interp.infra.devices import resolve_device

        self.device = resolve_device(self.device)


@dataclass(frozen=True)
class ShardTask:
    """Everything a worker needs to compute one shard (small and picklable)."""

    index: int
    seq_start: int
    tokens: Tensor
    model: str
    device: str
    hooks: tuple[str, ...]
    out: str
    batch_size: int
    dtype: str


def to_rows(name: str, t: Tensor, batch: int) -> Tensor:
    """[batch, pos, ...] -> [batch * pos, ...]; attention maps [batch, head, q, k] go per query token."""
    if name.endswith(("hook_pattern", "hook_attn_scores")):
        t = t.permute(0, 2, 1, 3)
    elif t.shape[0] == 1 and batch > 1:  # broadcast hooks such as GPT-2's hook_pos_embed
        t = t.expand(batch, *t.shape[1:])
    return t.flatten(0, 1)


def activations_of(model, tokens: Tensor, hooks: tuple[str, ...], batch_size: int, dtype: torch.dtype) -> dict:
    """Row tensors of the given hooks for a [n_seq, ctx] token block, in store dtype, on CPU."""
    parts: dict[str, list[Tensor]] = {h: [] for h in hooks}
    for start in range(0, tokens.shape[0], batch_size):
        batch = tokens[start : start + batch_size]
        _, cache = model.run_with_cache(batch, names=list(hooks), return_logits=False)
        for h in hooks:
            parts[h].append(to_rows(h, cache[h], batch.shape[0]).to("cpu", dtype))
    return {h: torch.cat(p) for h, p in parts.items()}


def cache_shard(task: ShardTask) -> ShardInfo:
    """Compute and write one shard in a worker process (the model loads once per process)."""
    model = worker_cache(("model", task.model, task.device), lambda: load_model(task.model, device=task.device))
    return compute_shard(model, task)


def compute_shard(model, task: ShardTask) -> ShardInfo:
    """Compute and write one shard with a given model."""
    n_seq, ctx = task.tokens.shape
    tensors = activations_of(model, task.tokens, task.hooks, task.batch_size, getattr(torch, task.dtype))
    tensors["tokens"] = task.tokens.flatten().to(torch.int32)
    tensors["seq"] = torch.arange(task.seq_start, task.seq_start + n_seq).repeat_interleave(ctx)
    tensors["pos"] = torch.arange(ctx, dtype=torch.int32).repeat(n_seq)
    return write_shard_file(task.out, task.index, tensors)


def row_shapes(model, hooks: list[str], ctx_len: int) -> dict[str, list[int]]:
    """Row shape of each hook, from a forward on one sequence of ctx_len tokens."""
    probe = torch.zeros(1, ctx_len, dtype=torch.long, device=model.device)
    _, cache = model.run_with_cache(probe, names=hooks, return_logits=False)
    return {h: list(to_rows(h, cache[h], 1).shape[1:]) for h in hooks}


def cache_activations(
    cfg: CacheConfig, model=None, progress: bool | str = True, overwrite: bool = False
) -> tuple[ActivationStore, dict]:
    """Run (or resume) a caching job; returns the store and a report (tokens, shards, seconds).

    Everything that can be wrong with the input (model spec, hook names, corpus, a store written with
    other settings) fails before anything is written. `overwrite` replaces a store already in
    `cfg.out` (its manifest and shard files, nothing else) once those checks have passed.
    """
    t0 = time.perf_counter()
    if model is None:
        model = load_model(cfg.model, device=cfg.device)
    if model.n_ctx and cfg.ctx_len > model.n_ctx:
        raise ValueError(
            f"--ctx-len {cfg.ctx_len} exceeds the model's context of {model.n_ctx}; use --ctx-len {model.n_ctx} or less"
        )
    hooks = [p.name for p in model.hook_points(cfg.hooks)]
    corpus = resolve_corpus(cfg.data, model.tokenizer, ctx_len=cfg.ctx_len, max_tokens=cfg.max_tokens, seed=cfg.seed)
    tokens = corpus.tokens
    n_shards = -(-tokens.shape[0] // cfg.seqs_per_shard)
    meta = StoreMeta(
        model=cfg.model,
        model_sha256=model.provenance.get("weights_sha256", "unknown"),
        hooks=row_shapes(model, hooks, cfg.ctx_len),
        dtype=cfg.dtype,
        tokenizer=tokenizer_identity(model.tokenizer),  # by identity, not by path: the store can move
        ctx_len=cfg.ctx_len,
        data={**corpus.describe(), "seqs_per_shard": cfg.seqs_per_shard},
        extra={
            "provenance": model.provenance,
            "config": {**asdict(cfg), "out": "."},  # "." = the store itself
            "parity": parity_certificate(model, tokens[: min(cfg.batch_size, 2)], hooks),
        },
    )
    # The writer lock is held from here to the end of the run: a second run on the same folder is
    # refused (or waits, with cfg.wait) instead of deleting this run's files; --overwrite deletes under it.
    hold = writer_lock.acquire(cfg.out, cfg.wait) if overwrite else None
    try:
        if overwrite:
            _remove_store_files(Path(cfg.out))
        store = ActivationStore.open_or_create(cfg.out, meta, n_shards_planned=n_shards, wait=cfg.wait)
    finally:
        writer_lock.release(hold)  # the store object holds the lock from here
    try:
        store.clean_partial()
        todo = store.missing(range(n_shards))
        tasks = [
            ShardTask(
                i,
                i * cfg.seqs_per_shard,
                tokens[i * cfg.seqs_per_shard : (i + 1) * cfg.seqs_per_shard].clone(),
                cfg.model,
                cfg.device,
                tuple(hooks),
                str(Path(cfg.out)),
                cfg.batch_size,
                cfg.dtype,
            )
            for i in todo
        ]
        # In-process shards use this very model object (which may carry edits the spec alone does not).
        fn = partial(compute_shard, model) if cfg.executor == "inprocess" else cache_shard
        fix = (
            f"lower --batch-size (now {cfg.batch_size} sequences per forward pass), --ctx-len (now {cfg.ctx_len}) "
            "or the number of hooks; committed shards are kept and a rerun resumes"
        )
        with advise_on_oom("caching activations", fix):
            run_tasks(
                tasks,
                fn,
                executor=cfg.executor,
                ray_address=cfg.ray_address,
                num_workers=cfg.num_workers,
                on_result=store.commit_shard,
                progress=progress,
                desc="caching shards",
            )
    finally:
        store.close()
    report = {
        "store": str(cfg.out),
        "model": cfg.model,
        "tokens": len(store),
        "shards": len(store.shard_indices),
        "shards_computed_now": len(tasks),
        "hooks": {h: " x ".join(map(str, [len(store), *s])) for h, s in meta.hooks.items()},
        "seconds": round(time.perf_counter() - t0, 2),
    }
    return store, report


def _remove_store_files(folder: Path) -> None:
    """Delete a store's shard files and then its manifest (other files in the folder are left alone)."""
    from interp.store.manifest import manifest_path

    if not manifest_path(folder).exists():
        return
    for p in folder.glob("shard_*.safetensors*"):
        p.unlink()
    manifest_path(folder).unlink()
