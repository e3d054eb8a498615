"""Batch attribution jobs: the training set cut into shards that are independent tasks (`interp.infra.jobs`).

    run_attribution(AttributeConfig(method="sdi", model="looped-gpt:runs/loop", train="tokens:train.safetensors",
                                    queries="tokens:queries.safetensors", out="runs/sdi"))

1. *Prepare* (coordinating process, once): load the model, the training and query tokens (checking that
   both were made with the model's tokenizer), and everything every shard needs from the query side:
   per-checkpoint query features (TracIn, SDI), the EK-FAC factors and the query / probe gradients
   preconditioned by them (EK-FAC), nothing for DRA. This is saved as `prepared.safetensors` so a
   resumed run does not recompute it.
2. *Shards* (in-process or on Ray, `interp.infra.jobs.run_tasks`): each scores its rows of the training set
   against all queries and writes `shard_{i:05d}.safetensors` atomically; the coordinator commits it to
   the store's manifest. The output folder is an `interp.store.ActivationStore` whose rows are training
   samples: `scores` [row, n_query] (plus `sdi` [row, n_query, tau]; `rep` for DRA), `seq` = training
   row index. A killed run resumes: committed shards are kept, partial files removed.
3. *Finish*: DRA's denoising needs the whole pool, so its shards hold representations and the scores
   are computed at the end; every method writes `scores.safetensors` ([n_train, n_query]) and
   `result.json` atomically.

Data specs: `tokens:PATH.safetensors` (a `tokens` [n, ctx] tensor; metadata `tokenizer` names the
tokenizer that made it) or any corpus spec of `interp.data.resolve_corpus` (tokenized here with the
model's tokenizer; `--n-train` / `--n-queries` sequences of `--ctx-len`).
"""

from __future__ import annotations

import fnmatch
import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor

import attribution.looped  # noqa: F401  (registers looped-gpt, and its classes with transformers)
from interp.infra.jobs import run_tasks, worker_cache
from interp.store import ActivationStore, StoreMeta, write_shard_file
from interp.store.atomic import atomic_write_bytes

Method = Literal["tracin", "sdi", "ekfac", "dra"]
METHODS = ("tracin", "sdi", "ekfac", "dra")


@dataclass
class AttributeConfig:
    """Settings of one attribution run; `interp attribute` mirrors these one to one."""

    method: Method
    """tracin | sdi | ekfac | dra."""
    model: str
    """Model spec (e.g. `looped-gpt:runs/loop`, `pythia-14m:PATH`, a local folder)."""
    train: str
    """Training data: `tokens:PATH.safetensors` or a corpus spec."""
    queries: str
    """Query data (targets for DRA), same forms as `train`."""
    out: str
    """Output folder (an attribution store); resumed when it holds a run with the same settings."""
    checkpoints: list[str] = field(default_factory=list)
    """TracIn / SDI: checkpoint folders, or one run folder (all its step_N). Empty: the model's run folder."""
    lrs: list[float] | None = None
    """Learning rate of each checkpoint; None reads each folder's training_state.json."""
    sketch_dim: int | None = 2048
    """TensorSketch size per parameter tensor (TracIn, SDI, DRA gradients); 0 or None: exact gradients."""
    modules: list[str] = field(default_factory=list)
    """TracIn / DRA-gradient: module-name globs of the Linear/Embedding modules to attribute over
    (default: the looped block for a looped model, else every Linear inside the layers)."""
    component: str = "L0H0:qk"
    """EK-FAC: the head component, L<layer>H<head>[:qk|qkv|qkvo]."""
    probe: Literal["queries", "copy", "prev"] = "queries"
    """EK-FAC measurement: each query's log-likelihood, or MDA's copy-target / previous-token probe."""
    fit_samples: int = 64
    """EK-FAC: training sequences used to fit the factors."""
    damping: float = 0.1
    """EK-FAC: damping as a multiple of the head's mean eigenvalue (H + damping * mean(lambda) I)^-1, one scalar over
    the head's q|k, v and o blocks (`attribution.influence.DAMPING_SCOPES`: it tracked the exact damped GGN better than
    a scalar per block, attribution/README.md, "EK-FAC damping"); 1.0 tracked
    the exact damped GGN better than 0.1 on the micro Llama head (Spearman 0.90 vs 0.66, attribution/README.md)."""
    label_samples: int = 1
    """EK-FAC: labels sampled from the model per fitting sequence (more: a less noisy Fisher estimate)."""
    representation: Literal["hidden", "gradient"] = "hidden"
    """DRA: hidden states or sketched gradients."""
    hook: str = ""
    """DRA hidden states: hook to pool (default: the middle layer's hook_resid_post)."""
    denoise: bool = True
    """DRA: apply the denoising below (False: the raw-similarity baseline, every operator off)."""
    center: bool = True
    """DRA: subtract the training pool's mean representation."""
    whiten: bool = False
    """DRA: whiten with the pool covariance. Off by default: on SmolLM2 it lowered AUPRC (control split 0.758 ->
    0.508, gradients 0.927 -> 0.484; attribution/README.md), while centering alone gave the gain."""
    neutral_removal: float = 0.0
    """DRA (hidden states): fraction of each target's tokens dropped as neutral (most typical of the pool)."""
    select_dims: int | str | None = "auto"
    """DRA: dimension selection: "auto" (leave-one-target-out K), an int K, or None (all dimensions)."""
    adam_state: str = ""
    """DRA gradient representations: a checkpoint folder with `adam_state.safetensors`; gradients are then
    LESS-style Adam-normalised (`attribution.adam`)."""
    ctx_len: int = 64
    """Tokens per sequence when a corpus spec is tokenized here."""
    max_train: int = 256
    """Training sequences taken from a corpus spec."""
    max_queries: int = 8
    """Query sequences taken from a corpus spec."""
    shard_size: int = 64
    """Training rows per shard (a shard is one task)."""
    batch_size: int = 16
    """Sequences per forward/backward."""
    seed: int = 0
    """Sketch hashes, corpus shuffling, EK-FAC label sampling."""
    device: str = "auto"
    """cpu, cuda[:N], or auto (cuda when available)."""
    dtype: Literal["float32", "bfloat16"] = "float32"
    """Model weights and activations; per-example features, EK-FAC factors and scores accumulate in float32."""
    executor: Literal["inprocess", "ray"] = "inprocess"
    """Run shards in this process or on Ray."""
    ray_address: str | None = None
    """Ray cluster address; None starts a local Ray for the run."""
    num_workers: int | None = None
    """Ray workers (CPUs) for a local Ray."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; use one of {', '.join(METHODS)}")
        for name in ("ctx_len", "max_train", "max_queries", "shard_size", "batch_size", "fit_samples", "label_samples"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not self.damping > 0:
            raise ValueError(f"damping must be positive (a multiple of the mean eigenvalue), got {self.damping}")
        if self.sketch_dim == 0:
            self.sketch_dim = None
        if self.probe not in ("queries", "copy", "prev"):
            raise ValueError(f"probe must be queries, copy or prev, got {self.probe!r}")
        if not 0.0 <= self.neutral_removal < 1.0:
            raise ValueError(f"--neutral-removal must be in [0, 1), got {self.neutral_removal}")
        if self.neutral_removal and self.representation != "hidden":
            raise ValueError("--neutral-removal works on token-level hidden states; use --representation hidden")
        if self.adam_state and self.representation != "gradient":
            raise ValueError("--adam-state normalises gradient representations; add --representation gradient")
        if self.adam_state and not (Path(self.adam_state) / "adam_state.safetensors").is_file():
            raise FileNotFoundError(
                f"--adam-state {self.adam_state}: no adam_state.safetensors there (checkpoints "
                "written by attribution.train.save_checkpoint with the optimiser have one)"
            )
        if not (self.select_dims in (None, "auto") or (isinstance(self.select_dims, int) and self.select_dims > 0)):
            raise ValueError(f"--select-dims must be auto, all or a positive K, got {self.select_dims!r}")
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype must be float32 or bfloat16, got {self.dtype!r}")
        from interp.infra.devices import resolve_device

        self.device = resolve_device(self.device)  # auto -> cuda when present; cuda without CUDA: a clear error

    def compat(self) -> dict:
        """The settings that define the scores (a rerun must agree on them to resume)."""
        skip = {"out", "shard_size", "batch_size", "device", "executor", "ray_address", "num_workers", "dtype"}
        return {k: v for k, v in asdict(self).items() if k not in skip}


# ------------------------------------------------------------------------------------------- data
def load_tokens(
    spec: str, tokenizer, ctx_len: int, max_rows: int, seed: int, model=None, what: str = "data"
) -> tuple[Tensor, str]:
    """(tokens [n, ctx] int64, tokenizer name) of a data spec, checked at the door.

    Always: integer ids, at least one row of at least `MIN_ROW_TOKENS`, no negative id. With `model` (every
    command passes it): a corpus spec's `ctx_len` fits the model's context before anything is tokenized, and
    the rows fit the model: ids inside its vocabulary, rows no longer than its context, the tokenizer its own.
    Each problem is one ValueError naming `what` (e.g. "--train"), the spec and the fix, raised before the
    caller writes anything.
    """
    where = f"{what} {spec}"
    if spec.startswith("tokens:"):
        from interp.infra.tensor_file import read_tensors

        path = spec.removeprefix("tokens:")
        t, meta = read_tensors(path, what=spec, need={"tokens": 2}, keys=["tokens"])  # names the file on any problem
        tokens, name = t["tokens"], meta.get("tokenizer", "")
        if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
            raise ValueError(
                f"{where}: the tokens are {str(tokens.dtype).removeprefix('torch.')}, not integer token ids; write "
                "the ids as integers (attribution.jobs.save_tokens writes int64)"
            )
    else:
        from interp.data import resolve_corpus

        n_ctx = getattr(model, "n_ctx", None)  # checked before max_rows * ctx_len tokens are read and tokenized
        if ctx_len < MIN_ROW_TOKENS:
            raise ValueError(f"--ctx-len {ctx_len} is too short: give --ctx-len {MIN_ROW_TOKENS} or more")
        if n_ctx and ctx_len > n_ctx:
            raise ValueError(
                f"--ctx-len {ctx_len} is longer than {model.name}'s context of {n_ctx} tokens; give --ctx-len "
                f"{n_ctx} or less"
            )
        corpus = resolve_corpus(spec, tokenizer, ctx_len=ctx_len, max_tokens=max_rows * ctx_len, seed=seed)
        tokens, name = corpus.tokens, tokenizer_name(tokenizer)
    tokens = tokens.long()
    check_token_rows(tokens, where, model, name)
    return tokens, name


MIN_ROW_TOKENS = 2
"""A row's loss is next-token prediction: one token to read and one to predict at least."""


def check_token_rows(tokens: Tensor, where: str, model=None, tokenizer: str = "") -> None:
    """Refuse rows that cannot be scored (see `load_tokens`); `where` names the data in the message."""
    n, length = tokens.shape
    if n == 0 or length < MIN_ROW_TOKENS:
        raise ValueError(
            f"{where} holds {n} rows of {length} tokens; give at least one row of {MIN_ROW_TOKENS} or more tokens"
        )
    low = int(tokens.min())
    vocab = getattr(model, "d_vocab", None)
    high = int(tokens.max())
    bad = (tokens < 0) | (tokens >= vocab) if vocab else tokens < 0
    if bad.any():
        row, pos = (int(i) for i in bad.nonzero()[0])
        span = f"[0, {vocab})" if vocab else "[0, vocabulary size)"
        raise ValueError(
            f"{where}: token id {int(tokens[row, pos])} (row {row}, position {pos}; ids run {low}..{high}) is "
            f"outside {getattr(model, 'name', 'the model')}'s vocabulary {span}: the data is damaged or was made with "
            "another tokenizer; re-tokenize the text with the model's tokenizer"
        )
    if model is None:
        return
    n_ctx = getattr(model, "n_ctx", None)
    if n_ctx and length > n_ctx:
        raise ValueError(
            f"{where}: rows of {length} tokens are longer than {model.name}'s context of {n_ctx}; cut them to "
            f"{n_ctx} tokens or fewer"
        )
    own = tokenizer_name(model.tokenizer) if getattr(model, "tokenizer", None) is not None else ""
    if tokenizer and own and not _same_tokenizer(tokenizer, own):
        raise ValueError(
            f"{where} and {model.name} come from different tokenizers ({tokenizer!r} and {own!r}): token ids are "
            "not comparable across tokenizers; re-tokenize the data with the model's tokenizer (or pass a corpus "
            "spec, which is tokenized with it)"
        )


def tokenizer_name(tokenizer) -> str:
    """The tokenizer's identity, name@sha256:... (`interp.infra.portable`): the same on every machine and folder."""
    from interp.infra.portable import tokenizer_identity

    return tokenizer_identity(tokenizer)


def _same_tokenizer(a: str, b: str) -> bool:
    """Equal identities, or equal names where one side is a bare name (token files written before identities)."""
    if a == b:
        return True
    return ("@sha256:" not in a or "@sha256:" not in b) and a.split("@sha256:")[0] == b.split("@sha256:")[0]


def save_tokens(path: str | Path, tokens: Tensor, tokenizer: str) -> None:
    """Write a `tokens:` data file: the tokens and the name of the tokenizer that made them."""
    from interp.store.safetensors_io import safetensors_bytes

    atomic_write_bytes(Path(path), safetensors_bytes({"tokens": tokens.to(torch.int64)}, {"tokenizer": tokenizer}))


def check_tokenizers(model_tok: str, train_tok: str, query_tok: str, cfg: AttributeConfig) -> None:
    """Training data, queries and model must share one tokenizer; name the mismatch and the fix."""
    names = {"model": model_tok, f"train ({cfg.train})": train_tok, f"queries ({cfg.queries})": query_tok}
    given = {k: v for k, v in names.items() if v}
    values = list(given.values())
    if any(not _same_tokenizer(values[0], v) for v in values[1:]):
        shown = "; ".join(f"{k}: {v!r}" for k, v in given.items())
        raise ValueError(
            f"training data, queries and model come from different tokenizers ({shown}). Token ids are not "
            "comparable across tokenizers: re-tokenize the data with the model's tokenizer (or pass a corpus "
            "spec, which is tokenized with it)."
        )


# ------------------------------------------------------------------------------------------- model side
def _weights_fingerprint(spec: str) -> tuple:
    """(name, size, mtime) of the weight files behind a spec that is (or ends in) a local path: the memo key
    changes when the files do, so a retrained folder is never scored with the weights of an earlier job."""
    from interp.models.registry import split_step

    arg = spec.partition(":")[2] if ":" in spec and not Path(spec).exists() else spec
    try:
        path, step = split_step(arg) if arg else (arg, None)
    except ValueError:  # not PATH@N: a hub id at a revision (ORG/NAME@REV), whose commit pins its weights
        return ()
    folder = Path(path) / f"step_{step}" if step is not None else Path(path) if path else None
    if folder is None or not folder.exists():
        return ()
    files = [folder] if folder.is_file() else sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.gguf"))
    return tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files)


def _load(spec: str, device: str, dtype: str = "float32"):
    """The model of a spec, memoised per process (a Ray worker serves many shards). Nothing in this module
    writes to the memoised model: checkpoints are loaded into new models (`Checkpoint.load`)."""
    from interp import load_model

    key = ("attribution-model", spec, device, dtype, _weights_fingerprint(spec))
    return worker_cache(key, lambda: load_model(spec, device=device, dtype=dtype))


def _groups(hf, patterns: list[str]):
    if not patterns and hasattr(hf, "step_modules"):
        return hf.step_modules()
    mods = dict(hf.named_modules())
    kinds = (torch.nn.Linear, torch.nn.Embedding, torch.nn.LayerNorm)
    if not patterns:
        patterns = ["*layers.*", "*.h.*"]
    chosen = {n: [m] for n, m in mods.items() if isinstance(m, kinds) and any(fnmatch.fnmatch(n, p) for p in patterns)}
    if not chosen:
        examples = [n for n, m in mods.items() if isinstance(m, torch.nn.Linear)][:6]
        raise ValueError(f"no Linear/Embedding/LayerNorm module matches {patterns}; module names look like {examples}")
    return chosen


def _featurizer(hf, cfg: AttributeConfig):
    from attribution.capture import GradientFeaturizer

    return GradientFeaturizer(_groups(hf, cfg.modules), sketch_dim=cfg.sketch_dim, seed=cfg.seed)


def _checkpoints(cfg: AttributeConfig):
    from attribution.tracin import checkpoints_from, expand_checkpoints

    paths = list(cfg.checkpoints)
    if not paths:
        arg = cfg.model.partition(":")[2] or cfg.model
        run = Path(arg.rsplit("@", 1)[0])  # PATH@N: the run; a hub id's ORG/NAME@REV is no folder here
        if run.is_dir() and any(run.glob("step_*")):
            paths = [str(run)]
        else:
            raise ValueError(
                f"--method {cfg.method} needs training checkpoints: pass --checkpoints RUN_OR_FOLDERS "
                f"(the model {cfg.model!r} is not a run folder with step_N checkpoints)"
            )
    return checkpoints_from(expand_checkpoints(paths), cfg.lrs)


def _ekfac_model(cfg: AttributeConfig, base):
    """EK-FAC's model: the spec's model, or (with `--checkpoints RUN@N`) that one checkpoint's weights loaded
    through the architecture's loader into a new model (memoised by path and files; never written to)."""
    if not cfg.checkpoints:
        return base
    from attribution.tracin import Checkpoint, expand_checkpoints

    paths = expand_checkpoints(cfg.checkpoints)
    if len(paths) != 1:
        raise ValueError(
            f"--method ekfac scores at one checkpoint, got {len(paths)} ({', '.join(paths[:3])}...): "
            "give --checkpoints RUN@N"
        )
    from interp import HookedModel

    def build():
        hf = Checkpoint(paths[0], 0.0).load(base.hf_model)
        return HookedModel(hf, base.tokenizer, {**base.provenance, "checkpoint": paths[0]})

    return worker_cache(("attribution-ekfac-ckpt", paths[0], _weights_fingerprint(paths[0]), str(base.device)), build)


# ------------------------------------------------------------------------------------------- tasks
@dataclass(frozen=True)
class ShardTask:
    """One shard: training rows [start, start + len(tokens)) and what it needs (small, picklable)."""

    index: int
    start: int
    tokens: Tensor
    cfg: AttributeConfig
    out: str
    prepared: dict

    def __getstate__(self) -> dict:
        # `tokens` is a view of the whole training tensor (no copy in-process); pickling a view writes its whole
        # storage, so a Ray task would carry every training row. Pickle a copy of this shard's rows only.
        state = dict(self.__dict__)
        state["tokens"] = self.tokens.clone()
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


def score_shard(task: ShardTask) -> object:
    """Score one shard and write its file; returns the `ShardInfo` to commit."""
    cfg, prep = task.cfg, task.prepared
    if not isinstance(prep, dict):  # a Ray object ref: the prepared tensors were put in the object store once
        from interp.infra.jobs import import_ray

        prep = import_ray().get(prep)
    model = _load(cfg.model, cfg.device, cfg.dtype)
    ids = task.tokens.to(model.device)
    tensors: dict[str, Tensor] = {}
    if cfg.method in ("tracin", "sdi"):
        from attribution.tracin import Checkpoint, features

        sdi = None
        for k, (path, lr) in enumerate(zip(prep["ckpt_paths"], prep["lrs"])):
            hf = _checkpoint_model(cfg, model, Checkpoint(path, lr))
            ftr = features(hf, _featurizer(hf, cfg), ids, None, cfg.batch_size).float()
            fq = prep[f"query_features_{k}"].to(ftr.device)
            part = lr * torch.einsum("id,jtd->ijt", ftr.sum(1), fq)
            sdi = part if sdi is None else sdi + part
        tensors["scores"] = sdi.sum(-1)
        if cfg.method == "sdi":
            tensors["sdi"] = sdi
    elif cfg.method == "ekfac":
        from attribution.influence import HeadComponent, component_gradients, lm_loss

        comp = HeadComponent.parse(cfg.component)
        model = _ekfac_model(cfg, model)
        rows = []
        for i in range(0, len(ids), cfg.batch_size):
            g = component_gradients(model, comp, ids[i : i + cfg.batch_size], None, lm_loss)
            rows.append(-sum(torch.einsum("boi,qoi->bq", g[k], prep[f"ihvp_{k}"].to(g[k].device)) for k in g))
        tensors["scores"] = torch.cat(rows)
    else:
        tensors["rep"] = _representations(model, ids, cfg)
    n = len(ids)
    tensors = {k: v.detach().float().cpu() for k, v in tensors.items()}
    tensors |= {
        "tokens": task.tokens[:, 0].to(torch.int32),
        "seq": torch.arange(task.start, task.start + n),
        "pos": torch.zeros(n, dtype=torch.int32),
    }
    return write_shard_file(task.out, task.index, tensors)


def _checkpoint_model(cfg: AttributeConfig, model, ckpt) -> object:
    """The checkpoint's model, loaded once per worker process and kept (by path and weight files' identity):
    every shard of a job reads the same checkpoints, so reloading them per shard only repeats disk reads and
    host-to-device copies. The memoised base model is never written to (`Checkpoint.load` builds a new one)."""
    if ckpt.path is None:  # an in-memory state dict: nothing on disk to key it by
        return ckpt.load(model.hf_model)
    key = ("attribution-checkpoint", cfg.model, cfg.device, cfg.dtype, ckpt.path, _weights_fingerprint(ckpt.path))
    return worker_cache(key, lambda: ckpt.load(model.hf_model))


def _representations(model, ids: Tensor, cfg: AttributeConfig) -> Tensor:
    from attribution.dra import gradient_representations, hidden_representations

    mask = torch.ones_like(ids)
    if cfg.representation == "hidden":
        return hidden_representations(model, ids, mask, _dra_hook(model, cfg), cfg.batch_size)
    mods = [n for n in _groups(model.hf_model, cfg.modules or [f"*layers.{model.n_layers - 1}.*"])]
    if cfg.adam_state:
        from attribution.adam import AdamState, adam_gradient_representations

        state = worker_cache(
            ("attribution-adam", cfg.adam_state, _weights_fingerprint(cfg.adam_state)),
            lambda: AdamState.load(cfg.adam_state),
        )
        return adam_gradient_representations(model, ids, mask, mods, state, cfg.sketch_dim, cfg.seed, cfg.batch_size)
    return gradient_representations(model, ids, mask, mods, cfg.sketch_dim, cfg.seed, cfg.batch_size)


def _dra_hook(model, cfg: AttributeConfig) -> str:
    hook = cfg.hook or f"blocks.{model.n_layers // 2}.hook_resid_post"
    model.hook_points(hook)  # unknown names raise with the nearest valid ones
    return hook


# ------------------------------------------------------------------------------------------- the job
def prepare(cfg: AttributeConfig, model, train: Tensor, queries: Tensor) -> dict:
    """Query-side quantities every shard needs (see module docstring)."""
    prep: dict = {}
    if cfg.method in ("tracin", "sdi"):
        from attribution.tracin import features

        cks = _checkpoints(cfg)
        feat = _featurizer(model.hf_model, cfg)
        if cfg.method == "sdi" and not hasattr(model.hf_model, "step_modules"):
            raise ValueError(
                f"--method sdi needs a looped model (e.g. looped-gpt:RUN); {cfg.model!r} is "
                f"{model.config.model_type}. Use --method tracin for ordinary models."
            )
        prep["ckpt_paths"] = [c.path for c in cks]
        prep["lrs"] = [c.lr for c in cks]
        for k, ck in enumerate(cks):
            hf = ck.load(model.hf_model)  # a new model; the memoised one is not touched
            prep[f"query_features_{k}"] = (
                features(hf, feat.rebind(model.hf_model, hf), queries.to(model.device), None, cfg.batch_size)
                .float()
                .cpu()
            )
            del hf
    elif cfg.method == "ekfac":
        from attribution.influence import HeadComponent, component_gradients, fit_ekfac, lm_loss
        from attribution.mda import copy_target_probe, prev_attn_probe, random_tokens, repeated_random

        comp = HeadComponent.parse(cfg.component)
        comp.check(model)
        model = _ekfac_model(cfg, model)
        prep["ckpt_paths"] = [model.provenance.get("checkpoint")] if cfg.checkpoints else []
        prep["lrs"] = [None] if cfg.checkpoints else []
        fit = train[: cfg.fit_samples].to(model.device)
        factors = fit_ekfac(
            model,
            comp,
            fit,
            batch_size=cfg.batch_size,
            seed=cfg.seed,
            damping_alpha=cfg.damping,
            label_samples=cfg.label_samples,
        )
        if cfg.probe == "queries":  # measurement: each query's log-likelihood
            q = queries.to(model.device)
            grads = component_gradients(model, comp, q, None, lambda m, i, k: -lm_loss(m, i, k))
        else:
            half = max(4, train.shape[1] // 2)
            if cfg.probe == "copy":
                ids, obj = repeated_random(32, half, model.d_vocab, cfg.seed, bos=None), copy_target_probe()
            else:
                ids, obj = random_tokens(32, 2 * half, model.d_vocab, cfg.seed), prev_attn_probe(comp.layer, comp.head)
            grads = {
                k: v.mean(0, keepdim=True)
                for k, v in component_gradients(model, comp, ids.to(model.device), None, obj).items()
            }
        for k, v in factors.inverse_hvp(grads).items():
            prep[f"ihvp_{k}"] = v.cpu()
    else:
        _dra_hook(model, cfg) if cfg.representation == "hidden" else None
    return prep


def _save_prepared(path: Path, prep: dict) -> None:
    from interp.store.safetensors_io import safetensors_bytes

    tensors = {k: v for k, v in prep.items() if isinstance(v, Tensor)}
    other = {k: v for k, v in prep.items() if not isinstance(v, Tensor)}
    atomic_write_bytes(path, safetensors_bytes(tensors or {"_": torch.zeros(1)}, {"json": json.dumps(other)}))


def _load_prepared(path: Path) -> dict:

    from interp.infra.tensor_file import TensorFileError, read_tensors

    tensors, meta = read_tensors(path, what="the attribution run's prepared state")
    prep = {k: v for k, v in tensors.items() if k != "_"}
    try:
        prep |= json.loads(meta.get("json", "{}"))
    except json.JSONDecodeError as e:
        raise TensorFileError(
            f"{path} is damaged (its metadata is not JSON: {e}); delete it to prepare again"
        ) from None
    return prep


RUN_FILES = (
    "shard_*.safetensors*",
    "manifest.json",
    "prepared.safetensors",
    "scores.safetensors",
    "texts.json",
    "result.json",
    "report.html",
)
"""What a run writes into its --out folder (removed by `overwrite`; nothing else in the folder is touched)."""


def _remove_run_files(out: Path) -> None:
    for pattern in RUN_FILES:
        for p in out.glob(pattern):
            if p.is_file():
                p.unlink()


def run_attribution(cfg: AttributeConfig, progress: bool | str = True, model=None, overwrite: bool = False) -> dict:
    """Run (or resume) an attribution job; returns a summary. Scores end in `out/scores.safetensors`.

    `overwrite` starts the run over: once the inputs have been checked, the run files already in
    `cfg.out` (`RUN_FILES`) are removed instead of resumed from."""
    t0 = time.perf_counter()
    model = model or _load(cfg.model, cfg.device, cfg.dtype)
    tok = model.tokenizer
    train, train_tok = load_tokens(cfg.train, tok, cfg.ctx_len, cfg.max_train, cfg.seed, model, "--train")
    queries, query_tok = load_tokens(cfg.queries, tok, cfg.ctx_len, cfg.max_queries, cfg.seed + 1, model, "--queries")
    check_tokenizers(tokenizer_name(tok) if tok is not None else "", train_tok, query_tok, cfg)
    if cfg.method == "dra" and cfg.denoise and cfg.select_dims == "auto" and len(queries) < 2:
        raise ValueError(
            "DRA's automatic dimension selection needs at least 2 target (query) examples; give --select-dims all or K"
        )
    n_q = len(queries)
    out = Path(cfg.out)
    # Validate everything that can fail before anything is written.
    prep_path = out / "prepared.safetensors"
    prep = _load_prepared(prep_path) if prep_path.exists() and not overwrite else prepare(cfg, model, train, queries)
    if cfg.method in ("tracin", "ekfac"):
        hooks = {"scores": [n_q]}
    elif cfg.method == "sdi":
        hooks = {"scores": [n_q], "sdi": [n_q, int(prep["query_features_0"].shape[1])]}
    else:
        with torch.no_grad():
            dim = _representations(model, train[:1].to(model.device), cfg).shape[-1]
        hooks = {"rep": [dim]}
    meta = StoreMeta(
        model=cfg.model,
        model_sha256=model.provenance.get("weights_sha256", ""),
        hooks=hooks,
        dtype="float32",
        tokenizer=train_tok,
        ctx_len=int(train.shape[1]),
        data={
            "train": cfg.train,
            "queries": cfg.queries,
            "n_train": len(train),
            "n_queries": n_q,
            "attribution": cfg.compat(),
        },
    )
    n_shards = (len(train) + cfg.shard_size - 1) // cfg.shard_size
    if overwrite and out.is_dir():
        _remove_run_files(out)
    from attribution.raywatch import ray_for_job

    gpu = cfg.device.startswith("cuda")
    workers = cfg.num_workers or (torch.cuda.device_count() if gpu and cfg.ray_address is None else None)
    # Ray starts before the store is created: a failed start is one error and leaves no folder behind.
    with ray_for_job(cfg.executor if _any_pending(out, n_shards) else "inprocess", cfg.ray_address, workers) as ray:
        store = ActivationStore.open_or_create(out, meta, n_shards_planned=n_shards)
        if not prep_path.exists():
            _save_prepared(prep_path, prep)
        store.clean_partial()
        todo = store.missing()
        _run_shards(cfg, store, train, prep, todo, progress, ray, workers)
    scores = finish(cfg, store, queries, model, train)
    atomic_write_bytes(
        out / "texts.json", json.dumps({"train": _decode(tok, train), "queries": _decode(tok, queries)}).encode()
    )
    summary = {
        "method": cfg.method,
        "out": str(out),
        "n_train": len(train),
        "n_queries": n_q,
        "shards": n_shards,
        "shards_computed_now": len(todo),
        "seconds": round(time.perf_counter() - t0, 2),
        "top_train_per_query": scores.argmax(0).tolist(),
        "top_score_per_query": [round(float(x), 6) for x in scores.max(0).values],
        "identity": identity(cfg, model, train, queries, train_tok, prep),
        "show": f"interp attribute show {out}",
    }
    atomic_write_bytes(out / "result.json", json.dumps(summary, indent=1).encode())
    return summary


def _sha256(t: Tensor) -> str:
    import hashlib

    return hashlib.sha256(t.to(torch.int64).contiguous().numpy().tobytes()).hexdigest()


def identity(cfg: AttributeConfig, model, train: Tensor, queries: Tensor, tokenizer: str, prep: dict) -> dict:
    """What the scores were computed from: model (spec, weight hash, dtype), data (spec, token hash, tokenizer),
    checkpoints with learning rates, and the settings that define the scores."""
    prov = getattr(model, "provenance", {}) or {}
    return {
        "model": {
            "spec": cfg.model,
            "weights_sha256": prov.get("weights_sha256", ""),
            "dtype": cfg.dtype,
            "model_type": model.config.model_type,
        },
        "data": {
            "train": cfg.train,
            "train_tokens_sha256": _sha256(train),
            "queries": cfg.queries,
            "queries_tokens_sha256": _sha256(queries),
            "tokenizer": tokenizer,
        },
        "checkpoints": [{"path": p, "lr": lr} for p, lr in zip(prep.get("ckpt_paths", []), prep.get("lrs", []))],
        "settings": cfg.compat(),
    }


def _decode(tokenizer, tokens: Tensor) -> list[str]:
    """Each row as text (the model's tokenizer), or its token ids when there is no tokenizer."""
    if tokenizer is None:
        return [" ".join(map(str, row)) for row in tokens.tolist()]
    return [tokenizer.decode(row) for row in tokens.tolist()]


def _any_pending(out: Path, n_shards: int) -> bool:
    """Whether the run in `out` still has shards to compute (read-only: no lock, nothing written)."""
    if not (out / "manifest.json").exists():
        return True
    from interp.store.manifest import read_manifest

    try:
        return len(read_manifest(out).shards) < n_shards
    except Exception:  # noqa: BLE001 - a damaged manifest is reported when the store is opened
        return True


def _run_shards(
    cfg: AttributeConfig,
    store: ActivationStore,
    train: Tensor,
    prep: dict,
    todo: list[int],
    progress,
    ray=None,
    workers: int | None = None,
) -> None:
    """Score the missing shards in-process or on `ray` (started by the caller, `attribution.raywatch.ray_for_job`,
    with its watchdog). On Ray, the prepared tensors go to the object store once (tasks carry a reference, not a
    copy each) and a CUDA run asks one GPU per task (so one worker per GPU, each seeing only its own device)."""
    gpu = cfg.device.startswith("cuda")
    # A Ray worker sees only the GPU it was given (CUDA_VISIBLE_DEVICES), as device 0.
    task_cfg = replace(cfg, device="cuda") if cfg.executor == "ray" and gpu else cfg

    def tasks(prepared):
        return [
            ShardTask(
                i,
                i * cfg.shard_size,
                train[i * cfg.shard_size : (i + 1) * cfg.shard_size],
                task_cfg,
                str(store.path),
                prepared,
            )
            for i in todo
        ]

    run = dict(on_result=store.commit_shard, progress=progress, desc=f"attribute ({cfg.method})")
    if ray is None or not todo:
        run_tasks(tasks(prep), score_shard, executor="inprocess", **run)
        return
    ref = ray.put(prep)
    run_tasks(
        tasks(ref),
        score_shard,
        executor="ray",
        num_workers=workers,
        ray_options={"num_gpus": 1} if gpu else None,
        **run,
    )


def finish(
    cfg: AttributeConfig, store: ActivationStore, queries: Tensor, model, store_train: Tensor | None = None
) -> Tensor:
    """Gather the shards into `scores.safetensors` [n_train, n_query] (DRA: denoise and score here)."""
    from interp.store.safetensors_io import safetensors_bytes

    shards = [store.read_shard(i) for i in sorted(store.shard_indices)]
    extra = {}
    if cfg.method == "dra":
        from attribution.dra import RAW, DenoiseConfig, dra_scores

        reps = torch.cat([s["rep"] for s in shards])
        with torch.no_grad():
            targets = _representations(model, queries.to(model.device), cfg).cpu()
            if cfg.denoise and cfg.neutral_removal:
                from attribution.dra import hidden_representations, neutral_filtered_targets

                hook, ones = _dra_hook(model, cfg), torch.ones_like
                q = queries.to(model.device)
                tgt_tok = hidden_representations(model, q, ones(q), hook, cfg.batch_size, tokens=True)
                sample = store_train[:64].to(model.device)
                pool_tok = torch.cat(
                    hidden_representations(model, sample, ones(sample), hook, cfg.batch_size, tokens=True)
                )
                targets = neutral_filtered_targets(tgt_tok, pool_tok, cfg.neutral_removal)
        denoise = DenoiseConfig(center=cfg.center, whiten=cfg.whiten, select_dims=cfg.select_dims)
        res = dra_scores(reps, targets, denoise if cfg.denoise else RAW)
        scores = res.scores[:, None]
    else:
        scores = torch.cat([s["scores"] for s in shards])
        if cfg.method == "sdi":
            extra["sdi"] = torch.cat([s["sdi"] for s in shards])
    # metadata in a fixed order (safetensors' own `save` shuffles it): equal runs give equal bytes
    data = safetensors_bytes({"scores": scores, **extra}, {"method": cfg.method, "model": cfg.model})
    atomic_write_bytes(Path(store.path) / "scores.safetensors", data)
    return scores


def load_scores(out: str | Path) -> dict[str, Tensor]:
    """The scores a finished run wrote: {"scores": [n_train, n_query], ("sdi": [n_train, n_query, tau])}."""
    from safetensors.torch import load_file

    return load_file(str(Path(out) / "scores.safetensors"))
