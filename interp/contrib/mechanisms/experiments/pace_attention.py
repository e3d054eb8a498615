"""PACEAttention demo: softmax MHSA vs CRATE-MSSA vs PACE in a ViT-tiny on digits; coding-rate metrics of
SmolLM2's cached hidden states by corpus.

    python -m interp.contrib.mechanisms.experiments.pace_attention [--seeds 3] [--epochs 10] [--quick] [--no-lm]

Digits (catalog setting; sklearn's 8x8 digits, 70/30 split): 16 patches of 2x2, d 64, depth 4, 4 heads,
10 epochs (the catalog's 20, halved for this shared CPU) of Adam (lr 1e-3, batch 64); the same body
(LayerNorm, MLP, head) for the three attentions, at an equal parameter budget (MLP width 128 with
softmax MHSA, 225 with the tied-weight MSSA and PACE).
Metrics: test accuracy; parameters; the rate reduction ΔR = R - R_c (ε 0.5, rows scaled to unit norm)
of the test images' token features grouped by image class, at the input and after the last layer; the
mean pairwise cosine similarity of the heads' attention maps (lower = more distinct heads).

SmolLM2 (`smollm2-135m` cached `blocks.{6,12,18,24,29}.hook_resid_post` token rows of stdlib-docs,
stdlib and pydoc-topics, 48 x 64 tokens each, position 0 dropped, 600 rows per corpus, rows scaled to
unit norm): R, R_c and ΔR by corpus at each layer, against the same rows with shuffled corpus labels.
"""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F

from interp.contrib.common.datasets import digits
from interp.contrib.common.fit import epoch_batches, fit, make_optimizer
from interp.contrib.experiment import STORE_MODEL_HELP, experiment_parser, model_refusals, parse
from interp.contrib.mechanisms.pace_attention import PACEViT, head_overlap, rate_reduction
from interp.contrib.report import fmt, markdown_table, per_sample, stack_runs

VARIANTS = ("softmax", "mssa", "pace", "pace_exact")
NAMES = {"softmax": "softmax MHSA", "mssa": "CRATE-MSSA", "pace": "PACE (sketch 8)", "pace_exact": "PACE (exact Gram)"}


def token_dr(states, labels) -> float:
    z = F.normalize(states.flatten(0, 1), dim=-1)  # every token of every image, labelled by its image
    return rate_reduction(z, labels.repeat_interleave(states.shape[1]))["dR"]


def trial(variant: str, seed: int, epochs: int, quick: bool) -> dict[str, float]:
    x, y = digits(images=True)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(100 + seed))
    tr, te = perm[: int(0.7 * len(x))], perm[int(0.7 * len(x)) :]
    if quick:
        tr, te = tr[:300], te[:150]
    torch.manual_seed(seed)
    # equal budget: MSSA/PACE tie q = k = v = out (d² per layer vs 4d² + 4d), so their MLPs get the rest
    model = PACEViT(
        variant, patch=2, image=8, d=64, depth=4, heads=4, n_classes=10, mlp_hidden=128 if variant == "softmax" else 225
    )
    model.train()
    fit(
        make_optimizer(model.parameters(), lr=1e-3),
        lambda i: F.cross_entropy(model(x[tr[i]]), y[tr[i]]),
        epoch_batches(len(tr), 64, epochs, seed),
    )
    model.eval()
    with torch.no_grad():
        logits, states = model(x[te], return_states=True)
        sub = te[:300]
        _, st = model(x[sub], return_states=True)
        overlap = sum(head_overlap(a.last_attn) for a in model.attn) / len(model.attn)
    return {
        "test acc": float((logits.argmax(-1) == y[te]).float().mean()),
        "params": float(sum(p.numel() for p in model.parameters())),
        "ΔR input": token_dr(st[0], y[sub]),
        "ΔR last layer": token_dr(st[-1], y[sub]),
        "head overlap": overlap,
    }


def lm_rates(sample: int = 0, loaded=None, model_name: str = "smollm2-135m") -> dict[str, dict[str, float]]:
    """Coding rates by corpus at each cached layer (SmolLM2's 6, 12, 18, 24, 29, or the same relative depths of
    another model), on data sample `sample` of every corpus."""
    from interp.contrib.lm_features import depth_layers, hook_name, labelled_corpora, load_lm

    out, loaded = {}, load_lm(model_name) if loaded is None else loaded
    layers = depth_layers(loaded.n_layers)
    for layer in layers:
        x, y = labelled_corpora(
            hook_name(layer), 48, per_sequence=False, model=model_name, sample=sample, loaded=loaded, layers=layers
        )
        g = torch.Generator().manual_seed(0)
        pick = torch.cat(
            [torch.nonzero(y == c).flatten()[torch.randperm(int((y == c).sum()), generator=g)[:600]] for c in range(3)]
        )
        z, lab = F.normalize(x[pick].double(), dim=-1), y[pick]
        r = rate_reduction(z, lab)
        r["dR shuffled labels"] = rate_reduction(z, lab[torch.randperm(len(lab), generator=g)])["dR"]
        r["dR above shuffled"] = r["dR"] - r["dR shuffled labels"]
        out[f"layer {layer}"] = r
    return out


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__,
        seeds=3,
        epochs=10,
        quick="1 seed, 1 epoch on 300 images, no LM run",
        no_lm="skip the SmolLM2 run",
        lm_samples=1,
        lm_only=True,
        model=("smollm2-135m", STORE_MODEL_HELP),
    )
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset of " + ", ".join(VARIANTS))
    a = parse(ap, argv)
    variants = [v for v in a.variants.split(",") if v]
    if not variants or any(v not in VARIANTS for v in variants):
        ap.error(f"--variants must name some of {', '.join(VARIANTS)}")
    seeds, epochs = (1, 1) if a.quick else (a.seeds, a.epochs)
    res: dict[str, dict[str, list[float]]] = {}
    for s in range(0 if a.lm_only else seeds):
        for v in variants:
            for k, val in trial(v, s, epochs, a.quick).items():
                res.setdefault(NAMES[v], {}).setdefault(k, []).append(val)
    keys = ["test acc", "params", "ΔR input", "ΔR last layer", "head overlap"]
    out = {}
    if not a.lm_only:
        print(f"ViT-tiny on digits, {epochs} epochs (mean ± sd over {seeds} seeds)")
        rows = [[m, *(fmt(r[k], 0 if k == "params" else 3) for k in keys)] for m, r in res.items()]
        print(markdown_table(["attention", *keys], rows))
        out["digits"] = res
    if a.lm_only or not (a.quick or a.no_lm):
        from interp.contrib.lm_features import load_lm

        loaded, n = load_lm(a.model), a.lm_samples
        lm = stack_runs([lm_rates(s, loaded, a.model) for s in range(n)])
        print(
            f"\n{a.model} residual stream, coding rates by corpus (ε 0.5, unit-norm rows, 1,800 rows)"
            + (f"; mean ± sd over {n} data samples" if n > 1 else "")
        )
        cols = ("R", "Rc", "dR", "dR shuffled labels")
        print(
            markdown_table(
                ["layer", "R", "R_c", "ΔR", "ΔR, shuffled labels", "ΔR above shuffled, per sample"],
                [[k, *(fmt(r[c]) for c in cols), per_sample(r["dR above shuffled"])] for k, r in lm.items()],
            )
        )
        out["smollm2" if a.model == "smollm2-135m" else a.model] = lm
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    with model_refusals():
        main()
