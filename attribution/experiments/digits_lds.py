"""LDS on a classifier (an MLP on scikit-learn's digits): our EK-FAC beside Kronfluence's on the same subsets.

    python -m attribution.experiments.digits_lds --out runs/lds_digits            # 1,000 rows, 50 subsets
    python -m attribution.experiments.digits_lds --out /tmp/d --n-train 200 --subsets 10 --quick

The retraining losses go to `OUT/retrain` (resumable, `attribution.lds.retrain_subsets`). Methods, each on the
model trained on every training row, scores with the harness's sign (positive = helpful):
- `ekfac` (ours, `attribution.ekfac_linear.EKFAC`, every Linear, damping 0.1 x mean eigenvalue per module,
  `--label-samples` sampled-label passes), `ekfac_1` (the same with one pass, as Kronfluence fits),
- `kronfluence` (its `Analyzer`, EK-FAC, its heuristic damping; skipped with the reason when not importable),
- `grad_dot` (gradient dot product of every Linear at the final weights; the first-order baseline),
- `trak` (TRAK-style, one model: Gaussian projection to 512 and the projected Gauss-Newton inverse),
- `tracin` (the same dot product summed over 4 checkpoints of the full run, weighted by the learning rate),
- `dattri_trak` (dattri 0.3.0's `TRAKAttributor` on the same final model, its defaults: the margin log p/(1-p) as
  output function, Gaussian projection to 512, no regularisation, one model; skipped with the reason when dattri
  is not importable).
Prints a JSON table: LDS mean and 95% interval per method, and the time each took; each method's scores go to
`OUT/scores/<method>.safetensors`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

from attribution.ekfac_linear import EKFAC, per_example_gradients
from attribution.lds import lds, random_subsets, retrain_subsets
from attribution.lds_classifier import ClassifierTask, DigitsTask


def _grad_rows(model, task: ClassifierTask, batches) -> torch.Tensor:
    mods = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    rows = []
    for b in batches:
        g, _ = per_example_gradients(mods, lambda b=b: task.compute_train_loss(b, model))
        rows.append(torch.cat([g[k].flatten(1) for k in sorted(g)], 1).double())
    return torch.cat(rows)


def grad_dot(model, digits: DigitsTask) -> torch.Tensor:
    task = ClassifierTask()
    return _grad_rows(model, task, digits.batches("train")) @ _grad_rows(model, task, digits.batches("query")).T


def trak(model, digits: DigitsTask, proj_dim: int = 512, ridge: float = 1e-2, seed: int = 0) -> torch.Tensor:
    """TRAK-style, one model: Gaussian projection of every Linear's gradients and the projected Gauss-Newton
    inverse (the LM tasks' `trak` method, on the classifier's gradients)."""
    from attribution.lds_methods import trak_kernel

    task = ClassifierTask()
    ftr, fq = _grad_rows(model, task, digits.batches("train")), _grad_rows(model, task, digits.batches("query"))
    return trak_kernel(ftr, fq, seed, proj_dim, ridge)


def tracin(digits: DigitsTask, n_checkpoints: int = 4) -> torch.Tensor:
    """Sum over checkpoints of lr x grad dot (the full run re-trained, stopped at evenly spaced steps)."""
    total = 0
    for c in range(1, n_checkpoints + 1):
        partial = dataclasses.replace(digits, steps=digits.steps * c // n_checkpoints)
        total = total + digits.lr * grad_dot(partial.train(torch.arange(digits.n_train)), digits)
    return total


def kronfluence_scores(model, digits: DigitsTask, workdir: Path, repeats: int = 1) -> torch.Tensor:
    """Kronfluence's pairwise scores [n_train, n_query]; `repeats` copies of the fitting rows give it that many
    sampled labels per row (what our `label_samples` does)."""
    import copy
    import tempfile

    from kronfluence.analyzer import Analyzer, prepare_model
    from kronfluence.arguments import FactorArguments, ScoreArguments
    from kronfluence.task import Task

    class KTask(ClassifierTask, Task):
        pass

    x, y, xq, yq = digits.data()
    data = torch.utils.data.TensorDataset
    prepared = prepare_model(copy.deepcopy(model), KTask())
    with tempfile.TemporaryDirectory(dir=workdir, prefix=".kronfluence-") as tmp:
        an = Analyzer("digits", prepared, KTask(), cpu=True, disable_tqdm=True, output_dir=tmp)
        fit = torch.utils.data.ConcatDataset([data(x, y)] * repeats)
        an.fit_all_factors("ekfac", fit, per_device_batch_size=digits.batch,
                           factor_args=FactorArguments(strategy="ekfac"), overwrite_output_dir=True)  # fmt: skip
        kw = dict(per_device_query_batch_size=digits.batch, per_device_train_batch_size=digits.batch)
        kw |= dict(score_args=ScoreArguments(damping_factor=None), overwrite_output_dir=True)
        an.compute_pairwise_scores("s", "ekfac", data(xq, yq), data(x, y), **kw)
        return an.load_pairwise_scores("s")["all_modules"].T.double()


def dattri_trak(model, digits: DigitsTask, proj_dim: int = 512, seed: int = 0) -> torch.Tensor:
    """dattri's TRAK [n_train, n_query] on the final model (`attribution.lds_methods.dattri_trak_run`), p the
    probability of the true class."""
    import torch.nn.functional as F
    from torch.func import functional_call
    from torch.utils.data import DataLoader, TensorDataset

    from attribution.lds_methods import dattri_trak_run

    def log_p(params, data):
        x, y = data
        return -F.cross_entropy(functional_call(model, params, (x.unsqueeze(0),)), y.unsqueeze(0))

    x, y, xq, yq = digits.data()
    batches = [DataLoader(TensorDataset(a, b), batch_size=digits.batch) for a, b in ((x, y), (xq, yq))]
    return dattri_trak_run(model, log_p, *batches, proj_dim, seed)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--n-train", type=int, default=1000)
    ap.add_argument("--n-query", type=int, default=50)
    ap.add_argument("--subsets", type=int, default=50)
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--label-samples", type=int, default=4, help="sampled-label passes of our EK-FAC fit")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="100 training steps (a smoke run)")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    digits = DigitsTask(n_train=a.n_train, n_query=a.n_query, seed=a.seed, steps=100 if a.quick else 300)
    out = Path(a.out)
    masks = random_subsets(digits.n_train, a.subsets, a.alpha, seed=a.seed)
    t0 = time.perf_counter()
    losses = retrain_subsets(digits, masks, out / "retrain", progress=False)
    retrain_s = time.perf_counter() - t0
    model = digits.train(torch.arange(digits.n_train))
    methods = {
        "ekfac": lambda: (
            EKFAC(model, ClassifierTask())
            .fit(digits.batches("train"), label_samples=a.label_samples, seed=a.seed)
            .scores(digits.batches("train"), digits.batches("query"))
        ),
        "ekfac_1": lambda: (
            EKFAC(model, ClassifierTask())  # one label sample, as Kronfluence draws
            .fit(digits.batches("train"), label_samples=1, seed=a.seed)
            .scores(digits.batches("train"), digits.batches("query"))
        ),
        "kronfluence": lambda: kronfluence_scores(model, digits, out),
        "grad_dot": lambda: grad_dot(model, digits),
        "trak": lambda: trak(model, digits, seed=a.seed),
        "tracin": lambda: tracin(digits),
        "dattri_trak": lambda: dattri_trak(model, digits, seed=a.seed),
    }
    rows = {}
    for name, fn in methods.items():
        t0 = time.perf_counter()
        torch.manual_seed(a.seed)  # Kronfluence samples its labels from the global generator: fixed per method
        try:
            scores = fn()
        except ImportError as exc:
            rows[name] = {"skipped": f"not importable: {exc}"}
            continue
        r = lds(scores, masks, losses)
        (out / "scores").mkdir(parents=True, exist_ok=True)  # for paired differences (experiments.lds_table)
        save_file({"scores": scores.float().contiguous()}, str(out / "scores" / f"{name}.safetensors"))
        ci = [round(r.low, 4), round(r.high, 4)]
        rows[name] = {"lds": round(r.mean, 4), "ci95": ci, "seconds": round(time.perf_counter() - t0, 1)}
    res = {"task": digits.identity(), "subsets": a.subsets, "alpha": a.alpha, "retrain_seconds": round(retrain_s, 1),
           "query_loss_spread": round(float(losses.std(0).mean()), 4), "methods": rows}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / "lds.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
