"""GFD-EMVC demo: gradient-outlier detection + prototype relabelling vs small-loss vs no purification,
in a two-view evolutionary fusion search; synthetic views and SmolLM2 layers as views.

    python -m interp.contrib.data.experiments.gfd_emvc [--seeds 3] [--quick] [--no-lm]

Synthetic (catalog setting): sklearn `make_classification` (3,000 rows, 20 features, 5 classes), two
views through random nonlinear maps (tanh and ReLU of random projections to 32 dims); 60/20/20
train/validation/test. Boundary-biased noise: an "annotator" (multinomial logistic regression on the
clean data with its weights perturbed) flips the 30% of train and validation rows where it is least
sure to its second choice. Per view an MLP (32 -> 64 -> 5, 30 epochs) trains on the labels; detection
flags 30% of the rows (gradient-outlier or small-loss score, both given the true rate); flagged rows are
relabelled by the nearest clean prototype (concatenated hidden features) or dropped (margin 0.02); MLPs
retrain on the purified labels; a (20 + 20) evolution over 10 generations searches the fusion weights
on the (purified) validation labels. Metrics: detection F1 and AUROC, test accuracy of the fused model
(clean test labels), and FEB = Spearman correlation between the fitness the search saw and the fitness
on clean validation labels, over every evaluated individual.

SmolLM2 (`smollm2-135m` cached token rows, stdlib-docs / stdlib / pydoc-topics, 48 x 64 tokens each,
position 0 dropped; rows subsampled to 3,000): label = corpus; view 1 = top-32 PCs of layer 12, view 2 =
top-32 PCs of layer 24; the annotator is a perturbed logistic regression on layer-6 PCs.

Strong baseline (issue 42): "early stopping (no purification)": no detection, no relabelling; each view's MLP
trains on the noisy labels for the number of epochs (from EPOCHS_GRID, capped at the run's epochs) with the best
accuracy on the noisy validation labels, then the same fusion search. Printed after each table: GFD + relabel minus
it, fused test accuracy paired by seed.
"""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F
from torch import nn

from interp.contrib.common.fit import epoch_batches, fit, make_optimizer
from interp.contrib.common.probe import train_linear_probe
from interp.contrib.common.ranks import auroc, spearman
from interp.contrib.data.gfd_emvc import (
    detection_f1,
    evolve_fusion,
    flag_top,
    fused_accuracy,
    gradient_outlier_scores,
    last_layer_gradients,
    prototype_relabel,
    small_loss_scores,
    standardise,
)
from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.report import fmt, markdown_table

NOISE = 0.3
METHODS = (
    "no purification",
    "early stopping (strong baseline)",
    "small-loss + relabel",
    "GFD (gradient outliers) + relabel",
    "clean labels (oracle)",
)
EPOCHS_GRID = (2, 4, 8, 15, 30)


class ViewMLP(nn.Module):
    def __init__(self, d: int, k: int):
        super().__init__()
        self.body, self.head = nn.Sequential(nn.Linear(d, 64), nn.ReLU()), nn.Linear(64, k)

    def forward(self, x):
        z = self.body(x)
        return self.head(z), z


def train_view(x, y, k, epochs, seed):
    torch.manual_seed(seed)
    m = ViewMLP(x.shape[1], k)
    fit(
        make_optimizer(m.parameters(), lr=1e-3),
        lambda idx: F.cross_entropy(m(x[idx])[0], y[idx]),
        epoch_batches(len(x), 128, epochs, seed),
    )
    return m


def annotate(x_annot, y, k, seed, frac=NOISE):
    """Boundary-biased flips: a perturbed logistic annotator flips its least-sure rows to its 2nd choice."""
    torch.manual_seed(seed)
    w, b = train_linear_probe(x_annot, y, k, steps=200, lr=0.05, weight_decay=0.0, init="linear")
    g = torch.Generator().manual_seed(seed + 5)
    w = w + 0.5 * w.std() * torch.randn(w.shape, generator=g)
    p = F.softmax(x_annot @ w.T + b, -1)
    top2 = p.topk(2, dim=1)
    sure = top2.values[:, 0] - top2.values[:, 1]
    flip = flag_top(-sure, frac)
    noisy = y.clone()
    alt = torch.where(top2.indices[:, 0] == y, top2.indices[:, 1], top2.indices[:, 0])
    noisy[flip] = alt[flip]
    return noisy


def purify(models, views, y, how: str):
    """(purified labels, keep mask, flagged, score) of rows `views` [V][n, d] under labels y."""
    with torch.no_grad():
        outs = [m(v) for m, v in zip(models, views)]
    if how == "small-loss":
        score = sum(standardise(small_loss_scores(lg, y)) for lg, _ in outs) / len(outs)
    else:
        score = sum(standardise(gradient_outlier_scores(last_layer_gradients(lg, y, z), y)) for lg, z in outs) / len(
            outs
        )
    flagged = flag_top(score, NOISE)
    feats = torch.cat([F.normalize(z, dim=1) for _, z in outs], 1)
    new, keep = prototype_relabel(feats, y, flagged, margin=0.02)
    return new, keep, flagged, score


def pipeline(data, k: int, epochs: int, seed: int) -> dict[str, dict[str, float]]:
    views, y_clean, y_noisy, (tr, va, te) = data
    out = {}
    base = [train_view(v[tr], y_noisy[tr], k, epochs, seed) for v in views]
    for method in METHODS:
        if method == "clean labels (oracle)":
            models = [train_view(v[tr], y_clean[tr], k, epochs, seed) for v in views]
            y_tr, y_va, det = y_clean[tr], y_clean[va], {}
        elif method == "no purification":
            models, y_tr, y_va, det = base, y_noisy[tr], y_noisy[va], {}
        elif method.startswith("early stopping"):
            models = [early_stopped(v[tr], y_noisy[tr], v[va], y_noisy[va], k, epochs, seed) for v in views]
            y_tr, y_va, det = y_noisy[tr], y_noisy[va], {}
        else:
            how = "small-loss" if method.startswith("small") else "gradient"
            new_tr, keep_tr, flagged, score = purify(base, [v[tr] for v in views], y_noisy[tr], how)
            truth = y_noisy[tr] != y_clean[tr]
            det = {
                "detection F1": detection_f1(flagged, truth),
                "detection AUROC": auroc(score[truth], score[~truth]),
                "relabel acc": float((new_tr[flagged & keep_tr] == y_clean[tr][flagged & keep_tr]).float().mean()),
            }
            models = [train_view(v[tr][keep_tr], new_tr[keep_tr], k, epochs, seed) for v in views]
            new_va, keep_va, _, _ = purify(models, [v[va] for v in views], y_noisy[va], how)
            y_tr, y_va = new_tr, torch.where(keep_va, new_va, y_noisy[va])
        with torch.no_grad():
            lv = [m(v[va])[0] for m, v in zip(models, views)]
            lt = [m(v[te])[0] for m, v in zip(models, views)]
        best, hist = evolve_fusion(lv, y_va, seed=seed)
        seen = torch.tensor([f for _, f in hist])
        clean = torch.tensor([fused_accuracy(w, lv, y_clean[va]) for w, _ in hist])
        out[method] = {**det, "test acc": fused_accuracy(best, lt, y_clean[te]), "FEB rank corr": spearman(seen, clean)}
        del y_tr
    return out


def early_stopped(x, y, x_va, y_va, k, epochs, seed):
    """The view's MLP trained for the epoch count (EPOCHS_GRID, at most `epochs`) with the best noisy-validation
    accuracy."""
    best, best_acc = None, -1.0
    for e in sorted({min(e, epochs) for e in EPOCHS_GRID}):
        m = train_view(x, y, k, e, seed)
        with torch.no_grad():
            acc = float((m(x_va)[0].argmax(1) == y_va).float().mean())
        if acc > best_acc:
            best, best_acc = m, acc
    return best


def synthetic_data(seed: int, n: int):
    from sklearn.datasets import make_classification

    x, y = make_classification(
        n_samples=n,
        n_features=20,
        n_informative=10,
        n_classes=5,
        n_clusters_per_class=1,
        class_sep=1.2,
        random_state=seed,
    )
    x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y)
    g = torch.Generator().manual_seed(seed)
    views = [
        torch.tanh(x @ torch.randn(20, 32, generator=g) / 20**0.5),
        F.relu(x @ torch.randn(20, 32, generator=g) / 20**0.5) + 0.1 * torch.randn(n, 32, generator=g),
    ]
    return views, y, annotate(x, y, 5, seed), splits(n, seed)


def splits(n, seed):
    p = torch.randperm(n, generator=torch.Generator().manual_seed(seed + 1))
    return p[: int(0.6 * n)], p[int(0.6 * n) : int(0.8 * n)], p[int(0.8 * n) :]


def lm_data(seed: int):
    from interp.contrib.lm_features import hook_name, labelled_corpora

    def pcs(layer):
        x, y = labelled_corpora(hook_name(layer), n_seq=48, per_sequence=False)
        x = x.double() - x.double().mean(0)
        _, _, vh = torch.linalg.svd(x, full_matrices=False)
        z = (x @ vh[:32].T).float()
        return z / z.std(0), y

    (v6, y), (v12, _), (v24, _) = pcs(6), pcs(12), pcs(24)
    pick = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))[:3000]
    v6, v12, v24, y = v6[pick], v12[pick], v24[pick], y[pick]
    return [v12, v24], y, annotate(v6, y, 3, seed), splits(len(y), seed)


def show(title, res):
    keys = ["detection F1", "detection AUROC", "relabel acc", "test acc", "FEB rank corr"]
    print(title)
    print(
        markdown_table(["method", *keys], [[m, *(fmt(r[k]) if k in r else "-" for k in keys)] for m, r in res.items()])
    )


def paired(res) -> str:
    d = [a - b for a, b in zip(res[METHODS[3]]["test acc"], res[METHODS[1]]["test acc"])]
    higher = sum(v > 0 for v in d)
    return f"GFD + relabel - early stopping, fused test accuracy paired by seed: {fmt(d)} (higher {higher}/{len(d)})"


def collect(per):
    res = {}
    for p in per:
        for m, r in p.items():
            for k, v in r.items():
                res.setdefault(m, {}).setdefault(k, []).append(v)
    return res


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__, seeds=3, quick="1 seed, 600 rows, 3 epochs, no LM run", no_lm="skip the SmolLM2 run"
    )
    a = parse(ap, argv)
    seeds, n, epochs = (1, 600, 3) if a.quick else (a.seeds, 3000, 30)
    out = {"synthetic": collect([pipeline(synthetic_data(s, n), 5, epochs, s) for s in range(seeds)])}
    show(
        f"two synthetic views, 5 classes, {int(NOISE * 100)}% boundary-biased noise (mean ± sd over {seeds} seeds)",
        out["synthetic"],
    )
    print(paired(out["synthetic"]))
    if not (a.quick or a.no_lm):
        out["smollm2"] = collect([pipeline(lm_data(s), 3, epochs, s) for s in range(seeds)])
        show(f"\nsmollm2-135m: views = layers 12 and 24, label = corpus ({seeds} seeds)", out["smollm2"])
        print(paired(out["smollm2"]))
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    main()
