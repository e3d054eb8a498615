"""The LDS tasks: tiny language models trained here in seconds, retrained on random subsets of their data.

Two tasks, same data: `neox` (a 2-layer GPT-NeoX, d 64, 4 heads, byte vocabulary) and `looped` (the looped GPT,
one shared block applied 3 times, the same width), trained with AdamW from a fixed init and a fixed data order
(`attribution.train.train_lm`, seeded) for a fixed number of epochs over whatever rows they are given. Data: the
stdlib-docs corpus cut into sequences of `ctx` bytes; the first `n_train` are the training set, the next
`n_query` the (held-out) queries. A query's loss is its mean next-token cross-entropy.

`LMTask` is the harness's `RetrainTask`: it carries only settings and the path of the token file, and each worker
loads the tokens once (`worker_cache`), so a Ray task ships a few hundred bytes plus its subsets' row indices.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor

TaskKind = Literal["neox", "looped", "model"]


@dataclass(frozen=True)
class LMTaskConfig:
    """What a retraining run depends on (all of it goes into the store's provenance)."""

    kind: TaskKind = "neox"
    """neox: 2-layer GPT-NeoX; looped: the looped GPT (shared block, `loops` steps); model: a user's model spec
    (`model`), fine-tuned from its own weights on each subset, with its own tokenizer."""
    model: str | None = None
    """kind "model": any spec `interp.load_model` loads (a registry name, a hub id, a local folder)."""
    data: str = "stdlib-docs"
    """Corpus spec the training and query sequences are drawn from (`interp.data.resolve_corpus`)."""
    n_train: int = 1024
    """Training sequences (`ctx` tokens each; bytes for the tiny kinds)."""
    n_query: int = 32
    """Held-out query sequences."""
    ctx: int = 32
    """Bytes per sequence."""
    d_model: int = 64
    """Width of the model (4 heads)."""
    loops: int = 3
    """looped: how many times the shared block is applied."""
    epochs: int = 3
    """Passes over the rows a run is given (the step count scales with the subset's size)."""
    batch: int = 16
    """Sequences per step."""
    lr: float = 3e-3
    """AdamW learning rate (constant; weight decay 0.01)."""
    seed: int = 0
    """Init and data order of every run; the corpus draw."""
    checkpoints: int = 4
    """Evenly spaced checkpoints saved by the full-data run (TracIn's sum over checkpoints)."""

    def __post_init__(self) -> None:
        if self.kind not in ("neox", "looped", "model"):
            raise ValueError(f"task kind must be neox, looped or model, got {self.kind!r}")
        if (self.kind == "model") != (self.model is not None):
            raise ValueError("a user's model needs kind 'model' and a model spec (--model SPEC), and only then")
        for name in ("n_train", "n_query", "ctx", "d_model", "loops", "epochs", "batch", "checkpoints"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


def new_model(cfg: LMTaskConfig):
    """The task's model at its fixed init, as an `interp.HookedModel` (byte tokenizer)."""
    import interp
    from interp.data import byte_tokenizer

    if cfg.kind == "model":
        return interp.load_model(cfg.model, device="cpu")
    if cfg.kind == "neox":
        from interp.models.pythia import random_pythia

        hf = random_pythia(
            "14m",
            seed=cfg.seed,
            hidden_size=cfg.d_model,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=4 * cfg.d_model,
            vocab_size=257,
            max_position_embeddings=cfg.ctx,
        )
    else:
        from attribution.looped import random_looped_gpt

        hf = random_looped_gpt(
            seed=cfg.seed,
            vocab_size=257,
            hidden_size=cfg.d_model,
            num_attention_heads=4,
            num_hidden_layers=cfg.loops,
            intermediate_size=4 * cfg.d_model,
            max_position_embeddings=cfg.ctx,
        )
    hf.config._attn_implementation = "eager"
    return interp.HookedModel(hf, byte_tokenizer())


def task_tokenizer(cfg: LMTaskConfig):
    """The byte tokenizer for the tiny kinds, the model's own for kind "model"."""
    from interp.data import byte_tokenizer

    if cfg.kind != "model":
        return byte_tokenizer()
    from interp.dashboards.tokens import load_tokenizer

    return load_tokenizer(cfg.model)


def build_tokens(cfg: LMTaskConfig) -> tuple[Tensor, Tensor]:
    """(train [n_train, ctx], queries [n_query, ctx]) from the task's corpus, seeded; distinct rows only."""
    from interp.data import resolve_corpus

    n = cfg.n_train + cfg.n_query
    tok = task_tokenizer(cfg)
    corpus = resolve_corpus(cfg.data, tok, ctx_len=cfg.ctx, max_tokens=2 * n * cfg.ctx, seed=cfg.seed)
    rows = torch.unique(corpus.tokens.long(), dim=0)  # sorted: shuffle again with the task's seed
    rows = rows[torch.randperm(len(rows), generator=torch.Generator().manual_seed(cfg.seed))]
    if len(rows) < n:
        raise ValueError(f"{cfg.data} gives {len(rows)} distinct sequences of {cfg.ctx} tokens; the task needs {n}")
    return rows[: cfg.n_train], rows[cfg.n_train : n]


def sha256_of(t: Tensor) -> str:
    return hashlib.sha256(t.to(torch.int64).contiguous().numpy().tobytes()).hexdigest()


def query_losses(model, queries: Tensor, batch: int = 64) -> Tensor:
    """Mean next-token cross-entropy of each query [n_query]."""
    from attribution.capture import per_example_lm_loss

    hf = model.hf_model if hasattr(model, "hf_model") else model
    with torch.no_grad():
        return torch.cat(
            [
                per_example_lm_loss(hf, queries[i : i + batch], torch.ones_like(queries[i : i + batch]))
                for i in range(0, len(queries), batch)
            ]
        ).double()


def train_on(cfg: LMTaskConfig, train: Tensor, rows: Tensor, out: Path | None = None):
    """Train the task's model from its init on `train[rows]`; checkpoints into `out` when given."""
    from transformers.utils import logging as hf_logging

    from attribution.train import train_lm

    hf_logging.disable_progress_bar()  # a "Writing model shards" bar per checkpoint buries the table
    model = new_model(cfg)
    steps = max(1, cfg.epochs * len(rows) // cfg.batch)
    saves = tuple(sorted({max(1, round(steps * (k + 1) / cfg.checkpoints)) for k in range(cfg.checkpoints)}))
    train_lm(
        model.hf_model,
        train[rows],
        steps=steps,
        batch_size=cfg.batch,
        lr=cfg.lr,
        seed=cfg.seed,
        save_steps=saves if out is not None else (),
        out=out,
    )
    return model


@dataclass(frozen=True)
class LMTask:
    """The harness's retraining task for a tiny LM (see module docstring)."""

    cfg: LMTaskConfig
    tokens_path: str
    train_sha256: str
    query_sha256: str
    n_train: int = field(init=False)
    n_query: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_train", self.cfg.n_train)
        object.__setattr__(self, "n_query", self.cfg.n_query)

    def tokens(self) -> tuple[Tensor, Tensor]:
        from interp.infra.jobs import worker_cache
        from interp.infra.tensor_file import read_tensors

        def load():
            t, _ = read_tensors(self.tokens_path, what="the LDS task's tokens", need={"train": 2, "queries": 2})
            if sha256_of(t["train"]) != self.train_sha256 or sha256_of(t["queries"]) != self.query_sha256:
                raise ValueError(f"{self.tokens_path} does not hold the tokens this task was made with")
            return t["train"].long(), t["queries"].long()

        return worker_cache(("lds-task-tokens", self.tokens_path, self.train_sha256), load)

    def train_and_eval(self, rows: Tensor) -> Tensor:
        torch.set_num_threads(1)
        train, queries = self.tokens()
        return query_losses(train_on(self.cfg, train, rows), queries)

    def identity(self) -> dict:
        return {
            "model": self.cfg.model or f"lds-{self.cfg.kind}",
            "settings": asdict(self.cfg),
            "train_tokens_sha256": self.train_sha256,
            "query_tokens_sha256": self.query_sha256,
            "tokenizer": "bytes" if self.cfg.kind != "model" else self.cfg.model,
            "ctx_len": self.cfg.ctx,
        }


def make_task(cfg: LMTaskConfig, out: Path, tokens: tuple[Tensor, Tensor] | None = None) -> LMTask:
    """Build the task's tokens (written to `out/tokens.safetensors`) and the picklable task; `tokens`: the
    (train, queries) `build_tokens(cfg)` gives, when the caller has them already."""
    from safetensors.torch import save

    from interp.store.atomic import atomic_write_bytes

    out.mkdir(parents=True, exist_ok=True)
    train, queries = build_tokens(cfg) if tokens is None else tokens
    path = out / "tokens.safetensors"
    atomic_write_bytes(
        path, save({"train": train.contiguous(), "queries": queries.contiguous()}, metadata={"tokenizer": "bytes"})
    )
    from attribution.jobs import save_tokens

    name = "bytes"
    if cfg.kind == "model":
        from attribution.jobs import tokenizer_name

        name = tokenizer_name(task_tokenizer(cfg))
    save_tokens(out / "train.safetensors", train, name)  # `interp attribute --train tokens:OUT/train.safetensors`
    save_tokens(out / "queries.safetensors", queries, name)
    return LMTask(cfg, str(path), sha256_of(train), sha256_of(queries))
