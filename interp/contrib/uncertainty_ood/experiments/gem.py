"""GEM demo: EDL vs GEM-CORE vs GEM-MIX vs GEM-MIX-FI, on digits and as an OOD probe on SmolLM2 features.

    python -m interp.contrib.uncertainty_ood.experiments.gem [--seeds 3] [--epochs 60] [--quick] [--no-lm]

Digits (catalog setting; sklearn's bundled 8x8 digits, scaled to [0, 1]): classes 0-6 in distribution
(70% train, 30% test), OOD = digits 7-9 plus as many Gaussian-noise images (clipped N(0.5, 0.3²)). MLP
backbone 64 -> 128 -> 64 (ReLU) + head, Adam lr 1e-3, batch 64, KL weight annealed 0 -> 1 over the first
half. GEM-MIX: 3 heads; GEM-MIX-FI: + Fisher allocation penalty 0.5. Metrics: test accuracy, Brier,
OOD AUROC of the vacuity (K / strength; digits 7-9 and noise separately), head-load entropy (MIX).

SmolLM2 (`smollm2-135m`, frozen `blocks.12.hook_resid_post` token rows from the cached store, position 0
dropped, top-64 PCs fitted on ID rows): in distribution = 2 classes, stdlib-docs vs stdlib (Python
docstrings vs code); OOD = pydoc-topics rows (the reference manual's prose, fixed by the Python version).
Head: 64 -> 64 ReLU -> evidential head.
"""

from __future__ import annotations

import json
import math

import torch
from torch import nn

from interp.contrib.common.datasets import digits
from interp.contrib.common.fit import epoch_batches, fit, make_optimizer
from interp.contrib.common.ranks import auroc
from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.report import fmt, markdown_table
from interp.contrib.uncertainty_ood.gem import GEMHead, brier, gem_loss

VARIANTS = {  # name: (n_heads, gate, fisher_weight)
    "EDL": (1, False, 0.0),
    "GEM-CORE": (1, True, 0.0),
    "GEM-MIX": (3, True, 0.0),
    "GEM-MIX-FI": (3, True, 0.5),
}


class Net(nn.Module):
    def __init__(self, d_in: int, hidden: tuple[int, ...], n_classes: int, n_heads: int, gate: bool):
        super().__init__()
        layers, d = [], d_in
        for h in hidden:
            layers += [nn.Linear(d, h), nn.ReLU()]
            d = h
        self.body = nn.Sequential(*layers)
        self.head = GEMHead(d, n_classes, n_heads, gate)

    def forward(self, x):
        return self.head(self.body(x))


def train(variant: str, x, y, n_classes: int, hidden, epochs: int, seed: int) -> Net:
    n_heads, gate, fw = VARIANTS[variant]
    torch.manual_seed(seed)
    net = Net(x.shape[1], hidden, n_classes, n_heads, gate)

    def loss_fn(batch):
        ep, idx = batch
        return gem_loss(net(x[idx]), y[idx], kl_weight=min(1.0, ep / max(1, epochs // 2)), fisher_weight=fw)

    fit(make_optimizer(net.parameters(), lr=1e-3), loss_fn, epoch_batches(len(x), 64, epochs, seed, with_epoch=True))
    return net


@torch.no_grad()
def evaluate(net: Net, x_te, y_te, oods: dict[str, torch.Tensor]) -> dict[str, float]:
    out = net(x_te)
    p = out.prob()
    res = {"acc": float((p.argmax(-1) == y_te).float().mean()), "brier": brier(p, y_te)}
    for name, xo in oods.items():
        res[f"auroc {name}"] = auroc(net(xo).vacuity(), out.vacuity())
    load = out.pi.mean(0)
    res["head entropy"] = (
        float(-(load * load.clamp_min(1e-12).log()).sum() / math.log(len(load))) if len(load) > 1 else float("nan")
    )
    return res


def digits_data(seed: int):
    x, y = digits()
    g = torch.Generator().manual_seed(seed)
    idd = torch.nonzero(y <= 6).flatten()
    idd = idd[torch.randperm(len(idd), generator=g)]
    cut = int(0.7 * len(idd))
    tr, te = idd[:cut], idd[cut:]
    ood_digits = x[y >= 7]
    noise = (0.5 + 0.3 * torch.randn(len(ood_digits), 64, generator=g)).clamp(0, 1)
    return x[tr], y[tr], x[te], y[te], {"digits 7-9": ood_digits, "noise": noise}


def lm_data(seed: int):
    from interp.contrib.lm_features import hook_name, labelled_corpora

    x, y = labelled_corpora(hook_name(12), n_seq=48, per_sequence=False)
    idm = y <= 1
    mu = x[idm].mean(0)
    _, _, vh = torch.linalg.svd((x[idm] - mu).double(), full_matrices=False)
    z = ((x - mu).double() @ vh[:64].T).float()
    z = z / z[idm].std(0)
    g = torch.Generator().manual_seed(seed)
    ids = torch.nonzero(idm).flatten()
    ids = ids[torch.randperm(len(ids), generator=g)]
    cut = int(0.7 * len(ids))
    return z[ids[:cut]], y[ids[:cut]], z[ids[cut:]], y[ids[cut:]], {"pydoc-topics": z[~idm]}


def run(data_fn, n_classes: int, hidden, epochs: int, seeds: int) -> dict[str, dict[str, list[float]]]:
    res: dict[str, dict[str, list[float]]] = {}
    for s in range(seeds):
        xtr, ytr, xte, yte, oods = data_fn(s)
        for v in VARIANTS:
            r = evaluate(train(v, xtr, ytr, n_classes, hidden, epochs, s), xte, yte, oods)
            for k, val in r.items():
                res.setdefault(v, {}).setdefault(k, []).append(val)
    return res


def show(title: str, res: dict) -> None:
    keys = [k for k in next(iter(res.values())) if not all(math.isnan(v) for r in res.values() for v in r[k])]
    print(title)
    print(
        markdown_table(
            ["variant", *keys],
            [
                [v, *(fmt([x for x in r[k] if not math.isnan(x)] or [float("nan")]) for k in keys)]
                for v, r in res.items()
            ],
        )
    )


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__, seeds=3, epochs=60, quick="1 seed, 3 epochs, no LM run", no_lm="skip the SmolLM2 run"
    )
    a = parse(ap, argv)
    seeds, epochs = (1, 3) if a.quick else (a.seeds, a.epochs)
    out = {"digits": run(digits_data, 7, (128, 64), epochs, seeds)}
    show(
        f"digits 0-6 in distribution (mean ± sd over {seeds} seeds, {epochs} epochs); AUROC from vacuity", out["digits"]
    )
    if not (a.quick or a.no_lm):
        out["smollm2"] = run(lm_data, 2, (64,), max(5, epochs // 6), seeds)
        show(f"\nsmollm2-135m layer 12: docs vs code in distribution, pydoc-topics OOD ({seeds} seeds)", out["smollm2"])
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    main()
