"""RepUnl demo: forget a class, or a random 10% of the training set, with a transform on one layer's states.

    python -m interp.contrib.privacy.experiments.representation_unlearning [--seeds 1] [--steps 1200]
        [--transform-steps 300]

Model: a tiny Llama (2 layers, d 64) trained here as a sequence classifier: 12 tokens drawn mostly from
the word group of one of 6 topics (plus noise words, and 15% of training labels flipped so that it
memorises), then `?`; it predicts the topic token. Unlearning acts on `blocks.0.hook_resid_post` at the
last position through a hook: `model.hooks(fwd_hooks=[("blocks.0.hook_resid_post", T.hook(-1))])`.
The model's weights never change.

Settings: forget class 3; forget a random 10% of the training examples. Methods:
  - original; retrain from scratch on the retain set (the gold standard);
  - fine-tune on retain, gradient ascent on forget, random labels on forget (+ retain) (parameter edits);
  - RepUnl retain+forget; RepUnl forget-only (zero-shot; class setting only).
Reported: accuracy on the retain set, the forget set and the test set (without the forgotten class in the
class setting), a loss-threshold membership-inference AUC on forget vs test examples (0.5 = looks unseen),
and the seconds each method took. Prints JSON; about 15 minutes on a loaded 2-core machine.
"""

from __future__ import annotations

import json
import time

import torch
import torch.nn.functional as F

from interp.contrib.common.fit import fit, make_optimizer
from interp.contrib.common.ranks import auroc
from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.faithfulness.experiments._toy import mean_over_runs, tiny_lm, train_lm
from interp.contrib.privacy.representation_unlearning import RepresentationTransform, UnlearnConfig, fit_transform
from interp.infra.argtypes import positive_int

N_TOPICS, GROUP, N_NOISE, LEN = 6, 6, 12, 12
TOPIC0 = N_TOPICS * GROUP + N_NOISE  # the topic (label) tokens
QMARK = TOPIC0 + N_TOPICS
VOCAB = QMARK + 1
LAYER = 0
HOOK = f"blocks.{LAYER}.hook_resid_post"


def make_data(n: int, gen: torch.Generator, flip: float):
    y = torch.randint(N_TOPICS, (n,), generator=gen)
    words = y[:, None] * GROUP + torch.randint(GROUP, (n, LEN), generator=gen)
    other = torch.randint(N_TOPICS * GROUP, N_TOPICS * GROUP + N_NOISE, (n, LEN), generator=gen)
    mix = torch.randint(N_TOPICS * GROUP, (n, LEN), generator=gen)  # words of any topic
    r = torch.rand(n, LEN, generator=gen)
    words = torch.where(r < 0.35, other, torch.where(r < 0.6, mix, words))
    noisy = torch.rand(n, generator=gen) < flip
    y = torch.where(noisy, torch.randint(N_TOPICS, (n,), generator=gen), y)
    return torch.cat([words, torch.full((n, 1), QMARK)], 1), y


def with_label(x, y):
    ids = torch.cat([x, (y + TOPIC0)[:, None]], 1)
    mask = torch.zeros_like(ids)
    mask[:, -1] = 1
    return ids, mask


def trainer(x, y, batch=64):
    ids, mask = with_label(x, y)

    def fn(g):
        i = torch.randint(len(ids), (batch,), generator=g)
        return ids[i], mask[i]

    return fn


@torch.no_grad()
def class_logits(model, x, hook=None):
    hooks = [] if hook is None else [(HOOK, hook)]
    return model.run_with_hooks(x, fwd_hooks=hooks)[:, -1, TOPIC0 : TOPIC0 + N_TOPICS]


def metrics(model, sets, hook=None) -> dict:
    out = {}
    losses = {}
    for name, (x, y) in sets.items():
        lg = class_logits(model, x, hook)
        out[f"acc_{name}"] = round((lg.argmax(-1) == y).float().mean().item(), 4)
        losses[name] = F.cross_entropy(lg, y, reduction="none")
    out["mia_auc_forget_vs_test"] = round(auroc(-losses["forget"], -losses["test"]), 4)
    return out


def finetune(model, batch_fn, steps, lr, ascent=False, seed=0):
    """A few steps on the model's own weights (the parameter-editing baselines)."""
    hf = model.hf_model.train()
    gen = torch.Generator().manual_seed(seed)

    def loss_fn(_):
        ids, mask = batch_fn(gen)
        loss = F.cross_entropy(hf(input_ids=ids, use_cache=False).logits[:, -2], ids[:, -1])
        return -loss if ascent else loss

    fit(make_optimizer(hf.parameters(), lr=lr), loss_fn, range(steps))
    hf.eval()


def clone(model, seed):
    m = tiny_lm(VOCAB, ctx=16, seed=seed)
    m.hf_model.load_state_dict(model.hf_model.state_dict())
    return m


def run_setting(setting: str, seed: int, steps: int, t_steps: int = 300) -> dict:
    gen = torch.Generator().manual_seed(seed)
    x, y = make_data(3000, gen, flip=0.15)
    xt, yt = make_data(1000, gen, flip=0.0)
    if setting == "class":
        forget = y == 3
        test_keep = yt != 3
    else:
        forget = torch.rand(len(y), generator=gen) < 0.1
        test_keep = torch.ones_like(yt, dtype=torch.bool)
    sets = {
        "retain": (x[~forget], y[~forget]),
        "forget": (x[forget], y[forget]),
        "test": (xt[test_keep], yt[test_keep]),
    }
    out = {}

    t0 = time.time()
    model = tiny_lm(VOCAB, ctx=16, seed=seed)
    train_lm(model, trainer(x, y), steps, lr=3e-3, seed=seed)
    out["original"] = {**metrics(model, sets), "seconds": round(time.time() - t0, 1)}
    t0 = time.time()
    gold = tiny_lm(VOCAB, ctx=16, seed=seed)
    train_lm(gold, trainer(*sets["retain"]), steps, lr=3e-3, seed=seed)
    out["retrain (gold)"] = {**metrics(gold, sets), "seconds": round(time.time() - t0, 1)}
    base_steps = max(steps // 10, 20)
    for name, _kw in (("finetune retain", {}), ("gradient ascent", {"ascent": True}), ("random labels", {})):
        t0 = time.time()
        m = clone(model, seed)
        for p in m.parameters():
            p.requires_grad_(True)
        if name == "finetune retain":
            finetune(m, trainer(*sets["retain"]), base_steps, 1e-3, seed=seed)
        elif name == "gradient ascent":
            finetune(m, trainer(*sets["forget"]), max(base_steps // 4, 5), 1e-4, ascent=True, seed=seed)
        else:
            rl = torch.randint(N_TOPICS, (int(forget.sum()),), generator=gen)
            xr = torch.cat([sets["retain"][0], sets["forget"][0]])
            yr = torch.cat([sets["retain"][1], rl])
            finetune(m, trainer(xr, yr), base_steps, 1e-3, seed=seed)
        out[name] = {**metrics(m, sets), "seconds": round(time.time() - t0, 1)}

    # RepUnl: the model is frozen; T is fitted on the cached layer states at the last position
    regimes = [("RepUnl retain+forget", "retain_forget", 2.0, 1.0)]
    if setting == "class":
        regimes.append(("RepUnl forget-only", "forget_only", 10.0, 0.1))
    for name, regime, beta, l2 in regimes:
        out[name] = repunl(model, x, y, forget, sets, regime, beta, l2, seed, t_steps)
    return out


def repunl(model, x, y, forget, sets, regime: str, beta: float, l2: float, seed: int, t_steps: int = 300) -> dict:
    """Fit a RepUnl transform on the frozen model's `HOOK` states at the last position; its metrics."""
    t0 = time.time()
    for p in model.parameters():
        p.requires_grad_(False)
    _, cache = model.run_with_cache(x, names=HOOK, return_logits=False)
    z = cache[HOOK][:, -1]

    def decode(t, idx, xs):
        def put(h, point):
            h = h.clone()
            h[:, -1] = t
            return h

        return model.run_with_hooks(xs[idx], fwd_hooks=[(HOOK, put)])[:, -1, TOPIC0 : TOPIC0 + N_TOPICS]

    T = RepresentationTransform(model.d_model, 64)
    xf, xr = x[forget], x[~forget]
    zf, zr = z[forget], z[~forget]
    cfg = UnlearnConfig(regime=regime, beta=beta, l2=l2, steps=t_steps, lr=3e-3, batch_size=128, seed=seed)
    if regime == "retain_forget":  # the decoder only ever sees retain rows there (KL needs none)
        fit_transform(T, lambda t, idx: decode(t, idx, xr), zf, y[forget], zr, y[~forget], cfg)
    else:  # forget-only: it decodes forget rows (the distillation term)
        fit_transform(T, lambda t, idx: decode(t, idx, xf), zf, y[forget], cfg=cfg)
    return {**metrics(model, sets, hook=T.hook(-1)), "seconds": round(time.time() - t0, 1)}


def run_control(data_seed: int, model_seed: int, steps: int, baselines: bool = False, t_steps: int = 300) -> dict:
    """The control that isolates the information-bottleneck term: class 3 forgotten by the same transform,
    trained with beta = 2 (RepUnl) and beta = 0 (retain cross-entropy through T only, no KL on the forget
    states). `data_seed` draws the data, `model_seed` the original model's init and batches and T's;
    `baselines` adds retrain-from-scratch on retain and fine-tune on retain (as in `run_setting`)."""
    gen = torch.Generator().manual_seed(data_seed)
    x, y = make_data(3000, gen, flip=0.15)
    xt, yt = make_data(1000, gen, flip=0.0)
    forget, test_keep = y == 3, yt != 3
    sets = {
        "retain": (x[~forget], y[~forget]),
        "forget": (x[forget], y[forget]),
        "test": (xt[test_keep], yt[test_keep]),
    }
    model = tiny_lm(VOCAB, ctx=16, seed=model_seed)
    train_lm(model, trainer(x, y), steps, lr=3e-3, seed=model_seed)
    out = {"original": metrics(model, sets)}
    if baselines:  # the weight-editing baselines of run_setting, on the same data and seeds
        gold = tiny_lm(VOCAB, ctx=16, seed=model_seed)
        train_lm(gold, trainer(*sets["retain"]), steps, lr=3e-3, seed=model_seed)
        out["retrain (gold)"] = metrics(gold, sets)
        m = clone(model, model_seed)
        for p in m.parameters():
            p.requires_grad_(True)
        finetune(m, trainer(*sets["retain"]), max(steps // 10, 20), 1e-3, seed=model_seed)
        out["finetune retain"] = metrics(m, sets)
    for name, beta in (("RepUnl retain+forget (beta 2)", 2.0), ("control: beta 0 (no IB term)", 0.0)):
        out[name] = repunl(model, x, y, forget, sets, "retain_forget", beta, 1.0, model_seed, t_steps)
    return out


def spread(runs: list[dict]) -> dict:
    """Per method and metric: mean and sd over runs, and the per-run values."""
    res = {}
    for method in runs[0]:
        res[method] = {}
        for k in runs[0][method]:
            v = torch.tensor([float(r[method][k]) for r in runs], dtype=torch.float64)
            sd = v.std().item() if len(v) > 1 else 0.0
            res[method][k] = {
                "mean": round(v.mean().item(), 4),
                "sd": round(sd, 4),
                "runs": [round(a, 4) for a in v.tolist()],
            }
    return res


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__, seeds=1, steps=(1200, "training steps of the original and retrained models"), threads=1
    )
    ap.add_argument(
        "--transform-steps", type=positive_int, default=300, help="optimiser steps of each RepUnl transform T"
    )
    ap.add_argument(
        "--control",
        action="store_true",
        help="only the beta = 0 control beside RepUnl (class "
        "setting): --seeds model seeds on data split 0, then --data-splits splits with model seed 0",
    )
    ap.add_argument("--data-splits", type=int, default=0, help="with --control: extra data splits (model seed 0)")
    ap.add_argument(
        "--baselines", action="store_true", help="with --control: also retrain on retain and fine-tune on retain"
    )
    args = parse(ap, argv)
    t0 = time.time()
    res = {"config": vars(args)}
    if args.control:
        runs = [run_control(0, m, args.steps, args.baselines, args.transform_steps) for m in range(args.seeds)]
        res["model seeds (data split 0)"] = spread(runs)
        if args.data_splits:
            splits = range(1, args.data_splits + 1)
            runs = [run_control(d, 0, args.steps, args.baselines, args.transform_steps) for d in splits]
            res["data splits 1.. (model seed 0)"] = spread(runs)
        res["seconds"] = round(time.time() - t0, 1)
        print(json.dumps(res, indent=1))
        return res
    for setting in ("class", "random10"):
        res[setting] = mean_over_runs(
            [run_setting(setting, s, args.steps, args.transform_steps) for s in range(args.seeds)]
        )
    res["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
