"""Faithfulness curves with controls, seeds and bootstrap intervals: the numbers behind `interp circuits curve`.

For one method on one task, at each circuit size (edges for EAP / EAP-IG, heads for SafeSeek / pruning):

- **faithfulness**: the metric recovered with only the circuit's edges intact,
  (m(C alone) - m(nothing)) / (m(whole model) - m(nothing)) (`circuits.evaluation.faithfulness`);
- **complement**: the same with the circuit's edges ablated and every other edge kept (low = necessary);

for three series of equal size: the method's circuit, **random edges** and **random connected circuits** (random
input-to-logits paths; for node methods, random heads). Rows: each seed scores the method on its own sample of
the scoring rows (and seeds its mask search); every circuit is evaluated on one batch of evaluation rows that
never overlaps the scoring rows (`circuits.evaluation.split`; `split` in the result says which split and how many
rows). Controls: `control_draws` draws, each **nested** across sizes (one random order per draw, its prefixes:
the random circuit at a smaller size is a subset of the one at a larger size; `nested_random_masks`). The 95%
interval is a bootstrap over the evaluation rows (rows resampled with replacement, the whole ratio recomputed
per resample): for the method averaged over seeds, for the controls over draws resampled too, so the interval
covers both the prompts and the draws; `per_seed` / `per_draw` list the seeds' and draws' own values. `mib`:
MIB's CPR and CMD of each series (`circuits.evaluation.mib`; `CurveConfig(mib_grid=True)` measures on MIB's grid).

    curve = faithfulness_curve(model, get_task("ioi"), CurveConfig(method="eap-ig", seeds=3))
    print(curve_table(curve))
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor

from circuits.evaluation.edge_patching import patched_metric, upstream_means
from circuits.evaluation.faithfulness import head_edges, nested_random_masks
from circuits.evaluation.mib import MIB_FRACTIONS, curve_scores, mib_sizes
from circuits.evaluation.split import disjoint_split
from circuits.model.residual_graph import EdgeGraph

EDGE_METHODS = ("eap", "eap-ig")
NODE_METHODS = ("safeseek", "prune")
EDGE_SIZES = (10, 30, 100, 300, 1000, 3000, 10000, 30000)
HEAD_SIZES = (1, 2, 5, 10, 20, 40, 80, 160)
CONTROLS = ("random", "random-connected")


@dataclass
class CurveConfig:
    """Settings of a faithfulness curve."""

    method: str = "eap-ig"
    """eap, eap-ig (edge rankings) or safeseek, prune (head rankings, as the edges among the kept heads)."""
    sizes: tuple[int, ...] = ()
    """Circuit sizes: edges for edge methods, heads for node methods; empty: a log grid below the graph's size."""
    mib_grid: bool = False
    """Measure at MIB's sizes instead (0.1% ... 100% of the graph's edges, or heads), where CPR/CMD are MIB's own."""
    n_prompts: int = 16
    """Scoring rows each seed scores the method on (drawn from rows that are never evaluation rows)."""
    n_eval: int = 16
    """Evaluation rows every circuit is evaluated on (the bootstrap resamples these)."""
    eval_file: str | None = None
    """A prompts file of evaluation rows; None: split the task's own rows (`circuits.evaluation.split`)."""
    seeds: int = 3
    control_draws: int = 5
    """Draws of each random control, each nested across sizes."""
    n_boot: int = 1000
    metric: str = "auto"
    """logit-diff, prob, kl, or auto (the task's default)."""
    ablation: str = "corrupt"
    """How edges outside the circuit are ablated: corrupt, mean or zero."""
    ig_steps: int = 5
    node_steps: int = 30
    """SafeSeek / pruning mask steps."""
    batch_size: int = 16

    def __post_init__(self) -> None:
        if self.method not in EDGE_METHODS + NODE_METHODS:
            raise ValueError(f"unknown method {self.method!r}; use {', '.join(EDGE_METHODS + NODE_METHODS)}")
        for name in ("n_prompts", "n_eval", "seeds", "control_draws", "n_boot", "ig_steps", "node_steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if any(s < 1 for s in self.sizes):
            raise ValueError(f"sizes must be >= 1, got {self.sizes}")
        if self.mib_grid and self.sizes:
            raise ValueError("give sizes or MIB's grid, not both")

    @property
    def unit(self) -> str:
        return "edges" if self.method in EDGE_METHODS else "heads"


@dataclass
class _Series:
    keep: list[list[Tensor]] = field(default_factory=list)
    """[size][seed or draw] per-row metric with only the circuit kept."""
    comp: list[list[Tensor]] = field(default_factory=list)
    n_edges: list[list[int]] = field(default_factory=list)


def _ranking_masks(
    model, task, cfg: CurveConfig, graph: EdgeGraph, seed: int, sizes: list[int], metric: str
) -> list[Tensor]:
    """The method's circuits at each size, scored on the prompts of `seed`."""
    if cfg.method in EDGE_METHODS:
        from circuits.finders.eap import eap, eap_ig

        batch = task.make_pairs(cfg.n_prompts, seed, model.tokenizer, aligned_for="edges")
        scores = eap(model, batch, metric) if cfg.method == "eap" else eap_ig(model, batch, metric, steps=cfg.ig_steps)
        return [scores.top_mask(k) for k in sizes]
    order = head_order(model, task, cfg.method, cfg.node_steps, seed, cfg.n_prompts)
    return [head_edges(graph, set(order[:k])) for k in sizes]


def head_order(model, task, method: str, steps: int, seed: int, n: int = 32) -> list[tuple[int, int]]:
    """Every head (layer, head), the circuit's first: SafeSeek by lowest mask logit (removed first), pruning by tau."""
    if method == "safeseek":
        from circuits.finders.safeseek import SafeSeekConfig, safeseek

        cfg = SafeSeekConfig(
            units=("head",),
            steps=steps,
            batch_size=8,
            n_train=max(n, 8),
            n_val=max(n // 2, 4),
            eval_every=max(steps // 4, 1),
            lr=5e-2,
            seed=seed,
        )
        logits = safeseek(model, task, cfg, progress=False).masks["m"].logits
        vals = {k: p.detach().tolist() for k, p in logits.items()}
        sign = 1.0
    else:
        from circuits.finders.prune import PruneConfig, TargetNotReached, prune

        cfg = PruneConfig(
            kinds=("head",),
            steps=steps,
            lambda_steps=1,
            n_train=max(n, 8),
            n_eval=max(n, 8),
            batch_size=8,
            target_loss=10.0,
            k_coef=1e-3,
            seed=seed,
        )
        try:
            circuit = prune(model, task, cfg, progress=False)
        except TargetNotReached as exc:
            circuit = exc.best
        vals = circuit.extra.get("node_scores", {})
        sign = -1.0
    ranked = sorted((sign * v, int(k.split("_")[-1]), h) for k, vs in vals.items() for h, v in enumerate(vs))
    return [(layer, h) for _, layer, h in ranked]


def _nested_heads(graph: EdgeGraph, sizes: list[int], seed: int) -> list[Tensor]:
    """One random order of the heads; at k heads its first k (as their induced edges): nested across sizes."""
    g = torch.Generator().manual_seed(seed)
    heads = [(layer, h) for layer in range(graph.n_layers) for h in range(graph.n_heads)]
    order = [heads[i] for i in torch.randperm(len(heads), generator=g).tolist()]
    return [head_edges(graph, set(order[:k])) for k in sizes]


def _bootstrap(
    full: Tensor, empty: Tensor, series: list[Tensor], n_boot: int, seed: int, over_draws: bool = False
) -> tuple[float, float, float]:
    """Mean over seeds (draws) of the normalised metric, and its 95% bootstrap interval over rows (and, with
    `over_draws`, over the draws too: each resample also draws the draws with replacement)."""
    stacked = torch.stack(series)  # [seeds, rows]

    def ratio(idx, which):
        f, e = full[idx].mean(), empty[idx].mean()
        gap = f - e
        gap = torch.where(gap.abs() < 1e-12, torch.full_like(gap, 1e-12), gap)
        return ((stacked[which][..., idx].mean(-1) - e) / gap).mean(0)

    every = torch.arange(len(stacked))
    point = float(ratio(torch.arange(len(full)), every))
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(len(full), (n_boot, len(full)), generator=g)
    draws = torch.randint(len(stacked), (n_boot, len(stacked)), generator=g) if over_draws else None
    boots = torch.stack([ratio(i, every if draws is None else draws[b]) for b, i in enumerate(idx)])
    lo, hi = torch.quantile(boots, torch.tensor([0.025, 0.975])).tolist()
    return point, lo, hi


def curve_sizes(cfg: CurveConfig, graph: EdgeGraph) -> list[int]:
    """The sizes measured: MIB's grid, the given sizes, or the default log grid below the graph's size."""
    total = graph.n_edges if cfg.unit == "edges" else graph.n_layers * graph.n_heads
    if cfg.mib_grid:
        return mib_sizes(total)
    if cfg.sizes:
        return list(cfg.sizes)
    return [s for s in (EDGE_SIZES if cfg.unit == "edges" else HEAD_SIZES) if s < total] or [max(1, total // 2)]


def faithfulness_curve(model, task, cfg: CurveConfig | None = None, progress=None) -> dict:
    """The curve of `cfg.method` on `task`, with both controls; a dict of plain numbers (see the module doc)."""
    cfg = cfg or CurveConfig()
    t0 = time.perf_counter()
    log = progress or (lambda msg: None)
    graph = EdgeGraph.of(model)
    metric = task.default_metric if cfg.metric == "auto" else cfg.metric
    n_heads = graph.n_layers * graph.n_heads
    sizes = curve_sizes(cfg, graph)
    split = disjoint_split(task, cfg.n_prompts, cfg.n_eval, cfg.eval_file)
    log(f"rows: {split.info['split']} ({split.info['n_eval_rows']} evaluation rows)")
    batch = split.eval_batch(model.tokenizer, align=cfg.ablation == "corrupt")
    cache: dict = {}
    means = upstream_means(model, batch, graph, cfg.batch_size) if cfg.ablation == "mean" else None

    def rows(mask: Tensor) -> Tensor:
        return patched_metric(model, batch, mask, metric, cfg.ablation, means, cfg.batch_size, graph, cache)["metric"]

    def add(s: _Series, j: int, m: Tensor) -> None:
        s.keep[j].append(rows(m))
        s.comp[j].append(rows(graph.valid & ~m))
        s.n_edges[j].append(int((m & graph.valid).sum()))

    full, empty = rows(graph.valid), rows(torch.zeros_like(graph.valid))
    names = (cfg.method, *CONTROLS)
    series = {name: _Series([[] for _ in sizes], [[] for _ in sizes], [[] for _ in sizes]) for name in names}
    for seed in range(cfg.seeds):
        ts = time.perf_counter()
        masks = _ranking_masks(model, split.task, cfg, graph, seed, sizes, metric)
        log(f"seed {seed}: {cfg.method} scored in {time.perf_counter() - ts:.1f}s")
        for j, mask in enumerate(masks):
            add(series[cfg.method], j, mask)
    # the controls match the method's edge count at each size (its mean over seeds, for head rankings)
    n_e = [round(sum(x) / len(x)) for x in series[cfg.method].n_edges]
    for d in range(cfg.control_draws):
        connected = (
            nested_random_masks(graph, n_e, seed=2000 + d, connected=True)
            if cfg.unit == "edges"
            else _nested_heads(graph, sizes, seed=2000 + d)
        )
        for j, (r, c) in enumerate(zip(nested_random_masks(graph, n_e, seed=1000 + d), connected)):
            add(series["random"], j, r)
            add(series["random-connected"], j, c)
    log(
        f"{len(sizes)} sizes x ({cfg.seeds} seeds + 2 x {cfg.control_draws} control draws) evaluated "
        f"({time.perf_counter() - t0:.0f}s)"
    )
    points = []
    for name in names:
        s = series[name]
        control = name in CONTROLS
        for j, k in enumerate(sizes):
            f, flo, fhi = _bootstrap(full, empty, s.keep[j], cfg.n_boot, seed=j, over_draws=control)
            c, clo, chi = _bootstrap(full, empty, s.comp[j], cfg.n_boot, seed=j, over_draws=control)
            per = [_bootstrap(full, empty, [x], 1, 0)[0] for x in s.keep[j]]
            points.append(
                {
                    "series": name,
                    "size": k,
                    "n_edges": round(sum(s.n_edges[j]) / len(s.n_edges[j]), 1),
                    "faithfulness": f,
                    "faithfulness_ci": [flo, fhi],
                    "complement": c,
                    "complement_ci": [clo, chi],
                    ("per_draw" if control else "per_seed"): [round(v, 4) for v in per],
                }
            )
    result = {
        "task": task.name,
        "method": cfg.method,
        "unit": cfg.unit,
        "metric": metric,
        "ablation": cfg.ablation,
        "model": getattr(model, "provenance", {}),
        "n_edges_graph": graph.n_edges,
        "n_heads_graph": n_heads,
        "full_metric": float(full.mean()),
        "ablated_metric": float(empty.mean()),
        "split": split.info,
        "controls": {
            "draws": cfg.control_draws,
            "nested": True,
            "note": f"{cfg.control_draws} draws per control, each one random order with its prefixes taken, so a "
            "control circuit at a smaller size is a subset of the one at a larger size; 95% intervals of the "
            "controls resample the draws and the evaluation rows",
        },
        "config": asdict(cfg),
        "points": points,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    result["reach_80"] = crossing(result)
    result["mib"] = curve_scores(result, list(MIB_FRACTIONS) if cfg.mib_grid else None)
    return result


def curve_table(curve: dict) -> str:
    """Markdown: one row per series and size (faithfulness, complement, 95% intervals, per seed or draw), then one
    row per size with the controls side by side, the size that reaches 80% faithfulness, MIB's CPR and CMD, and
    which rows and control draws the curve used."""
    reach = crossing(curve)
    lo, hi = reach["ci"]
    unit = curve["unit"]

    def size(x):
        return f"> {max(p['size'] for p in curve['points']):,}" if x is None else f"{x:,}"

    notes = [
        f"{curve['method']} reaches 80% faithfulness at {size(reach['size'])} {unit} (95% interval, at the "
        f"grid's resolution: {size(lo)} to {size(hi)}; per seed: {', '.join(size(x) for x in reach['per_seed'])})."
    ]
    if curve.get("mib"):
        notes.append(mib_text(curve))
    if curve.get("split"):
        sp = curve["split"]
        notes.append(
            f"Rows: {sp['split']}; {sp['n_eval_rows']} evaluation rows, {sp['n_scoring_rows_per_seed']} scoring rows "
            "per seed, none of them an evaluation row"
            + (
                f" ({sp['dropped_from_scoring']} rows equal to an evaluation row left out)"
                if sp.get("dropped_from_scoring")
                else ""
            )
            + "."
        )
    if curve.get("controls"):
        notes.append(f"Controls: {curve['controls']['note']}.")
    return _long_table(curve) + "\n\n" + curve_wide_table(curve) + "\n\n" + "\n\n".join(notes)


def mib_text(curve: dict) -> str:
    """One sentence: CPR and CMD of the method and the controls, and the x range they integrate over."""
    m = curve["mib"]
    lo, hi = m["x_range"]
    where = (
        "on MIB's grid (0.1% to 100% of the graph)"
        if m["grid"] == "mib"
        else f"over the measured sizes only ({lo:.2%} to {hi:.2%} of the graph: not MIB's range, see --sizes mib)"
    )
    parts = [f"{name} {v['cpr']:.3f} / {v['cmd']:.3f}" for name, v in m["series"].items()]
    return f"MIB's CPR (higher is better) / CMD (lower is better), trapezoid {where}: " + "; ".join(parts) + "."


def _long_table(curve: dict) -> str:
    heads = curve["unit"] == "heads"
    lines = [
        "| series | "
        + ("heads | " if heads else "")
        + "edges | faithfulness (95% CI) | complement (95% CI) | per seed (method) or draw (controls) |",
        "|---" * (6 if heads else 5) + "|",
    ]
    for p in curve["points"]:
        lo, hi = p["faithfulness_ci"]
        clo, chi = p["complement_ci"]
        size = f"{p['size']:,} | " if heads else ""
        runs = p.get("per_seed", p.get("per_draw", []))
        lines.append(
            f"| {p['series']} | {size}{p['n_edges']:,.0f} | {p['faithfulness']:.3f} [{lo:.3f}, {hi:.3f}] "
            f"| {p['complement']:.3f} [{clo:.3f}, {chi:.3f}] | {', '.join(f'{v:.3f}' for v in runs)} |"
        )
    return "\n".join(lines)


def _by_series(curve: dict) -> dict[str, dict[int, dict]]:
    out: dict[str, dict[int, dict]] = {}
    for p in curve["points"]:
        out.setdefault(p["series"], {})[p["size"]] = p
    return out


def crossing(curve: dict, level: float = 0.8) -> dict:
    """The smallest size at which the method's faithfulness reaches `level`: by the point estimate, with an
    interval at the grid's resolution (first size whose 95% upper / lower bound reaches it) and per seed;
    None where no size of the grid reaches it."""
    pts = sorted(_by_series(curve)[curve["method"]].values(), key=lambda p: p["size"])

    def first(values):
        return next((p["size"] for p, v in zip(pts, values) if v >= level), None)

    n_seeds = len(pts[0]["per_seed"]) if pts else 0
    return {
        "level": level,
        "size": first([p["faithfulness"] for p in pts]),
        "ci": [first([p["faithfulness_ci"][1] for p in pts]), first([p["faithfulness_ci"][0] for p in pts])],
        "per_seed": [first([p["per_seed"][s] for p in pts]) for s in range(n_seeds)],
    }


def curve_wide_table(curve: dict) -> str:
    """One row per size: the method's faithfulness and complement, and both controls' (95% intervals)."""
    by = _by_series(curve)
    method = curve["method"]

    def num(x: float) -> str:
        return f"{x:.2f}".replace("-0.00", "0.00")

    def cell(p, key):
        lo, hi = p[key + "_ci"]
        return f"{num(p[key])} [{num(lo)}, {num(hi)}]"

    heads = curve["unit"] == "heads"
    control = "random heads" if heads else "random connected"
    lines = [
        ("| heads | edges " if heads else "| edges ")
        + f"| faithfulness | complement | random edges: faithf. / compl. | {control}: faithf. / compl. |",
        "|---" * (6 if heads else 5) + "|",
    ]
    for size in sorted(by[method]):
        p, r, c = by[method][size], by["random"][size], by["random-connected"][size]
        first = f"| {size:,} | {p['n_edges']:,.0f} " if heads else f"| {size:,} "
        lines.append(
            f"{first}| {cell(p, 'faithfulness')} | {cell(p, 'complement')} "
            f"| {cell(r, 'faithfulness')} / {cell(r, 'complement')} | {cell(c, 'faithfulness')} / "
            f"{cell(c, 'complement')} |"
        )
    return "\n".join(lines)
