"""SSMoE demo: a collapsed router in a small MoE, replaced (mixed) training-free with the spectral router.

    python -m interp.contrib.moe.experiments.ssmoe [--seeds 10] [--steps 1000]

Task: tokens x in R^32 drawn around 8 cluster centres; each cluster has its own linear 4-class rule.
Model: logits = head(x + MoE(x)), MoE = 8 SwiGLU experts (hidden 64), top-2, trained with Adam and *no*
load-balancing loss. Three routers are compared:
  - "trained": as trained;
  - "shocked": after training, two router rows scaled x10 (a collapse induced after the fact);
  - "anisotropic": every state shares a large common component (norm 12, like the mean direction of a
    real residual stream), trained from scratch: the router logits are dominated by it and collapse.
For each, the original router (c=0) against SSMoE with c in {0.3, 0.5}, k in {4, 8} (and the spectral
router alone, c=1, for reference): normalised
expert-load entropy, clean accuracy, and accuracy with Gaussian input noise (sigma 1.0): mean, sd over
seeds, and the paired difference to the original router (mean ± sd over seeds). Prints JSON; about 3
minutes on a loaded 2-core machine.
"""

from __future__ import annotations

import json
import time

import torch
import torch.nn.functional as F
from torch import nn

from interp.contrib.common.fit import fit, make_optimizer
from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.moe.router_fixes import fixed_router
from interp.contrib.moe.ssmoe import MoEBlock, SSMoERouter, expert_load, load_entropy
from interp.contrib.report import fmt, mean_sd

D, HID, E, TOPK, CLUSTERS, CLASSES = 32, 64, 8, 2, 8, 4


def make_task(seed: int, offset: float = 0.0):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(CLUSTERS, D, generator=g) * 2.0
    shared = torch.randn(D, generator=g)
    centers = centers + offset * shared / shared.norm()  # a large shared component: anisotropic states
    rules = torch.randn(CLUSTERS, CLASSES, D, generator=g)

    def sample(n: int, gen: torch.Generator):
        c = torch.randint(CLUSTERS, (n,), generator=gen)
        x = centers[c] + torch.randn(n, D, generator=gen)
        y = torch.einsum("nkd,nd->nk", rules[c], x - centers[c]).argmax(-1)
        return x, y

    return sample


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.moe = MoEBlock(D, HID, E, TOPK)
        self.head = nn.Linear(D, CLASSES)

    def forward(self, x):
        return self.head(x + self.moe(x))


def train(sample, seed: int, steps: int) -> Net:
    torch.manual_seed(seed)
    net = Net()
    gen = torch.Generator().manual_seed(seed + 100)

    def loss_fn(_):
        x, y = sample(256, gen)
        return F.cross_entropy(net(x), y)

    fit(make_optimizer(net.parameters(), lr=3e-3), loss_fn, range(steps))
    return net


@torch.no_grad()
def evaluate(net: Net, x, y, noise: float, seed: int) -> dict:
    xn = x + noise * torch.randn(x.shape, generator=torch.Generator().manual_seed(seed))
    acc = (net(x).argmax(-1) == y).float().mean().item()
    ent = load_entropy(expert_load(net.moe.last_experts, E))
    acc_noisy = (net(xn).argmax(-1) == y).float().mean().item()
    return {"entropy": ent, "acc": acc, "acc_noisy": acc_noisy}


FIXES = [
    ("baseline: rows equalised", False, True),
    ("baseline: centred", True, False),
    ("baseline: rows equalised + centred", True, True),
]
"""Training-free router fixes (`interp.contrib.moe.router_fixes`): (label, centre on a calibration sample,
equalise the rows)."""


def record(rows: dict, setting: str, label: str, result: dict) -> None:
    slot = rows.setdefault(setting, {}).setdefault(label, {"entropy": [], "acc": [], "acc_noisy": []})
    for key, v in result.items():
        slot[key].append(v)


def run(seeds: int, steps: int) -> dict:
    settings = {"trained": 0.0, "shocked": 0.0, "anisotropic": 12.0}
    configs = (
        [("original", 0.0, None)]
        + [(f"ssmoe c={c} k={k}", c, k) for c in (0.3, 0.5) for k in (4, 8)]
        + [("spectral only c=1 k=8", 1.0, 8)]
    )
    rows: dict[str, dict[str, list]] = {}
    for seed in range(seeds):
        for name, offset in settings.items():
            sample = make_task(seed, offset)
            xt, yt = sample(4000, torch.Generator().manual_seed(seed + 999))
            net = train(sample, seed, steps)
            if name == "shocked":
                with torch.no_grad():
                    net.moe.router.weight[:2] *= 10
            for label, c, k in configs:
                net.moe.ssmoe = None if k is None else SSMoERouter.from_block(net.moe, k=k, c=c)
                record(rows, name, label, evaluate(net, xt, yt, noise=1.0, seed=seed))
            # the strong baseline (issue 42): training-free fixes of the router itself, no spectral router
            net.moe.ssmoe, router = None, net.moe.router
            calib, _ = sample(1024, torch.Generator().manual_seed(seed + 555))
            for label, states, equalise in FIXES:
                net.moe.router = fixed_router(router, calib if states else None, equalise)
                record(rows, name, label, evaluate(net, xt, yt, noise=1.0, seed=seed))
            net.moe.router = router
    out = {}
    for name, per in rows.items():
        out[name] = {}
        for label, m in per.items():
            cell = {k: round(mean_sd(v)[0], 4) for k, v in m.items()}
            cell |= {f"{k}_sd": round(mean_sd(v)[1], 4) for k, v in m.items()}
            # paired by seed: this router minus the original router on the same trained MoE
            cell |= {f"{k}_minus_original": fmt([a - b for a, b in zip(v, per["original"][k])]) for k, v in m.items()}
            out[name][label] = cell
    return out


def main(argv=None) -> dict:
    ap = experiment_parser(__doc__, seeds=10, steps=1000, threads=1)
    args = parse(ap, argv)
    t0 = time.time()
    res = {"config": vars(args), "results": run(args.seeds, args.steps)}
    res["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
