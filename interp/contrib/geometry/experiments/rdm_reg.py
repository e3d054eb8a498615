"""RDMReg demo: Rectified LpJEPA vs a Gaussian-target JEPA vs VICReg on digits; the RGG score of SmolLM2's
cached activations.

    python -m interp.contrib.geometry.experiments.rdm_reg [--seeds 3] [--epochs 30] [--splits 0] [--quick] [--no-lm]

Digits (catalog setting; sklearn's 8x8 digits scaled to [0, 1], 70/30 split): two views per image by
Gaussian noise (sd 0.1), a random ±1-pixel shift and 10% pixel dropout. Encoder 64 -> 256 -> 256 (ReLU),
projector 256 -> 128 (+ BatchNorm, ReLU) -> 128, ending in a ReLU for RDMReg (as the paper requires) and
linear for the baselines; batch 256, Adam lr 1e-3, 1024 projections, λ_inv 25 and λ_reg 250 (the paper's
recipe). Methods: RDMReg (p = 1) at μ in {-1, -0.5, 0, 0.5}; Gaussian target (sliced W2 to N(0, I));
VICReg. Controls: raw pixels and an untrained encoder (same architecture, random init). Seeds are model
seeds (init, batches, augmentations) on one 70/30 split; `--splits N` adds N other splits (model seed 0),
reported apart. Metrics: linear-probe accuracy (logistic regression on frozen features) of the encoder output
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
from interp.contrib.experiment import experiment_parser, model_refusals, parse
from interp.contrib.geometry.rdm_reg import (
    gaussian_reg_loss,
    l0_fraction,
    rdmreg_loss,
    rgg_fit,
    rgg_nonzero_fraction,
    vicreg_loss,
)
from interp.contrib.report import fmt, markdown_table, stack_runs

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


KEYS = (
    "probe acc (encoder)",
    "probe acc, 5 labels/class",
    "probe acc, shifted test",
    "probe acc (projector)",
    "projector ℓ0",
    "target ℓ0 (closed form)",
)


def evaluate(feats, x, y, tr, te, few, x_shift, quick: bool) -> dict[str, float]:
    """Probe accuracies of `feats(pixels) -> (encoder features, projector output or None)` on one split."""
    probe = dict(n_classes=10, standardise=True, steps=100 if quick else 300, lr=0.05, init="linear")
    with torch.no_grad():
        (htr, ztr), (hte, zte), (hsh, _) = feats(x[tr]), feats(x[te]), feats(x_shift)
    out = {
        "probe acc (encoder)": probe_accuracy(htr, y[tr], hte, y[te], **probe),
        "probe acc, 5 labels/class": probe_accuracy(htr[few], y[tr][few], hte, y[te], **probe),
        "probe acc, shifted test": probe_accuracy(htr, y[tr], hsh, y[te], **probe),
    }
    if ztr is not None:
        out["probe acc (projector)"] = probe_accuracy(ztr, y[tr], zte, y[te], **probe)
        out["projector ℓ0"] = l0_fraction(zte)
    return out


def run_digits(seeds: int, epochs: int, quick: bool, split: int = 0) -> dict:
    """Every method and the two controls (raw pixels, an untrained encoder) on data split `split`, over
    `seeds` model seeds (init, batches, augmentations). Beside the full-label probe, two probes that can
    tell encoders apart: 5 labels per class, and test images shifted one pixel right and down (the
    invariance the augmentations teach)."""
    x, y = digits()
    if quick:
        x, y = x[:600], y[:600]
    configs = [("rdmreg", mu) for mu in ((0.0,) if quick else MUS)] + [("gaussian", 0.0), ("vicreg", 0.0)]
    gs = torch.Generator().manual_seed(100 + split)
    perm = torch.randperm(len(x), generator=gs)
    tr, te = perm[: int(0.7 * len(x))], perm[int(0.7 * len(x)) :]
    few = torch.cat([torch.nonzero(y[tr] == c).flatten()[:5] for c in range(10)])
    x_shift = torch.roll(x[te].view(-1, 8, 8), shifts=(1, 1), dims=(1, 2)).flatten(1)
    res: dict[str, dict[str, list[float]]] = {}

    def add(name, row):
        for k, v in row.items():
            res.setdefault(name, {}).setdefault(k, []).append(v)

    for s in range(seeds):
        split_args = (x, y, tr, te, few, x_shift, quick)
        add("control: raw pixels", evaluate(lambda px: (px, None), *split_args))
        torch.manual_seed(s)
        untrained = JEPA(False).eval()
        add("control: untrained encoder", evaluate(lambda px, enc=untrained.enc: (enc(px), None), *split_args))
        for method, mu in configs:
            net = train(method, mu, x[tr], epochs, s)
            names = {"gaussian": "Gaussian target", "vicreg": "VICReg"}
            name = f"RDMReg μ={mu}" if method == "rdmreg" else names[method]
            row = evaluate(net, *split_args)
            row["target ℓ0 (closed form)"] = rgg_nonzero_fraction(mu) if method == "rdmreg" else 1.0
            add(name, row)
    return res


def run_lm(sample: int = 0, model=None) -> dict:
    """The RGG fit of SmolLM2's activations on data sample `sample` (documents shuffled with that seed)."""
    import interp
    from interp.contrib.lm_features import bos_first, depth_layers
    from interp.data import resolve_corpus

    model = interp.load_model("smollm2-135m") if model is None else model
    corpus = resolve_corpus("stdlib-docs", model.tokenizer, ctx_len=64, max_tokens=64 * 8, seed=sample)
    layers = depth_layers(model.n_layers, (6, 12, 24))  # SmolLM2's layers, or the same relative depths
    names = [f"blocks.{l}.{h}" for l in layers for h in ("hook_resid_post", "mlp.hook_post")]
    with torch.no_grad():
        _, cache = model.run_with_cache(bos_first(corpus.tokens, model.tokenizer), names=names, return_logits=False)
    return {n: rgg_fit(cache[n][:, 1:].flatten(0, 1).float()) for n in names}


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__,
        seeds=3,
        epochs=30,
        quick="1 seed, 2 epochs on 600 images, μ = 0 only, no LM run",
        no_lm="skip the SmolLM2 run",
        lm_samples=1,
        lm_only=True,
        model=("smollm2-135m", "the pretrained model of the LM part (any spec `interp models` lists)"),
    )
    ap.add_argument("--splits", type=int, default=0, help="extra data splits (model seed 0), reported apart")
    a = parse(ap, argv)
    seeds, epochs = (1, 2) if a.quick else (a.seeds, a.epochs)
    out: dict = {}

    def show(res):
        rows = [[m, *(fmt(r[k]) if k in r else "-" for k in KEYS)] for m, r in res.items()]
        print(markdown_table(["method", *KEYS], rows))

    if not a.lm_only:
        out["digits"] = run_digits(seeds, epochs, a.quick)
        print(f"digits JEPA, {epochs} epochs, data split 0 (mean ± sd over {seeds} model seeds)")
        show(out["digits"])
    if a.splits and not a.lm_only:
        per = [run_digits(1, epochs, a.quick, split) for split in range(1, a.splits + 1)]
        out["digits, data splits"] = {m: {k: [v for r in per for v in r[m][k]] for k in per[0][m]} for m in per[0]}
        print(f"\ndata splits 1-{a.splits}, model seed 0 (mean ± sd over splits)")
        show(out["digits, data splits"])
    if a.lm_only or not (a.quick or a.no_lm):
        import interp

        model, key = interp.load_model(a.model), "smollm2" if a.model == "smollm2-135m" else a.model
        out[key] = stack_runs([run_lm(s, model) for s in range(a.lm_samples)])
        n = a.lm_samples
        print(
            f"\n{a.model} activations vs the RGG family (p = 1; sliced W2 after unit-RMS scaling)"
            + (f"; mean ± sd over {n} data samples" if n > 1 else "")
        )
        print(
            markdown_table(
                ["hook", "best μ", "RGG distance", "Gaussian distance", "ℓ0"],
                [
                    [
                        h,
                        ", ".join(f"{m:g}" for m in r["mu"]),
                        fmt(r["distance"]),
                        fmt(r["gaussian_distance"]),
                        fmt(r["l0"]),
                    ]
                    for h, r in out[key].items()
                ],
            )
        )
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    with model_refusals():
        main()
