"""FourierSB demo: phase-only learning time vs the spectrum exponent β; amplitude- vs phase-reliance over
training; the positional power spectrum of SmolLM2's residual stream.

    python -m interp.contrib.mechanisms.experiments.fourier_sb [--seeds 2] [--samples 200000] [--quick] [--no-lm]

Catalog setting: N = 64 1-D signals, power spectrum ∝ f^-β with β in {0, 1, 2}; a 2-layer ReLU network
(width 64) trained by online SGD (fresh samples every step, batch 32, lr 0.1, BCE) on up to 2x10^5
samples. (a) Phase-only task (both classes share the amplitude; label 1 = phase-coupled, edge-like
signals, phase noise 0.5π): test accuracy every 4,096 samples; samples until 0.75 accuracy.
(b) Mixed task (label 1 also has slope β + 0.5): accuracy on the amplitude-only probe (random phases,
class amplitudes) and on the phase-only probe (common amplitude, class phases) over training; samples
until each reaches 0.75.

SmolLM2 (`smollm2-135m` cached `blocks.{6,12,18,24,29}.hook_resid_post`, stdlib-docs, 48 x 64 tokens,
position 0 dropped): the power spectrum along token positions and its fitted exponent β (a real model's
internal "signals along the sequence": are they power-law, the regime where phase is learned fast?).
"""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F
from torch import nn

from interp.contrib.common.fit import fit, make_optimizer
from interp.contrib.experiment import STORE_MODEL_HELP, experiment_parser, model_refusals, parse
from interp.contrib.mechanisms.fourier_sb import mixed_task, phase_task, positional_spectrum
from interp.contrib.report import fmt, markdown_table, per_sample, stack_runs

N, WIDTH, BATCH, LR, EVERY, TARGET = 64, 64, 32, 0.1, 4096, 0.75


def net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(N, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 1))


@torch.no_grad()
def acc(model, x, y) -> float:
    return float(((model(x).squeeze(-1) > 0).long() == y).float().mean())


def train_online(make_batch, probes: dict, samples: int, seed: int) -> dict[str, list[float]]:
    model = net(seed)
    curves = {k: [] for k in probes}

    def loss_fn(step: int):
        x, y = make_batch(seed * 1_000_003 + step)
        return F.binary_cross_entropy_with_logits(model(x).squeeze(-1), y.float())

    def probe(steps: int, _loss) -> None:
        if (steps * BATCH) % EVERY < BATCH:  # `steps * BATCH` samples seen
            for k, (px, py) in probes.items():
                curves[k].append(acc(model, px, py))

    fit(
        make_optimizer(model.parameters(), lr=LR, name="sgd"),
        loss_fn,
        range(len(range(0, samples, BATCH))),
        callback=probe,
    )
    return curves


def first_reach(curve: list[float]) -> float:
    return next(((i + 1) * EVERY for i, a in enumerate(curve) if a >= TARGET), float("inf"))


def run(seeds: int, samples: int, betas) -> dict:
    out: dict[str, dict[str, list[float]]] = {}
    for beta in betas:
        row: dict[str, list[float]] = {
            k: []
            for k in (
                "phase-only: samples to 0.75",
                "phase-only: final acc",
                "mixed: samples to 0.75 (amplitude probe)",
                "mixed: samples to 0.75 (phase probe)",
                "mixed: final amplitude-probe acc",
                "mixed: final phase-probe acc",
            )
        }
        for s in range(seeds):
            test = phase_task(2000, N, beta, 10_000 + s)
            c = train_online(lambda k: phase_task(BATCH, N, beta, k), {"test": test}, samples, s)["test"]  # noqa: B023
            row["phase-only: samples to 0.75"].append(first_reach(c))
            row["phase-only: final acc"].append(c[-1])
            probes = {
                "amp": mixed_task(2000, N, beta, 20_000 + s, probe="amplitude_only"),
                "phase": mixed_task(2000, N, beta, 30_000 + s, probe="phase_only"),
            }
            m = train_online(lambda k: mixed_task(BATCH, N, beta, k), probes, samples, s)  # noqa: B023
            row["mixed: samples to 0.75 (amplitude probe)"].append(first_reach(m["amp"]))
            row["mixed: samples to 0.75 (phase probe)"].append(first_reach(m["phase"]))
            row["mixed: final amplitude-probe acc"].append(m["amp"][-1])
            row["mixed: final phase-probe acc"].append(m["phase"][-1])
        out[f"β={beta}"] = row
    return out


def lm_spectra(sample: int = 0, loaded=None, model_name: str = "smollm2-135m") -> dict[str, float]:
    """β of the residual spectrum along positions at each cached layer (SmolLM2's 6, 12, 18, 24, 29, or the same
    relative depths of another model), on data sample `sample`."""
    from interp.contrib.lm_features import corpus_store, depth_layers, hook_name, load_lm, token_rows

    loaded = load_lm(model_name) if loaded is None else loaded
    layers = depth_layers(loaded.n_layers)
    st = corpus_store("stdlib-docs", 48, 64, model_name, layers, loaded=loaded, sample=sample)
    out = {}
    for layer in layers:
        x, idx = token_rows(st, hook_name(layer))
        n_seq = int(idx["seq"].unique().numel())
        out[f"layer {layer}"] = positional_spectrum(x.view(n_seq, -1, x.shape[1]))["beta"]
    return out


def _fmt_samples(v: list[float]) -> str:
    done = [x for x in v if x != float("inf")]
    if not done:
        return "not reached"
    tail = "" if len(done) == len(v) else f" ({len(v) - len(done)} of {len(v)} not reached)"
    return f"{sum(done) / len(done):,.0f}{tail}"


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__,
        seeds=2,
        samples=200_000,
        quick="1 seed, 8,192 samples, β in {0, 2}, no LM run",
        no_lm="skip the SmolLM2 run",
        lm_samples=1,
        lm_only=True,
        model=("smollm2-135m", STORE_MODEL_HELP),
    )
    a = parse(ap, argv)
    lm_key = "smollm2" if a.model == "smollm2-135m" else a.model
    if a.lm_only:
        return {lm_key: lm_part(a.lm_samples, a.model)}
    seeds, samples, betas = (1, 8192, (0.0, 2.0)) if a.quick else (a.seeds, a.samples, (0.0, 1.0, 2.0))
    res = run(seeds, samples, betas)
    keys = list(next(iter(res.values())))
    print(
        f"online SGD, N={N}, width {WIDTH}, {samples:,} samples (mean over {seeds} seeds; 'samples' = first "
        "evaluation >= 0.75)"
    )
    print(
        markdown_table(
            ["β", *keys],
            [[b, *(_fmt_samples(r[k]) if "samples" in k else fmt(r[k]) for k in keys)] for b, r in res.items()],
        )
    )
    out = {"signals": res}
    if not (a.quick or a.no_lm):
        out[lm_key] = lm_part(a.lm_samples, a.model)
    return json.loads(json.dumps(out, default=str))


def lm_part(n: int, model_name: str = "smollm2-135m") -> dict[str, list[float]]:
    """`lm_spectra` on data samples 0 .. n-1, printed as one table (mean ± sd when n > 1)."""
    from interp.contrib.lm_features import load_lm

    loaded = load_lm(model_name)
    lm = stack_runs([lm_spectra(s, loaded, model_name) for s in range(n)])
    print(
        f"\n{model_name} residual stream: power-law exponent β of the spectrum along token positions"
        + (f" (mean ± sd over {n} data samples)" if n > 1 else "")
    )
    print(markdown_table(["layer", "β", "per sample"], [[k, fmt(v, 2), per_sample(v, 2)] for k, v in lm.items()]))
    return lm


if __name__ == "__main__":
    with model_refusals():
        main()
