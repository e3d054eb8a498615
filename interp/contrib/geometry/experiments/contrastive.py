"""InfoNCE-Geo demo: a persistent modality gap despite near-perfect pairwise alignment.

A shared latent z, uniform on S^7, is observed through two random nonlinear maps into R^32 plus nuisance
noise: x = f_a(z) + noise, y = f_b(z) + noise with f_b = (1 - m) f_a + m f'_b, m the modality mismatch
(m = 0: both modalities are the same distribution). Two MLP encoders (32 -> 128 -> 16, normalised onto
S^15) are trained with symmetric InfoNCE (tau 0.1, batch 256, 2000 Adam steps). Control: one shared
encoder for both modalities. On 1000 held-out pairs we measure retrieval top-1, the centroid angle, the
held-out accuracy of a linear probe for modality, symmetric KL between vMF-KDE marginals, and the two
InfoNCE energy terms. A temperature sweep in the unimodal (m = 0, shared encoder) setting reports the
alignment potential and the dispersion (uniformity) at tau 0.05 / 0.1 / 0.5.

    python -m interp.contrib.geometry.experiments.contrastive [--seeds 2] [--quick]

The JSON holds each metric's mean over seeds and its sd (`<metric>_sd`).

Claim: with two towers, retrieval top-1 > 0.9 while modality stays linearly separable and the centroid
gap stays clearly positive, growing with the mismatch; the shared-encoder control has a smaller gap.
"""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from interp.contrib.common.fit import fit, make_optimizer
from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.geometry.contrastive_gap import gap_report, symmetric_infonce_loss
from interp.contrib.report import mean_sd


def _random_map(g: torch.Generator) -> nn.Sequential:
    net = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 32))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (1.5 / p.shape[-1] ** 0.5 if p.ndim == 2 else 0.3))
    return net.requires_grad_(False)


class World:
    """The two modalities of one latent, at mismatch m."""

    def __init__(self, mismatch: float, seed: int, noise: float = 0.1):
        g = torch.Generator().manual_seed(1000 + seed)
        self.fa, self.fb, self.m, self.noise = _random_map(g), _random_map(g), mismatch, noise
        self.g = torch.Generator().manual_seed(seed)

    def sample(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        z = F.normalize(torch.randn(n, 8, generator=self.g), dim=1)
        xa = self.fa(z)
        xb = (1 - self.m) * xa + self.m * self.fb(z)
        return (
            xa + self.noise * torch.randn(xa.shape, generator=self.g),
            xb + self.noise * torch.randn(xb.shape, generator=self.g),
        )


def encoder(seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 16))


def train_pair(world: World, shared: bool, tau: float, steps: int, seed: int) -> tuple[nn.Module, nn.Module]:
    ea = encoder(seed)
    eb = ea if shared else encoder(seed + 1)
    params = list(ea.parameters()) + ([] if shared else list(eb.parameters()))

    def loss_fn(_):
        xa, xb = world.sample(256)
        return symmetric_infonce_loss(ea(xa), eb(xb), tau)

    fit(make_optimizer(params, lr=1e-3), loss_fn, range(steps))
    return ea, eb


def run(seeds: int = 2, steps: int = 2000, mismatches=(0.0, 0.25, 0.5, 1.0), taus=(0.05, 0.1, 0.5)) -> dict:
    res: dict[str, list] = {}
    jobs = [(m, shared, s) for m in mismatches for shared in (False, True) for s in range(seeds)]
    for m, shared, seed in tqdm(jobs, desc="two towers"):
        world = World(m, seed)
        ea, eb = train_pair(world, shared, 0.1, steps, seed)
        with torch.no_grad():
            xa, xb = world.sample(1000)
            rep = gap_report(ea(xa), eb(xb), tau=0.1)
        res.setdefault(f"m={m}/{'shared' if shared else 'two-tower'}", []).append(rep)
    for tau in tqdm(taus, desc="tau sweep"):
        reps = []
        for seed in range(seeds):
            world = World(0.0, seed)
            ea, _ = train_pair(world, True, tau, steps, seed)
            with torch.no_grad():
                xa, xb = world.sample(1000)
                reps.append(gap_report(ea(xa), ea(xb), tau=tau))
        res[f"unimodal tau={tau}"] = reps
    out = {}
    for key, reps in res.items():
        out[key] = {k: mean_sd([r[k] for r in reps])[0] for k in reps[0]}
        out[key] |= {f"{k}_sd": mean_sd([r[k] for r in reps])[1] for k in reps[0]}  # over seeds
    return out


def main(argv=None) -> None:
    ap = experiment_parser(__doc__, seeds=2, quick="1 seed, 300 steps")
    a = parse(ap, argv)
    if a.seeds < 1:
        ap.error("--seeds must be positive")
    out = run(1, 300) if a.quick else run(a.seeds)
    print(json.dumps(out, indent=1))
    print(
        "\n| setting | retrieval top-1 | centroid gap ‖c_x - c_y‖ | centroid norms x / y | modality probe acc | sym. "
        "KL (vMF KDE) | alignment | uniformity x | potential | dispersion |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key, r in out.items():
        print(
            f"| {key} | {r['retrieval_top1']:.3f} | {r['centroid_distance']:.3f} | {r['centroid_norm_x']:.2f} / "
            f"{r['centroid_norm_y']:.2f} | {r['modality_probe_acc']:.3f} | {r['sym_kl']:.2f} | "
            f"{r['alignment']:.3f} | {r['uniformity_x']:.2f} | {r['energy_potential']:.2f} | "
            f"{r['energy_dispersion']:.2f} |"
        )
    n = 1 if a.quick else a.seeds
    print(f"\n| setting ({n} seeds, mean ± sd) | centroid gap | modality probe acc | sym. KL | retrieval top-1 |")
    print("|---|---|---|---|---|")
    for key, r in out.items():
        cells = [f"{r[k]:.3f} ± {r[k + '_sd']:.3f}" for k in ("centroid_distance", "modality_probe_acc", "sym_kl")]
        print(f"| {key} | {' | '.join(cells)} | {r['retrieval_top1']:.3f} |")


if __name__ == "__main__":
    main()
