"""One entry point for every finder: baseline first, refuse a task the model cannot do, then find the circuit.

    result = extract(model, get_task("ioi"), ExtractConfig(method="eap-ig", top_n=200))
    result["baseline"], result["circuit"].metrics["faithfulness"]

Methods: `eap`, `eap-ig` (edge circuits, `circuits.finders.eap`), `prune` (weight-sparse node pruning),
`safeseek` (SafeSeek masks), `activation-diff` (the control: the units whose mean activation differs
most between the task's two prompt sets, at a given budget).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from circuits.evaluation.ablation import check_ablation
from circuits.evaluation.baseline import baseline, require_ability
from circuits.tasks.metrics import METRICS

METHODS = ("eap", "eap-ig", "prune", "safeseek", "activation-diff")


@dataclass
class ExtractConfig:
    """What to extract and how."""

    method: str = "eap-ig"
    """eap, eap-ig, prune, safeseek or activation-diff."""
    metric: str = "auto"
    """logit-diff, prob, kl, or auto (the task's default)."""
    ablation: str = "auto"
    """zero, mean, corrupt, or auto (the method's paper default; see `circuits.evaluation.ablation`)."""
    n_prompts: int = 64
    """Rows used for the baseline and for edge attribution."""
    top_n: int | None = None
    """Edge circuits: keep the top_n edges by |score| (default 200 when no threshold)."""
    threshold: float | None = None
    """Edge circuits: keep the edges with |score| >= threshold."""
    ig_steps: int = 5
    """EAP-IG interpolation points."""
    budget: int | None = None
    """activation-diff: number of units to keep (required)."""
    min_accuracy: float = 0.7
    """Refuse the task when the model's clean accuracy is below this."""
    seed: int = 0
    batch_size: int = 16
    positions: bool = False
    """Edge circuits: one node per component and token position (`circuits.finders.eap_positions`)."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; use {', '.join(METHODS)}")
        if self.metric != "auto" and self.metric not in METRICS:
            raise ValueError(f"unknown metric {self.metric!r}; use {', '.join(METRICS)} or auto")
        self.ablation = check_ablation(self.ablation, self.method)
        if self.top_n is not None and self.threshold is not None:
            raise ValueError("give --top-n or --threshold, not both")
        if self.top_n is not None and self.top_n < 1:
            raise ValueError(f"--top-n must be >= 1, got {self.top_n}")
        if self.method == "activation-diff" and not self.budget:
            raise ValueError("activation-diff needs --budget (the number of units, e.g. the size of another circuit)")
        if self.n_prompts < 1 or self.ig_steps < 1:
            raise ValueError("--max-rows and --ig-steps must be >= 1")
        if self.positions and self.method not in ("eap", "eap-ig"):
            raise ValueError(f"--positions is for the edge methods eap and eap-ig, not {self.method}")
        if not 0 <= self.min_accuracy <= 1:
            raise ValueError(f"--min-accuracy must be in [0, 1], got {self.min_accuracy}")


def task_baseline(model, task, cfg: ExtractConfig) -> dict:
    """The model's metric and accuracy on the task's prompts (the first thing `extract` reports)."""
    edge = cfg.method in ("eap", "eap-ig")
    batch = task.make_pairs(
        cfg.n_prompts,
        cfg.seed,
        model.tokenizer,
        align=edge or cfg.ablation == "corrupt",
        aligned_for="edges" if edge else "ablation",  # edge scores patch from the pairs whatever the ablation
    )
    metric = task.default_metric if cfg.metric == "auto" else cfg.metric
    return {"task": task.name, **baseline(model, batch, metric, cfg.batch_size)}, batch


def extract(model, task, cfg: ExtractConfig, progress: bool = True, on_baseline=None) -> dict:
    """{"baseline": {...}, "circuit": Circuit}; raises `TaskTooHard` before any search when the model fails the task.

    `on_baseline(report)` is called with the baseline as soon as it is measured (the CLI prints it).
    """
    base, batch = task_baseline(model, task, cfg)
    if on_baseline:
        on_baseline(base)
    require_ability(base, task.name, cfg.min_accuracy)
    metric = base["metric"]
    prov = {"model": model.provenance, "task": task.name, "ablation": cfg.ablation, "config": asdict(cfg)}
    if cfg.method in ("eap", "eap-ig"):
        circuit = _edge_circuit(model, batch, metric, cfg, prov, progress)
    elif cfg.method == "prune":
        from circuits.finders.prune import PruneConfig, prune

        circuit = prune(model, task, PruneConfig(ablation=cfg.ablation, seed=cfg.seed), progress=progress)
    elif cfg.method == "safeseek":
        from circuits.finders.safeseek import SafeSeekConfig, safeseek

        circuit = safeseek(model, task, SafeSeekConfig(ablation=cfg.ablation, seed=cfg.seed), progress=progress).circuit
    else:
        from circuits.evaluation.controls import activation_difference

        circuit = activation_difference(model, task, cfg.budget, seed=cfg.seed)
    circuit.provenance.update({k: v for k, v in prov.items() if k not in circuit.provenance})
    circuit.provenance["ablation"] = cfg.ablation
    circuit.metrics["baseline"] = base
    return {"baseline": base, "circuit": circuit}


def _edge_circuit(model, batch, metric: str, cfg: ExtractConfig, prov: dict, progress: bool):
    from circuits.evaluation.edge_patching import patched_metric
    from circuits.finders.eap import edge_scores
    from circuits.tasks.metrics import normalised

    scores = edge_scores(
        model, batch, metric, cfg.method, cfg.ig_steps, cfg.batch_size, progress=progress, positions=cfg.positions
    )
    top_n = cfg.top_n if cfg.top_n is not None or cfg.threshold is not None else 200
    mask = scores.top_mask(top_n) if top_n is not None else scores.threshold_mask(cfg.threshold)
    full = patched_metric(model, batch, mask | True, metric, cfg.ablation, batch_size=cfg.batch_size)["metric"].mean()
    empty = patched_metric(model, batch, mask & False, metric, cfg.ablation, batch_size=cfg.batch_size)["metric"].mean()
    run = patched_metric(model, batch, mask, metric, cfg.ablation, batch_size=cfg.batch_size)
    m = float(run["metric"].mean())
    metrics = {
        "metric": metric,
        "circuit_metric": m,
        "full_metric": float(full),
        "ablated_metric": float(empty),
        "faithfulness": normalised(m, float(full), float(empty)),
        "circuit_accuracy": float(run["accuracy"].mean()),
    }
    sel = {"top_n": top_n} if top_n is not None else {"threshold": cfg.threshold}
    return scores.to_circuit(
        **sel, provenance={k: v for k, v in prov.items() if k != "config"} | {"config": asdict(cfg)}, metrics=metrics
    )
