"""RDMReg demo: Rectified LpJEPA vs a Gaussian-target JEPA vs VICReg on digits; the RGG score of SmolLM2's
cached activations.

    python -m interp.contrib.geometry.experiments.rdm_reg [--seeds 3] [--epochs 30] [--quick] [--no-lm]

Digits (catalog setting; sklearn's 8x8 digits scaled to [0, 1], 70/30 split): two views per image by
Gaussian noise (sd 0.1), a random ±1-pixel shift and 10% pixel dropout. Encoder 64 -> 256 -> 256 (ReLU),
projector 256 -> 128 (+ BatchNorm, ReLU) -> 128, ending in a ReLU for RDMReg (as the paper requires) and
linear for the baselines; batch 256, Adam lr 1e-3, 1024 projections, λ_inv 25 and λ_reg 250 (the paper's
recipe). Methods: RDMReg (p = 1) at μ in {-1, -0.5, 0, 0.5}; Gaussian target (sliced W2 to N(0, I));
VICReg. Metrics: linear-probe accuracy (logistic regression on frozen features) of the encoder output
and of the projector output, ℓ0 fraction of the projector output (non-zero entries; lower = sparser).

SmolLM2 (`smollm2-135m` through `HookedModel.run_with_cache`, stdlib-docs, 8 x 64 tokens, position 0
dropped): `rgg_fit` of `blocks.{6,12,24}.hook_resid_post` and `blocks.{6,12,24}.mlp.hook_post`: the best
RGG location μ, its sliced-W2 distance and a moment-matched Gaussian's (p = 1).
"""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F
from torch import nn

from interp.contrib.common.datasets import digits
from interp.contrib.common.fit import epoch_batches, fit, make_optimizer
from interp.contrib.common.probe import probe_accuracy
from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.geometry.rdm_reg import gaussian_reg_loss, l0_fraction, rdmreg_loss, rgg_fit, vicreg_loss
from interp.contrib.report import fmt, markdown_table

MUS = (-1.0, -0.5, 0.0, 0.5)


def augment(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    img = x.view(-1, 8, 8)
    dx, dy = (int(v) for v in torch.randint(-1, 2, (2,), generator=g))
    img = torch.roll(img, shifts=(dy, dx), dims=(1, 2))
    img = img * (torch.rand(img.shape, generator=g) > 0.1) + 0.1 * torch.randn(img.shape, generator=g)
    return img.flatten(1)


class JEPA(nn.Module):
    def __init__(self, rectified: bool):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU())
        proj = [nn.Linear(256, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 128)]
        self.proj = nn.Sequential(*proj, nn.ReLU()) if rectified else nn.Sequential(*proj)

    def forward(self, x):
        h = self.enc(x)
        return h, self.proj(h)


def train(method: str, mu: float, x, epochs: int, seed: int) -> JEPA:
    torch.manual_seed(seed)
    net = JEPA(method == "rdmreg")
    g = torch.Generator().manual_seed(seed)  # the batches, the augmentations and the regulariser's draws

    def loss_fn(idx):
        _, z1 = net(augment(x[idx], g))
        _, z2 = net(augment(x[idx], g))
        if method == "vicreg":
            return vicreg_loss(z1, z2)
        if method == "rdmreg":
            reg = lambda z: rdmreg_loss(z, 1.0, mu, 1024, g)
        else:
            reg = lambda z: gaussian_reg_loss(z, 1024, g)
        return 25.0 * F.mse_loss(z1, z2) + 250.0 * (reg(z1) + reg(z2)) / 2

    fit(make_optimizer(net.parameters(), lr=1e-3), loss_fn, epoch_batches(len(x), 256, epochs, g, min_size=8))
    return net.eval()


def run_digits(seeds: int, epochs: int, quick: bool) -> dict:
    x, y = digits()
    if quick:
        x, y = x[:600], y[:600]
    configs = [("rdmreg", mu) for mu in ((0.0,) if quick else MUS)] + [("gaussian", 0.0), ("vicreg", 0.0)]
    res: dict[str, dict[str, list[float]]] = {}
    for s in range(seeds):
        perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(100 + s))
        tr, te = perm[: int(0.7 * len(x))], perm[int(0.7 * len(x)) :]
        for method, mu in configs:
            net = train(method, mu, x[tr], epochs, s)
            with torch.no_grad():
                htr, ztr = net(x[tr])
                hte, zte = net(x[te])
            name = (
                f"RDMReg μ={mu}" if method == "rdmreg" else {"gaussian": "Gaussian target", "vicreg": "VICReg"}[method]
            )
            row = res.setdefault(name, {"probe acc (encoder)": [], "probe acc (projector)": [], "projector ℓ0": []})
            probe = dict(n_classes=10, standardise=True, steps=100 if quick else 300, lr=0.05, init="linear")
            row["probe acc (encoder)"].append(probe_accuracy(htr, y[tr], hte, y[te], **probe))
            row["probe acc (projector)"].append(probe_accuracy(ztr, y[tr], zte, y[te], **probe))
            row["projector ℓ0"].append(l0_fraction(zte))
    return res


def run_lm() -> dict:
    import interp
    from interp.data import resolve_corpus

    model = interp.load_model("smollm2-135m")
    corpus = resolve_corpus("stdlib-docs", model.tokenizer, ctx_len=64, max_tokens=64 * 8, seed=0)
    names = [f"blocks.{l}.{h}" for l in (6, 12, 24) for h in ("hook_resid_post", "mlp.hook_post")]
    with torch.no_grad():
        _, cache = model.run_with_cache(corpus.tokens, names=names, return_logits=False)
    return {n: rgg_fit(cache[n][:, 1:].flatten(0, 1).float()) for n in names}


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__,
        seeds=3,
        epochs=30,
        quick="1 seed, 2 epochs on 600 images, μ = 0 only, no LM run",
        no_lm="skip the SmolLM2 run",
    )
    a = parse(ap, argv)
    seeds, epochs = (1, 2) if a.quick else (a.seeds, a.epochs)
    out = {"digits": run_digits(seeds, epochs, a.quick)}
    keys = ["probe acc (encoder)", "probe acc (projector)", "projector ℓ0"]
    print(f"digits JEPA, {epochs} epochs (mean ± sd over {seeds} seeds)")
    print(markdown_table(["method", *keys], [[m, *(fmt(r[k]) for k in keys)] for m, r in out["digits"].items()]))
    if not (a.quick or a.no_lm):
        out["smollm2"] = run_lm()
        print("\nsmollm2-135m activations vs the RGG family (p = 1; sliced W2 after unit-RMS scaling)")
        print(
            markdown_table(
                ["hook", "best μ", "RGG distance", "Gaussian distance", "ℓ0"],
                [
                    [n, r["mu"], fmt(r["distance"]), fmt(r["gaussian_distance"]), fmt(r["l0"])]
                    for n, r in out["smollm2"].items()
                ],
            )
        )
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    main()
