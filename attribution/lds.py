"""Linear datamodeling score (LDS): do attribution scores predict what retraining on a subset does?

The counterfactual test of TRAK (Park et al. 2023), also used by Kronfluence, dattri and Bergson:

1. draw M random subsets S_1..S_M of the training set, each a fraction `alpha` of it (`random_subsets`);
2. retrain on each subset with fixed seeds and record every query's loss L_q(S_m) (`retrain_subsets`);
3. an attribution method's prediction for subset m is the sum of its scores over the subset,
   `g_q(S_m) = sum_{i in S_m} score[i, q]`;
4. LDS = mean over queries of Spearman(g_q(S_m), -L_q(S_m)) over m (`lds`).

Sign convention: every score here is *helpfulness* (positive = the training example lowers the query's loss:
TracIn, gradient dot products, EK-FAC with the query's log-likelihood as measurement). A helpful subset should
give a low loss, so the prediction is correlated with the *negated* loss; a method scored with the opposite
sign gets the LDS negated, which the test of the metric checks.

Retraining runs are shards of `interp.infra.jobs.run_tasks` (in-process or Ray): each shard trains a few subsets
and writes their query losses as one shard of an `interp.store.ActivationStore` whose rows are subsets (`loss`
[row, n_query], `seq` = subset index), with the task's identity (model, data hashes, training settings, the
subsets' hash) in its manifest. A run killed at any point (kill -9 included) resumes from the committed shards:
nothing is lost or counted twice, and a store made for another task or other subsets is refused.

>>> masks = random_subsets(n_train=512, n_subsets=50, alpha=0.5, seed=0)
>>> losses = retrain_subsets(task, masks, "runs/lds/retrain")          # [M, n_query], resumable
>>> lds(scores, masks, losses).mean                                      # scores: [n_train, n_query]
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

# ----------------------------------------------------------------------------------------- the metric


def check_lds_args(n_subsets: int, alpha: float) -> None:
    """The shared validation of M and alpha (the CLI turns the ValueError into one `error:` line)."""
    if int(n_subsets) < 2:
        raise ValueError(f"LDS needs at least 2 subsets (a rank correlation over subsets), got M = {n_subsets}")
    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"the subset fraction alpha must be strictly between 0 and 1, got {alpha}")


def random_subsets(n_train: int, n_subsets: int, alpha: float = 0.5, seed: int = 0) -> Tensor:
    """[M, n_train] boolean masks, each with exactly round(alpha * n_train) rows, drawn with a seeded generator."""
    check_lds_args(n_subsets, alpha)
    k = int(round(alpha * n_train))
    if not 0 < k < n_train:
        raise ValueError(f"alpha {alpha} of {n_train} training rows gives subsets of {k} rows; need 0 < size < n_train")
    g = torch.Generator().manual_seed(seed)
    masks = torch.zeros(n_subsets, n_train, dtype=torch.bool)
    for m in range(n_subsets):
        masks[m, torch.randperm(n_train, generator=g)[:k]] = True
    return masks


def subset_predictions(scores: Tensor, masks: Tensor) -> Tensor:
    """[M, n_query]: the summed scores of each subset's rows (the linear datamodel's prediction)."""
    if scores.shape[0] != masks.shape[1]:
        raise ValueError(f"scores have {scores.shape[0]} training rows, the subsets {masks.shape[1]}")
    return masks.to(torch.float64) @ scores.to(torch.float64)


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks along axis 0 (ties share their mean rank), column by column."""
    from scipy.stats import rankdata

    return rankdata(x, axis=0)


def spearman_columns(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman correlation of each column of a with the same column of b ([M, Q] -> [Q]); NaN for a constant column."""
    ra, rb = _ranks(a), _ranks(b)
    ra = ra - ra.mean(0)
    rb = rb - rb.mean(0)
    den = np.sqrt((ra**2).sum(0) * (rb**2).sum(0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (ra * rb).sum(0) / np.where(den > 0, den, 1.0), np.nan)


@dataclass(frozen=True)
class LDSResult:
    """LDS of one method: the mean over queries, a bootstrap interval and the per-query correlations."""

    mean: float
    low: float
    high: float
    per_query: list[float]

    def to_dict(self) -> dict:
        return {"lds": self.mean, "ci95": [self.low, self.high], "per_query": self.per_query}

    def __str__(self) -> str:
        return f"{self.mean:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


def lds(
    scores: Tensor, masks: Tensor, losses: Tensor, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> LDSResult:
    """LDS of helpfulness `scores` [n_train, n_query] against retrained `losses` [M, n_query] on `masks` [M, n_train].

    The interval is a percentile bootstrap that resamples subsets and queries together (both are random draws:
    the subsets from all possible ones, the queries from the task's distribution). Queries whose retrained loss
    does not vary (or whose prediction does not) have no correlation and are left out of the mean.
    """
    if losses.shape != (masks.shape[0], scores.shape[1]):
        raise ValueError(
            f"losses {tuple(losses.shape)} do not match {masks.shape[0]} subsets x {scores.shape[1]} queries"
        )
    check_lds_args(masks.shape[0], 0.5)
    pred = subset_predictions(scores, masks).numpy()
    target = -losses.to(torch.float64).numpy()
    per_query = spearman_columns(pred, target)
    ok = ~np.isnan(per_query)
    if not ok.any():
        raise ValueError("no query has a varying retrained loss and prediction: LDS is undefined")
    rng = np.random.default_rng(seed)
    m, q = pred.shape
    boots = []
    for _ in range(n_boot):
        rows, cols = rng.integers(0, m, m), rng.integers(0, q, q)
        rho = spearman_columns(pred[rows][:, cols], target[rows][:, cols])
        if not np.isnan(rho).all():
            boots.append(np.nanmean(rho))
    tail = (1 - level) / 2
    low, high = np.quantile(boots, [tail, 1 - tail]) if boots else (np.nan, np.nan)
    return LDSResult(
        float(per_query[ok].mean()),
        float(low),
        float(high),
        [None if np.isnan(r) else round(float(r), 4) for r in per_query],
    )


def lds_difference(
    a: Tensor, b: Tensor, masks: Tensor, losses: Tensor, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> LDSResult:
    """LDS(a) - LDS(b) of two methods' scores on the same subsets, with a *paired* percentile bootstrap: each
    resample draws the subsets and queries once and scores both methods on them, so what the two share (which
    queries are hard, which subsets are odd) cancels. `per_query`: the per-query differences."""
    ra, rb = lds(a, masks, losses, n_boot=0), lds(b, masks, losses, n_boot=0)
    target = -losses.to(torch.float64).numpy()
    pa, pb = subset_predictions(a, masks).numpy(), subset_predictions(b, masks).numpy()
    rng = np.random.default_rng(seed)
    m, q = target.shape
    boots = []
    for _ in range(n_boot):
        rows, cols = rng.integers(0, m, m), rng.integers(0, q, q)
        t = target[rows][:, cols]
        da, db = spearman_columns(pa[rows][:, cols], t), spearman_columns(pb[rows][:, cols], t)
        if not (np.isnan(da).all() or np.isnan(db).all()):
            boots.append(np.nanmean(da) - np.nanmean(db))
    tail = (1 - level) / 2
    low, high = np.quantile(boots, [tail, 1 - tail]) if boots else (np.nan, np.nan)
    diff = [None if x is None or y is None else round(x - y, 4) for x, y in zip(ra.per_query, rb.per_query)]
    return LDSResult(ra.mean - rb.mean, float(low), float(high), diff)


# ----------------------------------------------------------------------------------------- retraining


class RetrainTask(Protocol):
    """What the harness retrains: picklable (it travels to Ray workers), so keep it small (paths, settings).

    `train_and_eval(rows)` trains from the task's fixed init and seeds on the training rows `rows` (sorted
    indices) and returns each query's loss [n_query]; `identity()` is what the losses depend on (model, data
    hashes, training settings), recorded in the store and compared when a run resumes.
    """

    n_train: int
    n_query: int

    def train_and_eval(self, rows: Tensor) -> Tensor: ...

    def identity(self) -> dict: ...


def masks_sha256(masks: Tensor) -> str:
    return hashlib.sha256(masks.to(torch.uint8).contiguous().numpy().tobytes()).hexdigest()


@dataclass(frozen=True)
class RetrainShard:
    """One task of the harness: the subsets [start, start + len(rows)) as row-index lists (only its own)."""

    index: int
    start: int
    rows: tuple[tuple[int, ...], ...]
    task: RetrainTask
    out: str


def retrain_shard(shard: RetrainShard) -> object:
    """Train every subset of the shard, write their query losses as one store shard; returns its ShardInfo."""
    from interp.store import write_shard_file

    losses = torch.stack(
        [shard.task.train_and_eval(torch.tensor(r, dtype=torch.long)).float().cpu() for r in shard.rows]
    )
    n = len(shard.rows)
    seq = torch.arange(shard.start, shard.start + n)
    return write_shard_file(
        shard.out,
        shard.index,
        {"loss": losses, "tokens": seq.to(torch.int32), "seq": seq, "pos": torch.zeros(n, dtype=torch.int32)},
    )


def retrain_subsets(
    task: RetrainTask,
    masks: Tensor,
    out: str | Path,
    shard_size: int = 5,
    executor: str = "inprocess",
    ray_address: str | None = None,
    num_workers: int | None = None,
    progress: bool | str = "auto",
) -> Tensor:
    """Query losses [M, n_query] of the task retrained on each subset; cached and resumable in the store at `out`."""
    from interp.infra.jobs import run_tasks
    from interp.store import ActivationStore, StoreMeta

    if masks.shape[1] != task.n_train:
        raise ValueError(f"subsets cover {masks.shape[1]} rows but the task has {task.n_train} training rows")
    ident = task.identity()
    meta = StoreMeta(
        model=str(ident.get("model", "")),
        model_sha256=str(ident.get("init_sha256", "")),
        hooks={"loss": [task.n_query]},
        dtype="float32",
        tokenizer=str(ident.get("tokenizer", "")),
        ctx_len=int(ident.get("ctx_len", 1)),
        data={
            "lds_task": ident,
            "subsets": {"n": int(masks.shape[0]), "n_train": int(masks.shape[1]), "sha256": masks_sha256(masks)},
            "shard_size": shard_size,
        },
    )
    n_shards = (len(masks) + shard_size - 1) // shard_size
    from attribution.raywatch import ray_for_job

    with ray_for_job(executor, ray_address, num_workers) as ray:  # a failed start leaves no store folder behind
        store = ActivationStore.open_or_create(out, meta, n_shards_planned=n_shards)
        try:
            store.clean_partial()
            todo = store.missing()
            rows = [tuple(torch.nonzero(m).flatten().tolist()) for m in masks]
            out_path = str(store.path)
            shards = [
                RetrainShard(i, i * shard_size, tuple(rows[i * shard_size : (i + 1) * shard_size]), task, out_path)
                for i in todo
            ]
            run_tasks(
                shards,
                retrain_shard,
                executor="ray" if ray is not None else "inprocess",
                num_workers=num_workers,
                on_result=store.commit_shard,
                progress=progress,
                desc="retrain subsets",
            )
            parts = [store.read_shard(i) for i in range(n_shards)]
        finally:
            store.close()
    seq = torch.cat([p["seq"] for p in parts])
    if not torch.equal(seq, torch.arange(len(masks))):  # every subset exactly once, in order
        raise RuntimeError(f"the store at {out} does not hold each subset once: {seq.tolist()[:20]}...")
    return torch.cat([p["loss"] for p in parts]).double()


def dattri_lds(scores: Tensor, masks: Tensor, losses: Tensor) -> list[float] | None:
    """dattri's LDS per query (an independent implementation of the metric), or None when dattri is not importable.

    dattri takes the ground truth with *its* sign convention (higher target = more helpful), so it is given the
    negated losses; its subsets as index rows."""
    try:
        from dattri.metric import lds as dattri_metric
    except ImportError:
        return None
    idx = torch.stack([torch.nonzero(m).flatten() for m in masks])
    rho, _ = dattri_metric(scores.double(), (-losses.double(), idx))
    return [float(x) for x in rho]


def find_lds(run: str | Path, result: dict) -> tuple[dict, str] | None:
    """The LDS of an attribution run's method, when an `interp attribute lds` result for the same training and
    query tokens sits in the run folder, its parent, or a sibling folder (`lds.json`): (its method entry, path)."""
    data = result.get("identity", {}).get("data", {})
    want = (data.get("train_tokens_sha256"), data.get("queries_tokens_sha256"))
    method = result.get("method")
    if not all(want) or not method:
        return None
    run = Path(run).resolve()
    candidates = [run / "lds.json", run.parent / "lds.json", *sorted(run.parent.glob("*/lds.json"))]
    for path in candidates:
        try:
            lds_result = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        task = lds_result.get("task", {})
        model_type = result.get("identity", {}).get("model", {}).get("model_type")
        kind = {"looped_gpt": "lds-looped", "gpt_neox": "lds-neox"}.get(model_type or "")
        if kind and task.get("model") != kind:  # the same tokens evaluated on another architecture
            continue
        entry = lds_result.get("methods", {}).get(method)
        if entry and (task.get("train_tokens_sha256"), task.get("query_tokens_sha256")) == want:
            return entry, str(path)
    return None


def write_json(path: Path, data: dict) -> None:
    from interp.store.atomic import atomic_write_bytes

    atomic_write_bytes(path, json.dumps(data, indent=1).encode())


def summarise(results: dict[str, LDSResult], order: Sequence[str] | None = None) -> str:
    """A plain-text table: method, LDS and its interval."""
    names = list(order or results)
    width = max(len(n) for n in names)
    return "\n".join(f"{n:<{width}}  LDS {results[n]}" for n in names if n in results)
