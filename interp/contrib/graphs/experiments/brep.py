"""BRep demo: Pearson connectivity + MLP vs BRep's learnable correlation kernels, on synthetic ROI series
whose classes differ by a coupling Pearson cannot see, and on co-activation among SmolLM2 residual units.

    python -m interp.contrib.graphs.experiments.brep [--seeds 3] [--quick] [--no-lm]

Synthetic (catalog): 30 ROIs, T = 200, 400 subjects (300 train / 100 test). Every ROI is AR(1) Gaussian;
in class 1 four ROI pairs carry a quadratic coupling x_j = (x_i² - 1)/√2 (mixed 50/50 with noise), in
class 0 the same ROIs carry (w² - 1)/√2 of an independent w: same marginals, zero Pearson correlation in
both classes, so Pearson + MLP should sit at chance.

SmolLM2 ([C]; `smollm2-135m`, `blocks.12.hook_resid_post` from the contrib `ActivationStore`s of
stdlib-docs, stdlib and pydoc-topics, 48 sequences x 63 tokens each, position 0 dropped): tokens are time,
the 30 residual units of largest variance (after dropping the 3 massive-activation units) are the
"regions"; the label is the corpus (3 classes; 96 train / 48 test sequences).

Strong baseline (issue 42, synthetic only): the neuroimaging connectivity measures a referee tries first, each
into a linear ridge classifier whose penalty is chosen by 5-fold CV on the training subjects (LAMS), same splits:
Pearson connectivity (the linear version of the control) and amplitude-envelope correlation (Pearson of the
centred |x_t|, the standard measure of amplitude coupling). `--baselines-only` skips the BRep / Pearson + MLP
training (6 minutes a seed) and prints these rows alone.
"""

from __future__ import annotations

import json

import torch

from interp.contrib.common.ridge import ridge_classify
from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.graphs.brep import BRep, PearsonMLP, accuracy, pearson_connectivity, train_classifier
from interp.contrib.report import fmt, markdown_table


def synthetic(seed: int, n: int = 400, T: int = 200, R: int = 30, n_pairs: int = 4):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 2
    e = torch.randn(n, T, R, generator=g)
    x = torch.empty_like(e)
    x[:, 0] = e[:, 0]
    for t in range(1, T):  # AR(1), unit variance
        x[:, t] = 0.5 * x[:, t - 1] + (0.75**0.5) * e[:, t]
    for p in range(n_pairs):
        i, j = 2 * p, 2 * p + 1
        w = torch.where(y.view(-1, 1) == 1, x[:, :, i], torch.randn(n, T, generator=g))
        x[:, :, j] = 0.5**0.5 * (w**2 - 1) / 2**0.5 + 0.5**0.5 * torch.randn(n, T, generator=g)
    perm = torch.randperm(n, generator=g)
    return x[perm], y[perm]


def smollm_series():
    from interp.contrib.lm_features import CORPORA, corpus_store, hook_name, load_lm

    xs, ys, loaded = [], [], load_lm()  # its weights key the caches
    for c, name in enumerate(CORPORA):
        st = corpus_store(name, 48, 64, loaded=loaded)
        data = st.get_rows(slice(0, len(st)), hooks=[hook_name(12)])
        h = data[hook_name(12)].float()
        keep = data["pos"] > 0
        seqs = data["seq"][keep]
        h = h[keep]
        for s in torch.unique(seqs):
            xs.append(h[seqs == s][:63])
            ys.append(c)
    X = torch.stack(xs)  # [n_seq, 63, 576]
    var = X.reshape(-1, X.shape[-1]).var(0)
    order = var.argsort(descending=True)
    units = order[3:33]  # skip the massive-activation units
    return X[:, :, units], torch.tensor(ys), units.tolist()


LAMS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1e3)
BASELINES = ("Pearson + ridge, CV (strong baseline)", "amplitude-envelope corr. + ridge, CV (strong baseline)")


def upper(c: torch.Tensor) -> torch.Tensor:
    """The strict upper triangle of connectivity matrices [n, R, R] as features [n, R(R-1)/2]."""
    i, j = torch.triu_indices(c.shape[1], c.shape[2], 1)
    return c[:, i, j]


def cv_ridge_accuracy(f_tr, y_tr, f_te, y_te, n_classes, folds: int = 5) -> tuple[float, float]:
    """Test accuracy of the ridge classifier with its penalty chosen by `folds`-fold CV on the training rows."""
    n = len(y_tr)
    err = dict.fromkeys(LAMS, 0)
    for f in range(folds):
        val = torch.zeros(n, dtype=torch.bool)
        val[f * n // folds : (f + 1) * n // folds] = True
        for lam in LAMS:
            err[lam] += int((ridge_classify(f_tr[~val], y_tr[~val], f_tr[val], n_classes, lam) != y_tr[val]).sum())
    lam = min(LAMS, key=lambda v: err[v])
    return float((ridge_classify(f_tr, y_tr, f_te, n_classes, lam) == y_te).float().mean()), lam


def baselines(x, y, n_train, n_classes, s: int = 0) -> dict[str, float]:
    """The strong-baseline rows on the split `compare` draws for its seed `s`."""
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(1000 + s))
    tr, te = perm[:n_train], perm[n_train:]
    feats = {
        BASELINES[0]: upper(pearson_connectivity(x)).double(),
        BASELINES[1]: upper(pearson_connectivity(x.abs())).double(),
    }
    return {k: cv_ridge_accuracy(f[tr], y[tr], f[te], y[te], n_classes)[0] for k, f in feats.items()}


def compare(x, y, n_train, n_classes, seeds, epochs):
    res = {"Pearson + MLP": [], "BRep": []}
    for s in range(seeds):
        g = torch.Generator().manual_seed(1000 + s)
        perm = torch.randperm(len(x), generator=g)
        tr, te = perm[:n_train], perm[n_train:]
        R = x.shape[2]
        for name, model in (("Pearson + MLP", PearsonMLP(R, n_classes)), ("BRep", BRep(R, n_classes))):
            torch.manual_seed(s)
            for m in model.modules():
                if hasattr(m, "reset_parameters"):
                    m.reset_parameters()
            train_classifier(model, x[tr], y[tr], epochs=epochs, seed=s)
            res[name].append(accuracy(model.eval(), x[te], y[te]))
    return res


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__, seeds=3, quick="1 seed, 80 subjects of T = 60, 10 ROIs, 8 epochs, no LM", no_lm="skip the SmolLM2 run"
    )
    ap.add_argument("--lm-only", action="store_true", help="only the SmolLM2 run")
    ap.add_argument("--first-seed", type=int, default=0, help="seed of the first synthetic run (to split runs)")
    ap.add_argument("--baselines-only", action="store_true", help="only the strong-baseline rows (synthetic, fast)")
    a = parse(ap, argv)
    if a.seeds <= 0:
        raise ValueError("--seeds must be positive")
    seeds = 1 if a.quick else a.seeds
    out = {}
    rows = []
    for s in range(a.first_seed, a.first_seed + (0 if a.lm_only else seeds)):
        x, y = synthetic(s, *((80, 60, 10) if a.quick else (400, 200, 30)))
        n_train = 60 if a.quick else 300
        r = {} if a.baselines_only else {k: v[0] for k, v in compare(x, y, n_train, 2, 1, 8 if a.quick else 30).items()}
        rows.append({**r, **baselines(x, y, n_train, 2)})
        if s == a.first_seed:
            C = pearson_connectivity(x)
            pear = C[:, 0, 1].abs().mean().item()
    out["synthetic"] = rows
    if rows:
        print(
            f"synthetic quadratic coupling: test accuracy (chance 0.5; {seeds} seeds); mean |Pearson r| of a coupled "
            f"pair {pear:.3f}"
        )
        print(markdown_table(["representation", "test accuracy"], [[k, fmt([r[k] for r in rows])] for k in rows[0]]))
    if not (a.quick or a.no_lm or a.baselines_only):
        x, y, units = smollm_series()
        lm = compare(x, y, 96, 3, seeds, 30)
        out["smollm2"] = {"accuracy": lm, "units": units}
        print(
            f"\nsmollm2-135m layer 12, 30 residual units, tokens as time: corpus (3 classes, chance 0.33; {seeds} "
            "splits)"
        )
        print(markdown_table(["representation", "test accuracy"], [[k, fmt(v)] for k, v in lm.items()]))
    print(json.dumps({k: v for k, v in out.items()}))
    return out


if __name__ == "__main__":
    main()
