"""A gradient store: per-example training gradients projected once, then any number of query sets against it.

    interp attribute build --model SPEC --train tokens:train.safetensors --out runs/grads [--projection random]
    interp attribute query --store runs/grads --queries tokens:q.safetensors --out runs/q1 [--precondition adam]

*Build* (`build_store`): each training sequence's gradient (mean next-token loss) with respect to the chosen
parameters (`--modules` globs; default every Linear / LayerNorm / Embedding inside the layers, or the looped
block) is projected to a fixed dimension and written as shards of an `interp.store.ActivationStore` (rows =
training sequences, hook `grad` [dim], `seq` = training row). Two projections:

- `random`: a seeded Gaussian matrix per parameter tensor, `R_t [numel_t, dim] / sqrt(dim)`, summed over
  tensors (a Johnson-Lindenstrauss projection of the whole gradient, as TRAK / LESS / Bergson do). It needs the
  exact per-example gradient of a batch (`[batch, n_params]`) and keeps the matrices in memory
  (`4 * n_params * dim` bytes): for small and medium models.
- `sketch`: the TensorSketch of `attribution.sketch` (`dim` buckets per parameter tensor, so the row has
  `n_tensors * dim` entries), built from activations and output gradients without ever forming a per-example
  gradient: for large models.

The manifest's meta records what the rows mean, and a store is refused for any other: the model's weights hash,
the parameter list (names and shapes), the projection (kind, seed, dim), the loss, the training data (spec,
tokens hash, sequence count) and the sha256 of each shard's training rows (`row_hashes`). Shards are
`interp.infra.jobs.run_tasks` tasks (in-process or Ray); a build killed at any point (kill -9 included)
resumes: committed shards are kept, partial files removed, the missing shards computed.

*Query* (`attribution.resident.query_store`, `GradientIndex`): the query set's own gradients only (exact, then
preconditioned, then projected with the store's projection), and a matmul streamed over the store's shards, one at a
time, keeping the running top-k per query: memory is one shard plus `n_query * top`, whatever the store's size.
Preconditioning is applied on the query side only, so one store serves several methods: `none` (gradient dot
product, TracIn at one checkpoint), `adam` (the inverse square root of Adam's second moments at a checkpoint,
`attribution.adam`), `diag` (the inverse of a damped diagonal empirical Fisher fitted on training sequences). Since
`P^T P ~ I` for both projections, `<P g_train, P (D g_query)>` estimates `g_train^T D g_query`. `--faiss` searches
with a FAISS inner-product index instead when `faiss` imports (optional extra). Scores are helpfulness (positive:
training on the row lowers the query's loss), as for TracIn."""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor

from attribution.gradstore_config import BuildConfig, QueryConfig
from interp.infra.jobs import run_tasks, worker_cache
from interp.store import ActivationStore, StoreMeta, write_shard_file

HOOK = "grad"
KIND = "interp.attribution.gradient_store"


# ------------------------------------------------------------------------------------------- projection
@dataclass(frozen=True)
class Projection:
    kind: str
    dim: int
    seed: int

    def to_dict(self) -> dict:
        return asdict(self)


def _model_sha256(model) -> str:
    prov = getattr(model, "provenance", {}) or {}
    if prov.get("weights_sha256"):
        return prov["weights_sha256"]
    from interp.models.registry import state_sha256

    return state_sha256(model.hf_model)


def featurizer_for(hf, modules: list[str], projection: Projection):
    """The exact featurizer of the chosen modules, and (sketch) the sketched one that shares its hashes."""
    from attribution.capture import GradientFeaturizer
    from attribution.jobs import _groups

    groups = _groups(hf, modules)
    exact = GradientFeaturizer(groups, sketch_dim=None, seed=projection.seed)
    sketched = (
        GradientFeaturizer(groups, sketch_dim=projection.dim, seed=projection.seed)
        if projection.kind == "sketch"
        else None
    )
    return exact, sketched


def parameter_list(hf, featurizer) -> list[dict]:
    """[{"name", "shape"}] of the parameter tensors covered, in feature order (names as in the state dict)."""
    names = {id(p): n for n, p in hf.named_parameters()}
    return [
        {"name": names.get(id(p), f"{g}.{part}"), "shape": list(p.shape)} for g, part, p in featurizer.param_tensors()
    ]


class Projector:
    """Maps exact per-example gradient vectors (and, for the sketch, activations) to the store's rows."""

    def __init__(self, exact, sketched, projection: Projection, device):
        self.exact, self.sketched, self.p, self.device = exact, sketched, projection, device
        self.tensors = exact.param_tensors()
        self.sizes = [p.numel() for _, _, p in self.tensors]
        self._mats: dict[int, Tensor] = {}

    @property
    def out_dim(self) -> int:
        return self.p.dim if self.p.kind == "random" else len(self.tensors) * self.p.dim

    def _matrix(self, k: int) -> Tensor:
        if k not in self._mats:
            from attribution.sketch import param_seed

            g, part, p = self.tensors[k]
            gen = torch.Generator().manual_seed(param_seed(self.p.seed, f"projection|{g}", part))
            self._mats[k] = (torch.randn(p.numel(), self.p.dim, generator=gen) / math.sqrt(self.p.dim)).to(self.device)
        return self._mats[k]

    def project(self, g: Tensor) -> Tensor:
        """[batch, n_params] exact gradients -> [batch, out_dim] rows."""
        from attribution.sketch import count_sketch, explicit_outer_sketch

        parts = torch.split(g.float(), self.sizes, dim=-1)
        if self.p.kind == "random":
            return sum(x @ self._matrix(k) for k, x in enumerate(parts))
        out = []
        feat = self.sketched
        for (group, part, p), x in zip(self.tensors, parts):
            kind, owner = feat.kinds[group]
            if part == "bias" or kind == "layernorm":
                out.append(count_sketch(x, feat._hash(group, part, x.shape[-1], x.device)))
            elif kind == "embedding":
                vocab, d = p.shape
                h_tok = feat._hash(group, "weight_in", vocab, x.device)
                h_d = feat._hash(group, "weight_out", d, x.device)
                out.append(explicit_outer_sketch(x.view(-1, vocab, d), h_d, h_tok))
            else:
                d_out, d_in = p.shape
                h_in = feat._hash(group, "weight_in", d_in, x.device)
                h_out = feat._hash(group, "weight_out", d_out, x.device)
                out.append(explicit_outer_sketch(x.view(-1, d_out, d_in), h_in, h_out))
        return torch.cat(out, -1)

    def exact_gradients(self, hf, ids: Tensor) -> Tensor:
        """[batch, n_params]: each sequence's exact gradient of its mean next-token loss."""
        return self.exact(hf, ids, None).sum(1).float()

    def train_rows(self, hf, ids: Tensor, batch_size: int) -> Tensor:
        """[n, out_dim] rows of training sequences (the sketch never forms a per-example gradient)."""
        rows = []
        for i in range(0, len(ids), batch_size):
            b = ids[i : i + batch_size]
            if self.p.kind == "sketch":
                rows.append(self.sketched(hf, b, None).sum(1).float())
            else:
                rows.append(self.project(self.exact_gradients(hf, b)))
        return torch.cat(rows).cpu()


def _projector(cfg_model: str, device: str, modules: list[str], projection: Projection):
    from attribution.jobs import _load

    model = _load(cfg_model, device)

    def make():
        exact, sketched = featurizer_for(model.hf_model, modules, projection)
        return Projector(exact, sketched, projection, model.device)

    key = ("attribution-gradstore-projector", cfg_model, device, tuple(modules), projection)
    return model, worker_cache(key, make)


# ------------------------------------------------------------------------------------------- build
def row_sha256(rows: Tensor) -> str:
    return hashlib.sha256(rows.to(torch.int64).contiguous().numpy().tobytes()).hexdigest()


@dataclass(frozen=True)
class BuildTask:
    """One shard of the build: training rows [start, start + len(tokens)) (its own rows only, cloned)."""

    index: int
    start: int
    tokens: Tensor
    model: str
    device: str
    modules: tuple[str, ...]
    projection: Projection
    batch_size: int
    out: str

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["tokens"] = self.tokens.clone()  # a view would pickle the whole training tensor
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


def build_shard(task: BuildTask):
    """Compute one shard's projected gradients and write its file; returns the `ShardInfo` to commit."""
    model, proj = _projector(task.model, task.device, list(task.modules), task.projection)
    rows = proj.train_rows(model.hf_model, task.tokens.to(model.device), task.batch_size)
    check_finite_rows(  # never committed: a NaN row would head every top-k of every query
        rows,
        f"the gradients of training rows {task.start}..{task.start + len(rows) - 1}",
        f"the model's loss is not finite on them; check the weights of {task.model}",
        task.start,
    )
    n = len(task.tokens)
    return write_shard_file(
        task.out,
        task.index,
        {
            HOOK: rows,
            "tokens": task.tokens[:, 0].to(torch.int32),
            "seq": torch.arange(task.start, task.start + n),
            "pos": torch.zeros(n, dtype=torch.int32),
        },
    )


def store_meta(cfg: BuildConfig, model, proj: Projector, train: Tensor, tokenizer: str) -> StoreMeta:
    shards = [train[i : i + cfg.shard_size] for i in range(0, len(train), cfg.shard_size)]
    desc = {
        "kind": KIND,
        "train": cfg.train,
        "n_train": len(train),
        "train_tokens_sha256": row_sha256(train),
        "shard_size": cfg.shard_size,
        "row_hashes": [row_sha256(s) for s in shards],
        "parameters": parameter_list(model.hf_model, proj.exact),
        "modules": list(cfg.modules),
        "projection": proj.p.to_dict(),
        "loss": "mean next-token cross-entropy per sequence",
    }
    return StoreMeta(
        model=cfg.model,
        model_sha256=_model_sha256(model),
        hooks={HOOK: [proj.out_dim]},
        dtype="float32",
        tokenizer=tokenizer,
        ctx_len=int(train.shape[1]),
        data=desc,
    )


def build_store(cfg: BuildConfig, progress: bool | str = True) -> dict:
    """Build (or resume) the gradient store in `cfg.out`; returns a summary."""
    from attribution.jobs import load_tokens, tokenizer_name
    from attribution.raywatch import ray_for_job
    from interp.store.lock import holding

    t0 = time.perf_counter()
    projection = Projection(cfg.projection, cfg.dim, cfg.seed)
    model, proj = _projector(cfg.model, cfg.device, cfg.modules, projection)
    tok = model.tokenizer
    # checked for the model (ids, lengths, tokenizer) before the store folder is touched
    train, train_tok = load_tokens(cfg.train, tok, cfg.ctx_len, cfg.max_train, cfg.seed, model, "--train")
    model_tok = tokenizer_name(tok) if tok is not None else ""
    meta = store_meta(cfg, model, proj, train, train_tok or model_tok)
    out = Path(cfg.out)
    n_shards = (len(train) + cfg.shard_size - 1) // cfg.shard_size
    if (out / "manifest.json").exists():  # refuse another build's store before anything (the lock file too) is written
        from interp.store.manifest import read_manifest

        ActivationStore(out, read_manifest(out))._check_meta(meta)
    with ray_for_job(cfg.executor, cfg.ray_address, cfg.num_workers) as ray, holding(out, "the gradient store"):
        store = ActivationStore.open_or_create(out, meta, n_shards_planned=n_shards)
        try:
            store.clean_partial()
            todo = store.missing()
            gpu = cfg.device.startswith("cuda")
            dev = "cuda" if cfg.executor == "ray" and gpu else cfg.device
            tasks = [
                BuildTask(
                    i,
                    i * cfg.shard_size,
                    train[i * cfg.shard_size : (i + 1) * cfg.shard_size],
                    cfg.model,
                    dev,
                    tuple(cfg.modules),
                    projection,
                    cfg.batch_size,
                    str(out),
                )
                for i in todo
            ]
            run_tasks(
                tasks,
                build_shard,
                executor="ray" if ray is not None else "inprocess",
                num_workers=cfg.num_workers,
                on_result=store.commit_shard,
                progress=progress,
                desc="gradient store",
                ray_options={"num_gpus": 1} if gpu and ray is not None else None,
            )
        finally:
            store.close()
    return {
        "out": str(out),
        "n_train": len(train),
        "dim": proj.out_dim,
        "projection": projection.to_dict(),
        "parameters": len(meta.data["parameters"]),
        "n_params": sum(proj.sizes),
        "shards": n_shards,
        "shards_computed_now": len(todo),
        "seconds": round(time.perf_counter() - t0, 2),
    }


# ------------------------------------------------------------------------------------------- query
def open_gradient_store(path: str | Path) -> ActivationStore:
    """The store at `path`, checked to be a gradient store; ValueError naming what is wrong."""
    import warnings

    from interp.store import NotAStoreError, StoreError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = ActivationStore.open(path)
    except NotAStoreError:
        what = "does not exist" if not Path(path).exists() else "has no manifest.json"
        raise ValueError(
            f"--store {path} is not a gradient store: the folder {what}; give the folder `interp attribute build "
            "--out DIR` wrote"
        ) from None
    except StoreError as e:
        raise ValueError(f"--store {path}: damaged manifest ({e})") from None
    if store.meta.data.get("kind") != KIND or HOOK not in store.hooks:
        raise ValueError(f"--store {path} is not a gradient store (it was not written by `interp attribute build`)")
    if not store.complete:
        gaps = store.missing()
        raise ValueError(
            f"--store {path} is incomplete ({len(gaps)} of {store.manifest.n_shards_planned} shards "
            "missing): rerun `interp attribute build` with the same settings to finish it"
        )
    return store


def _check_projection(cfg: QueryConfig, store: ActivationStore) -> None:
    sp = store.meta.data["projection"]
    for name in ("projection", "dim", "seed"):
        want = getattr(cfg, name)
        have = sp["kind" if name == "projection" else name]
        if want is not None and want != have:
            raise ValueError(
                f"projection mismatch: the store {store.path} was projected with {name} {have!r}, "
                f"this query asks for {want!r}; query with the store's projection or build a new store"
            )


def _check_compatible(cfg: QueryConfig, store: ActivationStore, model, proj: Projector) -> None:
    data = store.meta.data
    sha = _model_sha256(model)
    if sha != store.meta.model_sha256:
        raise ValueError(
            f"the store {store.path} was built for another model: {store.meta.model!r} (weights sha256 "
            f"{store.meta.model_sha256[:12]}...), the query model {cfg.model or store.meta.model!r} has "
            f"{sha[:12]}...; query with the model the store was built from"
        )
    params = parameter_list(model.hf_model, proj.exact)
    if params != data["parameters"]:
        have = [p["name"] for p in data["parameters"]]
        got = [p["name"] for p in params]
        diff = sorted(set(have) ^ set(got))[:4] or have[:2]
        raise ValueError(
            f"the store {store.path} was built for another parameter set ({len(have)} tensors, e.g. "
            f"{have[:2]}), this query covers {len(got)} (differing: {diff}); query with the store's "
            f"--modules {','.join(data['modules']) or '(default)'}"
        )
    if proj.out_dim != store.hooks[HOOK][0]:
        raise ValueError(
            f"projection mismatch: the store's rows have {store.hooks[HOOK][0]} entries, the projection "
            f"gives {proj.out_dim}"
        )


def _preconditioner(cfg: QueryConfig, store: ActivationStore, model, proj: Projector) -> Tensor | None:
    """[n_params] elementwise query-side preconditioner, or None."""
    if cfg.precondition == "none":
        return None
    names = [p["name"] for p in store.meta.data["parameters"]]
    if cfg.precondition == "adam":
        from attribution.adam import AdamState

        state = AdamState.load(cfg.adam_state)
        lacking = [n for n in names if n not in state.exp_avg_sq]
        if lacking:
            raise ValueError(
                f"--adam-state {cfg.adam_state} has no second moments for {lacking[:3]}: it was saved "
                "from another model"
            )
        v = torch.cat([state.exp_avg_sq[n].flatten() for n in names]).to(model.device)
        return 1.0 / (v.sqrt() + state.eps)
    from attribution.jobs import load_tokens

    train, _ = load_tokens(
        store.meta.data["train"],
        model.tokenizer,
        store.meta.ctx_len,
        cfg.fit_samples,
        int(store.meta.data["projection"]["seed"]),
        model,
        "the store's training data",
    )
    fit = train[: cfg.fit_samples].to(model.device)
    f = 0
    for i in range(0, len(fit), cfg.batch_size):
        f = f + proj.exact_gradients(model.hf_model, fit[i : i + cfg.batch_size]).pow(2).sum(0)
    f = f / len(fit)
    return 1.0 / (f + cfg.damping * f.mean().clamp_min(1e-12))


_UNSET = object()


def query_vectors(
    cfg: QueryConfig, store: ActivationStore, model, proj: Projector, queries: Tensor, pre: object = _UNSET
) -> Tensor:
    """[n_query, dim]: the queries' gradients, preconditioned, projected with the store's projection (`pre`: the
    preconditioner already computed, None for none; default: computed now)."""
    pre = _preconditioner(cfg, store, model, proj) if pre is _UNSET else pre
    out = []
    for i in range(0, len(queries), cfg.batch_size):
        g = proj.exact_gradients(model.hf_model, queries[i : i + cfg.batch_size].to(model.device))
        out.append(proj.project(g if pre is None else g * pre).cpu())
    q = torch.cat(out)
    check_finite_rows(
        q,
        f"the query gradients of {cfg.queries}",
        "the model's loss is not finite on those queries (damaged weights?) or the preconditioner overflowed",
    )
    return q


def check_finite_rows(rows: Tensor, what: str, fix: str, first_row: int = 0) -> None:
    """Refuse gradient rows with NaN or inf: a NaN score sorts above every real one in a top-k (`topk` takes
    NaN as the largest value), so one bad row would head every query's list."""
    bad = ~torch.isfinite(rows).all(-1)
    if bad.any():
        at = (bad.nonzero()[:, 0][:3] + first_row).tolist()
        raise ValueError(f"{what} holds {int(bad.sum())} non-finite rows (NaN or inf; rows {at}): {fix}")


def read_gradient_shard(store: ActivationStore, i: int) -> dict[str, Tensor]:
    """Shard `i` of a gradient store (rows and `seq`), checked: a damaged file or non-finite rows are refused."""
    from interp.store import StoreCorruptError

    name = store.shard_info(i).file
    try:
        shard = store.read_shard(i, hooks=HOOK)
    except (StoreCorruptError, OSError) as e:
        raise ValueError(f"damaged shard {name} in {store.path}: {e}") from None
    check_finite_rows(
        shard[HOOK],
        f"shard {name} of the gradient store {store.path}",
        "the build diverged or the shard was damaged after it was written; build the store again into a new --out",
        int(shard["seq"][0]) if len(shard["seq"]) else 0,
    )
    return shard


def streamed_topk(store: ActivationStore, q: Tensor, top: int) -> tuple[Tensor, Tensor]:
    """(scores [n_query, top], rows [n_query, top]) of `store rows @ q.T`, one shard in memory at a time."""
    best_s = torch.full((len(q), 0), float("-inf"))
    best_i = torch.zeros((len(q), 0), dtype=torch.int64)
    qt = q.T.contiguous()
    for i in store.shard_indices:
        shard = read_gradient_shard(store, i)
        s = (shard[HOOK] @ qt).T  # [n_query, rows]
        best_s = torch.cat([best_s, s], 1)
        best_i = torch.cat([best_i, shard["seq"].expand(len(q), -1)], 1)
        k = min(top, best_s.shape[1])
        best_s, pos = best_s.topk(k, dim=1)
        best_i = best_i.gather(1, pos)
    return best_s, best_i


def faiss_topk(store: ActivationStore, q: Tensor, top: int) -> tuple[Tensor, Tensor]:
    """The same top-k through a FAISS exact inner-product index (`IndexFlatIP`), filled shard by shard."""
    try:
        import faiss
    except ImportError:
        raise ValueError("--faiss needs the faiss package: pip install faiss-cpu") from None
    index = faiss.IndexFlatIP(q.shape[1])
    seqs = []
    for i in store.shard_indices:
        shard = read_gradient_shard(store, i)
        index.add(shard[HOOK].numpy())
        seqs.append(shard["seq"])
    scores, pos = index.search(q.numpy(), min(top, index.ntotal))
    return torch.from_numpy(scores), torch.cat(seqs)[torch.from_numpy(pos)]


def write_results(out: str | Path, summary: dict, scores: Tensor, rows: Tensor) -> None:
    from safetensors.torch import save

    from interp.store.atomic import atomic_write_bytes
    from interp.store.lock import holding

    out = Path(out)
    with holding(out, "the query output folder"):
        atomic_write_bytes(out / "topk.safetensors", save({"scores": scores.contiguous(), "rows": rows.contiguous()}))
        atomic_write_bytes(out / "topk.json", json.dumps(summary, indent=1).encode())


def exact_topk(
    model_spec: str,
    train: Tensor,
    queries: Tensor,
    modules: list[str],
    projection: Projection,
    top: int,
    device: str = "cpu",
    batch_size: int = 16,
) -> tuple[Tensor, Tensor]:
    """The direct computation (no store): project every training row now, one full matmul, top-k."""
    model, proj = _projector(model_spec, device, modules, projection)
    rows = proj.train_rows(model.hf_model, train.to(model.device), batch_size)
    q = torch.cat(
        [
            proj.project(proj.exact_gradients(model.hf_model, queries[i : i + batch_size].to(model.device))).cpu()
            for i in range(0, len(queries), batch_size)
        ]
    )
    s = (rows @ q.T).T
    vals, idx = s.topk(min(top, len(train)), dim=1)
    return vals, idx
