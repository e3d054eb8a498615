"""Feature-recovery referee on sae-lens's own synthetic benchmark (SynthSAEBench), scaled to a CPU: every
architecture of `sae.ARCHS` trained by our trainer, and the six sae-lens has by sae-lens's own `train_toy_sae`,
on the same samples at an equal target L0, scored by sae-lens's `eval_sae_on_synthetic_data` plus feature
recovery and FVU. Prints JSON rows and a per-(side, arch) mean ± std summary; writes --out.

    python -m sae.experiments.synthbench            # full: 3 seeds, 23 SAEs per seed (about 28 minutes, 1 thread)
    python -m sae.experiments.synthbench --quick    # smoke run (well under a minute)

The generator is sae-lens's `SyntheticModel` with the SynthSAEBench-16k configuration (docs/synth_sae_bench.md
of SAELens: 16,384 features in 768 dimensions; Zipfian firing, exponent 0.5, p in [5e-4, 0.4]; 128 hierarchy
roots, branching 4, depth 3, all children mutually exclusive, probability compensation, children scaled by
the parent; low-rank correlations rank 25, scale 0.1; orthogonalisation 100 steps at lr 3e-4; mean magnitudes
linear 5 -> 4; std magnitudes folded normal (0.5, 0.5); bias norm 0.5; seed 42; SAE width 4096 = features / 4;
L0 target = true L0 of the 4096 most frequent features; 200M samples at batch 1024), scaled by
`num_features / 16384` (default 512 / 16384 = 1/32): 512 features in 64 dimensions (8 features per dimension,
against 21.3), 4 hierarchy roots (128/32), correlation rank 1 (25/32 rounded up), 512,000 training samples (500
steps of 1024, against their 200M). One deliberate change: the SAE width is the number of true features (512),
not features / 4 (--d-sae; default target L0 = true L0 of the d_sae most frequent features, here all of them,
about 4.7 -> k = 5). At width features / 4 no SAE here puts a decoder row within cosine 0.9 of any true feature
(recovery 0 for TopK and BatchTopK alike, MCC 0.6-0.7), so recovery could not tell architectures apart. Every
firing, magnitude, hierarchy-shape and correlation-scale setting is theirs unchanged.

Same data: the training pool (sampled once from the generator) is what both sides see: ours as the tensor
`train_on_tensor` draws minibatches from, sae-lens's as the feature activations replayed in order to
`train_toy_sae` (`Replay`). The evaluation set (sampled once, after the pool) is replayed to
`eval_sae_on_synthetic_data` for every SAE. Our side: `make_sae` + `train_on_tensor` at its defaults
(lr 1e-3, batch 1024); sae-lens's side: its training classes at their config defaults + `train_toy_sae` at its
defaults (lr 3e-4 constant, batch 1024). Both are scored in the inference form sae-lens ships
(`sae.to_inference`, which uses sae-lens's own conversion: BatchTopK -> JumpReLU with its running threshold).
Equal L0: TopK-family archs take k = the target; penalty archs (relu, jumprelu, gated) get their sparsity
coefficient calibrated per side (`calibrate`: up to five full-length probes on seed 0, secant in log-log
space); our variants of them (c2r_relu, poly_relu, coh / c2r_jumprelu) take their base's calibrated coefficient.
The achieved L0 is reported.

Absorption (sae-lens's synthetic evals have none): on the generator's hierarchy, how often a parent's own latent
is silent while another latent carrying the parent's direction fires (`hierarchy_absorption`). L0 sweep:
`--l0 x0.5,x1,x2` (multiples of the true L0). Variants against their bases (`PAIRS`: c2r - batchtopk,
poly - topk, coh_topk - topk, coh - relu), same seed and target L0, are the output's `paired` rows:

    python -m sae.experiments.synthbench --sides ours --archs topk,batchtopk,c2r,poly,coh_topk --l0 x0.5,x1,x2
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from sae_lens.registry import SAE_TRAINING_CLASS_REGISTRY
from sae_lens.synthetic import (
    FoldedNormalMagnitudeConfig,
    HierarchyConfig,
    LinearMagnitudeConfig,
    LowRankCorrelationConfig,
    OrthogonalizationConfig,
    SyntheticModel,
    SyntheticModelConfig,
    ZipfianFiringProbabilityConfig,
    eval_sae_on_synthetic_data,
    train_toy_sae,
)

from sae import ARCHS, make_sae, to_inference
from sae import metrics as M
from sae.baselines import base_of, training_class
from sae.train import train_on_tensor

PRESET_FEATURES = 16_384
"""SynthSAEBench-16k's number of true features (the scale factor is num_features / this)."""

SAE_LENS_ARCHS: dict[str, str] = {
    "relu": "standard",
    "topk": "topk",
    "batchtopk": "batchtopk",
    "jumprelu": "jumprelu",
    "gated": "gated",
    "matryoshka": "matryoshka_batchtopk",
}
"""Our name -> sae-lens's own training architecture (their side of the referee)."""

SPARSITY_FIELD = {"relu": "l1_coefficient", "gated": "l1_coefficient", "jumprelu": "l0_coefficient"}
"""The sparsity coefficient of each penalty base (calibrated to the target L0)."""

FIELDS = (
    "side",
    "arch",
    "seed",
    "l0_target",
    "coef",
    "recovery",
    "recovery_top",
    "mcc",
    "f1",
    "precision",
    "recall",
    "uniqueness",
    "l0",
    "dead",
    "shrinkage",
    "explained_variance",
    "fvu",
    "true_l0",
    "absorption",
    "parent_latent_silent",
    "child_parent_cos",
    "seconds",
)
"""The columns of every row."""

PAIRS = {"c2r": "batchtopk", "poly": "topk", "coh_topk": "topk", "coh": "relu"}
"""Variant -> the base it is paired with (same seed, same target L0) in `paired`."""


def bench_config(num_features: int, hidden_dim: int, seed: int = 42, hierarchy: bool = True) -> SyntheticModelConfig:
    """SynthSAEBench-16k's configuration with the feature count, hierarchy roots and correlation rank scaled
    by num_features / 16384 (every other setting theirs); `hierarchy=False` drops the hierarchy (an ablation)."""
    s = num_features / PRESET_FEATURES
    return SyntheticModelConfig(
        num_features=num_features,
        hidden_dim=hidden_dim,
        firing_probability=ZipfianFiringProbabilityConfig(exponent=0.5, max_prob=0.4, min_prob=5e-4),
        hierarchy=None
        if not hierarchy
        else HierarchyConfig(
            total_root_nodes=max(1, round(128 * s)),
            branching_factor=4,
            max_depth=3,
            mutually_exclusive_portion=1.0,
            mutually_exclusive_min_depth=0,
            compensate_probabilities=True,
            scale_children_by_parent=True,
        ),
        orthogonalization=OrthogonalizationConfig(num_steps=100, lr=3e-4),
        correlation=LowRankCorrelationConfig(rank=max(1, math.ceil(25 * s)), correlation_scale=0.1),
        mean_firing_magnitudes=LinearMagnitudeConfig(start=5.0, end=4.0),
        std_firing_magnitudes=FoldedNormalMagnitudeConfig(mean=0.5, std=0.5),
        bias=0.5,
        seed=seed,
    )


class Replay:
    """Stored feature activations ([n, num_features], kept as CSR parts) handed out in order, wrapping around;
    called like sae-lens's ActivationGenerator (`gen(batch_size)`, `gen.sample(batch_size)`)."""

    def __init__(self, crow: torch.Tensor, col: torch.Tensor, val: torch.Tensor, num_features: int):
        self.crow, self.col, self.val, self.num_features = crow, col, val, num_features
        self.n, self.pos = len(crow) - 1, 0

    @classmethod
    def from_dense(cls, chunks: list[torch.Tensor]) -> Replay:
        crows, cols, vals, off = [torch.zeros(1, dtype=torch.long)], [], [], 0
        for f in chunks:
            nz = f.nonzero()
            counts = torch.bincount(nz[:, 0], minlength=len(f))
            crows.append(off + counts.cumsum(0))
            off += len(nz)
            cols.append(nz[:, 1])
            vals.append(f[nz[:, 0], nz[:, 1]])
        return cls(torch.cat(crows), torch.cat(cols), torch.cat(vals), chunks[0].shape[1])

    def rows(self, i: int, j: int) -> torch.Tensor:
        """Dense feature activations of stored rows i..j."""
        a, b = int(self.crow[i]), int(self.crow[j])
        out = torch.zeros(j - i, self.num_features)
        r = torch.repeat_interleave(torch.arange(j - i), self.crow[i + 1 : j + 1] - self.crow[i:j])
        out[r, self.col[a:b]] = self.val[a:b]
        return out

    def sample(self, batch_size: int) -> torch.Tensor:
        parts = []
        while batch_size > 0:
            take = min(batch_size, self.n - self.pos)
            parts.append(self.rows(self.pos, self.pos + take))
            self.pos, batch_size = (self.pos + take) % self.n, batch_size - take
        return torch.cat(parts)

    __call__ = sample

    def fresh(self) -> Replay:
        """The same rows, read from the start."""
        return Replay(self.crow, self.col, self.val, self.num_features)


@dataclass
class Bench:
    """The generator and the samples every SAE of a run trains and is scored on."""

    model: SyntheticModel
    x_train: torch.Tensor
    train: Replay
    x_eval: torch.Tensor
    eval: Replay
    top: torch.Tensor
    """Indices of the d_sae most frequent true features (on the eval set)."""
    true_l0: float
    true_l0_top: float
    """Mean number of active features among `top` per sample: the default target L0."""


def make_bench(
    num_features: int,
    hidden_dim: int,
    d_sae: int,
    n_train: int,
    n_eval: int,
    seed: int = 42,
    chunk: int = 8192,
    hierarchy: bool = True,
) -> Bench:
    """Build the scaled SynthSAEBench generator and sample the training pool then the evaluation set."""
    with contextlib.redirect_stderr(io.StringIO()):  # the orthogonaliser's progress bar
        model = SyntheticModel(bench_config(num_features, hidden_dim, seed, hierarchy))
    torch.manual_seed(seed + 1)

    @torch.no_grad()
    def draw(n: int) -> tuple[torch.Tensor, Replay]:
        fs, xs = [], []
        for i in range(0, n, chunk):
            f = model.activation_generator.sample(min(chunk, n - i))
            fs.append(f)
            xs.append(model.feature_dict(f))
        return torch.cat(xs), Replay.from_dense(fs)

    x_train, train = draw(n_train)
    x_eval, ev = draw(n_eval)
    f_eval = ev.rows(0, ev.n)
    active = f_eval > 0
    top = active.float().mean(0).argsort(descending=True)[:d_sae]
    return Bench(
        model=model,
        x_train=x_train,
        train=train,
        x_eval=x_eval,
        eval=ev,
        top=top,
        true_l0=float(active.sum(1).float().mean()),
        true_l0_top=float(active[:, top].sum(1).float().mean()),
    )


class _Atoms(torch.nn.Module):
    """An SAE seen through its linear atoms as W_dec (PolySAE's W_dec is not its decoder direction), for
    sae-lens's evaluator, which reads `W_dec`, `encode` and `decode`."""

    def __init__(self, sae: Any):
        super().__init__()
        self.sae = sae
        self.W_dec = torch.nn.Parameter(sae.linear_atoms().detach(), requires_grad=False)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.sae.encode(x)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.sae.decode(z)


def hierarchy_parents(model: SyntheticModel) -> list[tuple[int, list[int]]]:
    """(parent feature, its direct children's features) for every node of the generator's hierarchy that has
    children; [] without a hierarchy."""
    out: list[tuple[int, list[int]]] = []

    def walk(node: Any) -> None:
        kids = [c.feature_index for c in node.children if c.feature_index is not None]
        if node.feature_index is not None and kids:
            out.append((node.feature_index, kids))
        for c in node.children:
            walk(c)

    for root in model.hierarchy.roots if model.hierarchy is not None else []:
        walk(root)
    return out


@torch.no_grad()
def hierarchy_absorption(
    z: torch.Tensor,
    active: torch.Tensor,
    features: torch.Tensor,
    decoder: torch.Tensor,
    parents: list[tuple[int, list[int]]],
    cos_min: float = 0.4,
) -> dict[str, float]:
    """Absorption of parents into their children on the generator's hierarchy (sae-lens's synthetic evals have
    none). z: [n, d_sae] codes; active: [n, num_features] bool, which true features are on; features /
    decoder: unit true directions / unit decoder directions. A parent's latent is the one whose decoder is
    closest to the parent's direction; another latent with decoder cosine >= `cos_min` to it is one that
    carries the parent's direction.

    - absorption: mean over parents of P(the parent's latent is silent and a latent carrying the parent's
      direction fires | parent on), i.e. the parent is still written, by another latent (a child's); 0 for the
      true dictionary.
    - parent_latent_silent: mean over parents of P(parent's latent silent | parent on) (absorbed or missed).
    - child_parent_cos: threshold-free, mean over (parent, child) of the cosine between the child's best
      latent's decoder and the parent's direction (about the true directions' own cosine when nothing is
      absorbed; about 0.7 when a child latent writes parent + child at equal magnitude)."""
    if not parents:
        return {"absorption": float("nan"), "parent_latent_silent": float("nan"), "child_parent_cos": float("nan")}
    fired = z != 0
    absorbed, silent, cc = [], [], []
    for p, kids in parents:
        cos = decoder @ features[p]
        lat = int(cos.argmax())
        carriers = (cos >= cos_min).clone()
        carriers[lat] = False
        on = active[:, p]
        if not bool(on.any()):
            continue
        off = ~fired[on, lat]
        silent.append(float(off.float().mean()))
        absorbed.append(float((off & fired[on][:, carriers].any(1)).float().mean()))
        for c in kids:
            cc.append(float(features[p] @ decoder[int((decoder @ features[c]).argmax())]))
    return {
        "absorption": statistics.mean(absorbed),
        "parent_latent_silent": statistics.mean(silent),
        "child_parent_cos": statistics.mean(cc),
    }


@torch.no_grad()
def score(sae: Any, bench: Bench, cos_min: float = 0.9) -> dict[str, Any]:
    """sae-lens's own synthetic metrics of an (inference) SAE on the evaluation set (MCC, classification
    F1/precision/recall, uniqueness, L0, dead latents, shrinkage, explained variance), plus recovery: the
    fraction of all true features whose best (signed) decoder cosine exceeds `cos_min`, recovery_top: the same
    over the d_sae most frequent true features (the most an SAE of that width can hold), and FVU."""
    sae.eval()
    view = _Atoms(sae) if hasattr(sae, "linear_atoms") else sae
    r = eval_sae_on_synthetic_data(view, bench.model.feature_dict, bench.eval.fresh(), bench.eval.n, batch_size=4096)
    true = torch.nn.functional.normalize(bench.model.feature_dict.feature_vectors, dim=-1)
    dec = M.decoder_directions(sae)
    best = (true @ dec.T).max(1).values
    fvu = M.reconstruction(sae, bench.x_eval.split(4096))["fvu"]
    active = bench.eval.rows(0, bench.eval.n) > 0
    absorption = hierarchy_absorption(M.encode(sae, bench.x_eval), active, true, dec, hierarchy_parents(bench.model))
    return {
        "recovery": float((best > cos_min).float().mean()),
        "recovery_top": float((best[bench.top] > cos_min).float().mean()),
        "mcc": r.mcc,
        "f1": r.classification.f1_score,
        "precision": r.classification.precision,
        "recall": r.classification.recall,
        "uniqueness": r.uniqueness,
        "l0": r.sae_l0,
        "dead": r.dead_latents,
        "shrinkage": r.shrinkage,
        "explained_variance": r.explained_variance,
        "fvu": fvu,
        "true_l0": r.true_l0,
        **absorption,
    }


def _fields(side: str, arch: str) -> set[str]:
    cfg_cls = SAE_TRAINING_CLASS_REGISTRY[SAE_LENS_ARCHS[arch]][1] if side == "sae_lens" else training_class(arch)[1]
    return {f.name for f in dataclasses.fields(cfg_cls)}


def _settings(side: str, arch: str, d_sae: int, l0: float, coef: float | None) -> dict[str, Any]:
    names, kw = _fields(side, arch), {}
    if "k" in names:
        kw["k"] = max(1, round(l0))
    if "matryoshka_widths" in names:  # make_sae's default levels, given to sae-lens's too (it has no default)
        kw["matryoshka_widths"] = sorted({max(1, d_sae // 8), max(1, d_sae // 4), max(1, d_sae // 2), d_sae})
    field = SPARSITY_FIELD.get(base_of(arch))
    if coef is not None and field in names:
        kw[field] = coef
    return kw


def train_one(side: str, arch: str, bench: Bench, d_sae: int, steps: int, seed: int, kw: dict[str, Any]) -> Any:
    """A trained SAE: ours by `train_on_tensor` at its defaults, sae-lens's by `train_toy_sae` at its defaults,
    on `steps` x 1024 samples of the pool. Returns the inference form."""
    d_in = bench.x_train.shape[1]
    with contextlib.redirect_stderr(io.StringIO()):
        if side == "ours":
            sae = make_sae(arch, d_in, d_sae, seed=seed, **kw)
            train_on_tensor(sae, bench.x_train, steps, seed=seed)
        else:
            cls, cfg_cls = SAE_TRAINING_CLASS_REGISTRY[SAE_LENS_ARCHS[arch]]
            torch.manual_seed(seed)
            sae = cls(cfg_cls(d_in=d_in, d_sae=d_sae, **kw))
            train_toy_sae(sae, bench.model.feature_dict, bench.train.fresh(), training_samples=steps * 1024)
    return to_inference(sae)


def calibrate(side: str, arch: str, bench: Bench, d_sae: int, steps: int, l0: float, probes: int = 5) -> float:
    """The sparsity coefficient of a penalty arch whose full-length seed-0 run comes closest to L0 = `l0`: up to
    `probes` runs, each next coefficient from the secant of log L0 against log coefficient (slope -0.5 to start,
    clamped to [-3, -0.1], a step of at most 30x); stops within 10% of the target."""
    field = SPARSITY_FIELD[arch]
    c = float(_default(side, arch, field))
    hist: list[tuple[float, float]] = []
    for _ in range(probes):
        sae = train_one(side, arch, bench, d_sae, steps, 0, _settings(side, arch, d_sae, l0, c))
        z = M.encode(sae, bench.x_eval[:4096])
        hist.append((math.log(c), math.log(max(float((z != 0).float().sum(1).mean()), 1e-2))))
        if abs(hist[-1][1] - math.log(l0)) < math.log(1.1):
            break
        slope = -0.5
        if len(hist) > 1 and hist[-1][0] != hist[-2][0]:
            slope = (hist[-1][1] - hist[-2][1]) / (hist[-1][0] - hist[-2][0])
            slope = min(-0.1, max(-3.0, slope))
        step = (math.log(l0) - hist[-1][1]) / slope
        c = math.exp(hist[-1][0] + max(-math.log(30), min(math.log(30), step)))
    return math.exp(min(hist, key=lambda h: abs(h[1] - math.log(l0)))[0])


def _default(side: str, arch: str, field: str) -> float:
    if side == "ours":
        from sae.baselines import DEFAULTS

        return DEFAULTS.get(arch, {}).get(field, getattr(training_class(arch)[1], field))
    return getattr(SAE_TRAINING_CLASS_REGISTRY[SAE_LENS_ARCHS[arch]][1], field)


def run_bench(
    bench: Bench, archs: list[str], sides: list[str], seeds: list[int], l0s: list[float], d_sae: int, steps: int
) -> list[dict[str, Any]]:
    """Train and score every (l0, side, arch, seed); one row per SAE (columns `FIELDS`), printed as it comes."""
    rows = []
    for l0 in l0s:
        coefs: dict[tuple[str, str], float] = {}
        for side in sides:
            for arch in archs if side == "ours" else [a for a in archs if a in SAE_LENS_ARCHS]:
                base = base_of(arch)
                if base in SPARSITY_FIELD and (side, base) not in coefs:
                    coefs[side, base] = calibrate(side, base, bench, d_sae, steps, l0)
                coef = coefs.get((side, base))
                for seed in seeds:
                    t0 = time.perf_counter()
                    sae = train_one(side, arch, bench, d_sae, steps, seed, _settings(side, arch, d_sae, l0, coef))
                    row = {"side": side, "arch": arch, "seed": seed, "l0_target": l0, "coef": coef}
                    row.update(score(sae, bench))
                    row["seconds"] = time.perf_counter() - t0
                    rows.append(M.round_dict(row))
                    print(json.dumps(rows[-1]), flush=True)
    return rows


SUMMARY_COLS = ("recovery", "recovery_top", "mcc", "f1", "fvu", "l0", "dead", "absorption", "child_parent_cos")


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean ± std over seeds of the headline columns, per (l0_target, side, arch)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["l0_target"], r["side"], r["arch"]), []).append(r)
    out = []
    for (l0, side, arch), rs in groups.items():
        row: dict[str, Any] = {"l0_target": l0, "side": side, "arch": arch, "seeds": len(rs)}
        for col in SUMMARY_COLS:
            v = [float(r[col]) for r in rs]
            row[col] = f"{statistics.mean(v):.3f} ± {statistics.stdev(v) if len(v) > 1 else 0.0:.3f}"
        out.append(row)
    return out


def paired(rows: list[dict[str, Any]], pairs: dict[str, str] = PAIRS) -> list[dict[str, Any]]:
    """Variant minus base on the same seed and target L0 (same side), mean ± std over seeds, per
    (l0_target, side, variant) whose base is in the rows too; `n` is the number of seed pairs."""
    at = {(r["l0_target"], r["side"], r["arch"], r["seed"]): r for r in rows}
    groups: dict[tuple[Any, ...], list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for (l0, side, arch, seed), r in at.items():
        base = at.get((l0, side, pairs.get(arch), seed))
        if base is not None:
            groups.setdefault((l0, side, arch), []).append((r, base))
    out = []
    for (l0, side, arch), rs in groups.items():
        row: dict[str, Any] = {"l0_target": l0, "side": side, "arch": arch, "base": pairs[arch], "n": len(rs)}
        for col in SUMMARY_COLS:
            d = [float(v[col]) - float(b[col]) for v, b in rs]
            row[col] = f"{statistics.mean(d):+.3f} ± {statistics.stdev(d) if len(d) > 1 else 0.0:.3f}"
        out.append(row)
    return out


TABLE_COLS = ("l0", "recovery", "mcc", "f1", "fvu", "dead", "absorption", "child_parent_cos")
"""The columns of `table` (dead as a fraction of d_sae there)."""


def table(res: dict[str, Any]) -> str:
    """Markdown tables of a result: mean ± std over seeds per (target L0, side, arch), then variant minus base
    per seed (`PAIRS`), mean ± std of the differences and how many seed pairs went each way."""
    d_sae = res["settings"]["d_sae"]

    def val(r: dict[str, Any], c: str) -> float:
        return float(r[c]) / d_sae if c == "dead" else float(r[c])

    def ms(v: list[float]) -> str:
        return f"{statistics.mean(v):.3f} ± {statistics.stdev(v) if len(v) > 1 else 0.0:.3f}"

    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in res["rows"]:
        groups.setdefault((r["l0_target"], r["side"], r["arch"]), []).append(r)
    head = "| target L0 | side | arch | seeds | " + " | ".join(TABLE_COLS) + " |"
    lines = [head, "|" + "---|" * (4 + len(TABLE_COLS))]
    for (l0, side, arch), rs in groups.items():
        cells = [ms([val(r, c) for r in rs]) for c in TABLE_COLS]
        lines.append(f"| {l0} | {side} | {arch} | {len(rs)} | " + " | ".join(cells) + " |")
    lines += ["", "| target L0 | side | variant - base | pairs | " + " | ".join(TABLE_COLS) + " |"]
    lines.append("|" + "---|" * (4 + len(TABLE_COLS)))
    for (l0, side, arch), rs in groups.items():
        base = {r["seed"]: r for r in groups.get((l0, side, PAIRS.get(arch, "")), [])}
        pairs = [(r, base[r["seed"]]) for r in rs if r["seed"] in base]
        if not pairs:
            continue
        cells = []
        for c in TABLE_COLS:
            d = [val(v, c) - val(b, c) for v, b in pairs]
            cells.append(f"{ms(d)} ({sum(x > 0 for x in d)}+/{sum(x < 0 for x in d)}-)")
        cells = [c if c.startswith("-") else "+" + c for c in cells]
        lines.append(f"| {l0} | {side} | {arch} - {PAIRS[arch]} | {len(pairs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_l0s(spec: str | None, true_l0: float) -> list[float]:
    """Target L0s from `--l0`: numbers, or `xM` for M times the generator's true L0 (of the top d_sae features);
    none given: the true L0 itself."""
    if not spec:
        return [round(true_l0, 2)]
    return [round(float(v[1:]) * true_l0, 2) if v.startswith("x") else float(v) for v in spec.split(",")]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: tiny generator, 1 seed, 4 archs")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument(
        "--l0", default=None, help="comma-separated target L0s, xM = M times the true L0 (default: the true L0)"
    )
    ap.add_argument("--archs", default=None, help="comma-separated subset of sae.ARCHS (default all)")
    ap.add_argument("--sides", default="ours,sae_lens")
    ap.add_argument("--num-features", type=int, default=512)
    ap.add_argument("--d-sae", type=int, default=None, help="SAE width (default: num_features)")
    ap.add_argument("--hidden-dim", type=int, default=64)
    ap.add_argument("--steps", type=int, default=500, help="training steps of 1024 samples (the pool's size)")
    ap.add_argument("--n-eval", type=int, default=20_000)
    ap.add_argument("--out", default="runs/sae/synthbench.json")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-hierarchy", action="store_true", help="ablation: the generator without its hierarchy")
    ap.add_argument(
        "--table", default=None, help="print the markdown tables of result JSONs (comma-separated) and stop"
    )
    a = ap.parse_args(argv)
    if a.table:  # several results (the same d_sae) print as one: their rows together
        parts = [json.loads(Path(f).read_text()) for f in a.table.split(",")]
        res = {"settings": parts[0]["settings"], "rows": [r for part in parts for r in part["rows"]]}
        print(table(res))
        return res
    torch.set_num_threads(a.threads)
    if a.quick:
        a.num_features, a.hidden_dim, a.steps, a.n_eval, a.seeds = 128, 32, 300, 4096, 1
        a.archs = a.archs or "topk,batchtopk,matryoshka,relu"
    archs = a.archs.split(",") if a.archs else list(ARCHS)
    bad = sorted(set(archs) - set(ARCHS))
    if bad:
        raise SystemExit(f"unknown archs {bad}; known: {', '.join(ARCHS)}")
    d_sae = a.d_sae or a.num_features
    t0 = time.perf_counter()
    bench = make_bench(a.num_features, a.hidden_dim, d_sae, a.steps * 1024, a.n_eval, hierarchy=not a.no_hierarchy)
    l0s = parse_l0s(a.l0, bench.true_l0_top)
    settings = {
        **{k: v for k, v in vars(a).items() if k != "out"},
        "d_sae": d_sae,
        "train_samples": a.steps * 1024,
        "true_l0": round(bench.true_l0, 3),
        "true_l0_top_d_sae": round(bench.true_l0_top, 3),
        "l0_targets": l0s,
        "generator": bench.model.cfg.to_dict(),
        "data_seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps({"settings": settings}), flush=True)
    rows = run_bench(bench, archs, a.sides.split(","), list(range(a.seeds)), l0s, d_sae, a.steps)
    settings["total_seconds"] = round(time.perf_counter() - t0, 1)
    res = {"settings": settings, "rows": rows, "summary": summarise(rows), "paired": paired(rows)}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(
        json.dumps({k: res[k] for k in ("summary", "paired")} | {"total_seconds": settings["total_seconds"]}, indent=1)
    )
    return res


if __name__ == "__main__":
    main()
