"""Task-circuit pruning (Gao et al. 2025, App. A.5): the smallest set of nodes that keeps a task's loss low.

One parameter tau per node, clamped to [-1, 1] and initialised N(0.1, 0.01^2); forward mask
m = 1[tau >= 0] (Heaviside), backward the sigmoid-derivative surrogate sigma'(tau/T)/T; masked nodes are
mean-ablated (x m + mu (1 - m), mu the mean activation over pretraining-like data). Loss = task loss +
lambda * (number of kept nodes), AdamW(lr 3e-3, betas 0.9/0.95, wd 1e-3), gradient clip 1.

lambda is bisected (in log space) towards the largest value whose thresholded circuit still reaches the
target task loss; the best ordering of tau is then discretised by bisection over k, the number of
kept nodes (the smallest k whose circuit has task loss <= target). Circuit size is reported in nodes
and in edges (nonzero weights between kept nodes, `circuits.format.edges`).

Nodes (`PruneConfig.kinds`): q, k, v channels, MLP neurons, and the residual channels written by the
attention and MLP outputs. The paper's residual *reads* (attn_in, mlp_in) have no hook point of their
own in the toolkit and are not masked.

If the whole model does not reach the target, `TargetNotReached` is raised before any training, its
`best` the whole model (edges not listed past the cap of `circuits.format.edges`), so nothing is spent on a
search that cannot succeed. Necessity (the circuit ablated, the rest kept) and
sufficiency (the circuit alone) losses are both reported, and every node's tau is saved.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import torch
from interp.infra import logs

from interp.infra.checks import require_numbers
from circuits.evaluation.ablation import evaluate
from circuits.format.edges import circuit_edges
from circuits.format.circuit import Circuit, Node
from circuits.finders.masks import UnitMasks, mask_hooks, site_means, sites_of
from circuits.tasks.binary import Task, TaskBatch, binary_loss


@dataclass
class PruneConfig:
    """Settings of a pruning run."""

    kinds: tuple[str, ...] = ("q", "k", "v", "neuron", "attn_out", "mlp_out")
    target_loss: float = 0.15
    """Task loss (binary CE per prompt, nats) the circuit must reach."""
    k_coef: float = 1e-4
    """Initial lambda (the paper's search centre)."""
    lambda_steps: int = 3
    """Bisection steps over lambda (each trains the masks once)."""
    lambda_range: tuple[float, float] = (1e-6, 1e-1)
    steps: int = 300
    """Mask-training steps per lambda (the paper: ~2000 on GPUs)."""
    batch_size: int = 64
    lr: float = 3e-3
    weight_decay: float = 1e-3
    ablation: str = "mean"
    """mean (the paper's) or zero."""
    n_train: int = 512
    n_eval: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        if self.ablation not in ("mean", "zero"):
            raise ValueError(f"ablation must be 'mean' or 'zero', got {self.ablation!r}")
        if self.target_loss <= 0:
            raise ValueError(f"target_loss must be positive, got {self.target_loss}")
        require_numbers(self, positive_int=("steps", "batch_size", "n_train", "n_eval", "lambda_steps"),
                        positive=("lr",), non_negative=("k_coef", "weight_decay"))
        lo, hi = self.lambda_range
        if not 0 < lo <= hi:
            raise ValueError(f"lambda_range must satisfy 0 < low <= high, got {self.lambda_range}")


class TargetNotReached(RuntimeError):
    """No circuit reached the target loss; `best` is the best circuit found (lowest loss)."""

    def __init__(self, message: str, best: Circuit):
        super().__init__(message)
        self.best = best


def train_masks(model, task_batch: TaskBatch, cfg: PruneConfig, lam: float, means, progress: bool = False) -> UnitMasks:
    """Train node masks at one lambda; returns them (tau clamped to [-1, 1])."""
    masks = UnitMasks(model, cfg.kinds, init=0.1, init_std=0.01, gate="ste", means=means, clamp=(-1.0, 1.0), seed=cfg.seed)
    opt = torch.optim.AdamW(masks.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    gen = torch.Generator().manual_seed(cfg.seed)
    for step in logs.progress(range(cfg.steps), desc=f"masks lambda={lam:.1e}", enabled=progress, leave=False):
        idx = torch.randperm(len(task_batch), generator=gen)[: cfg.batch_size]
        b = TaskBatch([], *(t[idx] for t in (task_batch.ids, task_batch.mask, task_batch.pos, task_batch.target, task_batch.alt)))
        b = b.to(model.device)
        with model.hooks(fwd_hooks=masks.hooks()):
            loss = binary_loss(model({"input_ids": b.ids, "attention_mask": b.mask}), b) + lam * masks.kept_count()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(masks.parameters(), 1.0)
        opt.step()
        masks.clamp_()
    return masks


def _order(masks: UnitMasks) -> list[tuple[str, int]]:
    """All units (site key, index) by decreasing tau."""
    items = [(float(v), key, i) for key, p in masks.logits.items() for i, v in enumerate(p.detach().tolist())]
    items.sort(key=lambda x: -x[0])
    return [(key, i) for _, key, i in items]


def _binary(masks: UnitMasks, kept: list[tuple[str, int]]) -> dict[str, torch.Tensor]:
    values = {s.key: torch.zeros(s.size) for s in masks.sites}
    for key, i in kept:
        values[key][i] = 1.0
    return values


def _loss_with(model, masks: UnitMasks, values, batch: TaskBatch) -> float:
    return evaluate(model, batch, mask_hooks(masks.sites, values, masks.means))["loss"]


def bisect_k(n: int, loss_at, target: float) -> tuple[int, float] | None:
    """Smallest k in [1, n] with loss_at(k) <= target (loss assumed non-increasing in k), or None."""
    if loss_at(n) > target:
        return None
    lo, hi = 0, n  # loss_at(hi) <= target; lo is "not known to pass"
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if loss_at(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi, loss_at(hi)


def _nodes(masks: UnitMasks, kept) -> list[Node]:
    by_key = {s.key: s for s in masks.sites}
    return sorted(Node(by_key[key].layer, by_key[key].kind, i) for key, i in kept)


def prune(model, task: Task, cfg: PruneConfig | None = None, mean_batches=None, progress: bool = True) -> Circuit:
    """The smallest node circuit of `task` whose (mean-ablated) task loss is <= cfg.target_loss.

    `mean_batches`: (ids, mask) pairs of pretraining-like text for the ablation means (default: the
    task's own prompts). Raises `TargetNotReached` (with `.best`) when no circuit reaches the target.
    """
    cfg = cfg or PruneConfig()
    t0 = time.perf_counter()
    for p in model.parameters():
        p.requires_grad_(False)
    train = task.make(cfg.n_train, cfg.seed, model.tokenizer)
    held = task.make(cfg.n_eval, cfg.seed + 10_000, model.tokenizer)
    sites = sites_of(model, cfg.kinds)
    means = None
    if cfg.ablation == "mean":
        means = site_means(model, sites, mean_batches or [(train.ids, train.mask)])
    full_loss = evaluate(model, held)["loss"]
    n_units = sum(s.size for s in sites)
    if full_loss > cfg.target_loss:  # no subset of the model does better than the whole: say so before training
        nodes = [Node(st.layer, st.kind, i) for st in sites for i in range(st.size)]
        edges, counts = circuit_edges(model, nodes)
        # the same metric keys as a searched circuit, so callers read one shape: necessity is every node ablated
        nothing = {st.key: torch.zeros(st.size) for st in sites}
        necessity = evaluate(model, held, mask_hooks(sites, nothing, means))["loss"]
        best = Circuit(nodes, edges, {"task_loss": full_loss, "sufficiency_loss": full_loss,
                                      "target_loss": cfg.target_loss, "reached_target": False, "n_nodes": len(nodes), **counts, "n_units": n_units,
                                      "lambda": None, "full_model_loss": full_loss, "necessity_loss": necessity,
                                      "lambda_history": [], "seconds": round(time.perf_counter() - t0, 2),
                                      "warnings": ["the circuit is the whole model, which misses the target"]},
                       {"model": model.provenance, "task": task.name, "method": "prune", "ablation": cfg.ablation,
                        "config": asdict(cfg)})
        raise TargetNotReached(
            f"no circuit reached task loss {cfg.target_loss} on {task.name!r}: the whole model scores {full_loss:.3f} on "
            f"held-out prompts, and no subset of it can do better. Raise --target-loss above {full_loss:.3f} (e.g. "
            f"{1.5 * full_loss:.2f}) or train the model on the task. The best circuit is the whole model", best)
    memo: dict = {}
    best: dict | None = None  # {"kept": [...], "loss": float, "lambda": float}

    def consider(kept, loss, lam):
        nonlocal best
        ok = loss <= cfg.target_loss
        better = best is None or (ok and (best["loss"] > cfg.target_loss or len(kept) < len(best["kept"]))) or \
            (not ok and best["loss"] > cfg.target_loss and loss < best["loss"])
        if better:
            best = {"kept": kept, "loss": loss, "lambda": lam, "masks": masks_now[0]}

    lo, hi = math.log(cfg.lambda_range[0]), math.log(cfg.lambda_range[1])
    lam = cfg.k_coef
    history = []
    bar = logs.progress(range(max(1, cfg.lambda_steps)), desc=f"prune {task.name}", enabled=progress)
    last_masks = None
    masks_now = [None]
    for it in bar:
        masks = train_masks(model, train, cfg, lam, means)
        masks_now[0] = masks
        order = _order(masks)
        n_on = sum(int(v.sum()) for v in masks.binary().values())
        loss_on = _loss_with(model, masks, masks.binary(), held)
        history.append({"lambda": lam, "kept": n_on, "loss": loss_on})
        consider(order[:n_on], loss_on, lam)

        def loss_at(k, masks=masks, order=order, it=it):
            key = (it, k)
            if key not in memo:
                memo[key] = _loss_with(model, masks, _binary(masks, order[:k]), held)
            return memo[key]

        found = bisect_k(len(order), loss_at, cfg.target_loss)
        if found is not None:  # always, since the whole model reaches the target (checked above)
            consider(order[: found[0]], found[1], lam)
        last_masks = masks
        bar.set_postfix(lam=f"{lam:.1e}", kept=n_on, loss=f"{loss_on:.3f}")
        if loss_on <= cfg.target_loss:  # circuit reaches the target: push lambda up
            lo = math.log(lam)
        else:
            hi = math.log(lam)
        lam = math.exp((lo + hi) / 2)
    kept = best["kept"]
    nodes = _nodes(last_masks, kept)
    edges, edge_counts = circuit_edges(model, nodes)
    values = _binary(last_masks, kept)
    necessity = evaluate(model, held, mask_hooks(last_masks.sites, {k: 1 - v for k, v in values.items()}, means))["loss"]
    metrics = {"task_loss": best["loss"], "sufficiency_loss": best["loss"], "target_loss": cfg.target_loss,
               "reached_target": best["loss"] <= cfg.target_loss,
               "n_nodes": len(nodes), **edge_counts, "n_units": n_units, "lambda": best["lambda"],
               "full_model_loss": full_loss, "necessity_loss": necessity, "lambda_history": history,
               "seconds": round(time.perf_counter() - t0, 2)}
    if len(nodes) == n_units:
        metrics["warnings"] = ["the circuit is the whole model: no smaller set of nodes reached the target"]
    tau = best["masks"].logits
    extra = {"node_scores": {k: [round(float(v), 5) for v in p.detach().tolist()] for k, p in tau.items()},
             "node_scores_meaning": "tau per unit of each site (kind_layer) of the chosen lambda; kept units are the "
                                    "n_nodes largest"}
    circuit = Circuit(nodes, edges, metrics, {"model": model.provenance, "task": task.name, "method": "prune",
                                              "ablation": cfg.ablation, "config": asdict(cfg)}, extra)
    if not metrics["reached_target"]:
        raise TargetNotReached(
            f"no circuit reached task loss {cfg.target_loss} on {task.name!r} (best {best['loss']:.3f} with "
            f"{len(nodes)} of {n_units} nodes; the whole model scores {full_loss:.3f}). Train the model longer on "
            "the task, or raise --target-loss.", circuit)
    return circuit
