"""FuseFSS demo: fixed-point specs for SiLU, GELU, exp and rsqrt calibrated on SmolLM2's cached
activations; the two-party protocol checked against plaintext; FSS calls fused vs per-operator.

    python -m interp.contrib.security.experiments.fuse_fss [--quick] [--elements 200] [--tol 1e-3]

Ranges come from `smollm2-135m`'s own activations (`HookedModel.run_with_cache` over a few Python
standard-library docstrings, position 0 dropped): SiLU's input is `blocks.{l}.mlp.hook_pre` (the gate
projection), exp's is the softmax input after max subtraction, recovered exactly from
`blocks.{l}.attn.hook_pattern` as log(p / max p) (floored at -16 ln 2, where exp underflows Q16),
rsqrt's is RMSNorm's mean(h²) + eps of `blocks.{l}.hook_resid_pre`, one spec per layer (its range
spans five decades across depth, more than one 16-bit format holds). SmolLM2 has no GELU: GELU gets
SiLU's range. For each operator: the 16-bit input format from the range, then the fewest pieces
(degree 2) whose end-to-end error on the cached values is at most --tol; then `--elements` cached
values run through the fused protocol (and the first 10 through the per-operator baseline,
whose table keys are K times larger). --quick: fixed ranges, no model.
"""

from __future__ import annotations

import json
import math

import numpy as np

from interp.contrib.experiment import experiment_parser
from interp.contrib.report import markdown_table
from interp.contrib.security.fuse_fss import (
    FixedPoint,
    baseline_eval,
    exp,
    fit_spec,
    fused_eval,
    gelu,
    plain_fixed_eval,
    rsqrt,
    share,
    silu,
)

LAYERS = (0, 10, 20, 29)
OPS = {"silu": silu, "gelu": gelu, "exp": exp, "rsqrt": rsqrt}


def cached_inputs(n_docs: int = 6) -> dict[str, np.ndarray]:
    """Inputs of each nonlinearity as SmolLM2 computes them on stdlib docstrings; kept (numpy, no pickle)
    under the contrib cache folder after the first run."""
    from interp.contrib.lm_features import contrib_cache_root

    path = contrib_cache_root() / f"fuse_fss_inputs_v2_{n_docs}docs.npz"
    if path.is_file():
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    res = _compute_inputs(n_docs)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **res)
    return res


def _compute_inputs(n_docs: int) -> dict[str, np.ndarray]:
    import importlib

    import torch

    import interp

    torch.set_num_threads(1)
    model = interp.load_model("smollm2-135m")
    texts = []
    for name in ("json", "csv", "argparse", "pathlib", "textwrap", "heapq", "bisect", "random"):
        doc = importlib.import_module(name).__doc__ or ""
        if len(doc) > 200:
            texts.append(doc[:600])
    names = (
        [f"blocks.{l}.mlp.hook_pre" for l in LAYERS]
        + [f"blocks.{l}.attn.hook_pattern" for l in LAYERS]
        + [f"blocks.{l}.hook_resid_pre" for l in LAYERS]
    )
    out = {"silu": [], "exp": [], **{f"rsqrt_L{l}": [] for l in LAYERS}}
    eps = float(getattr(model.hf_model.config, "rms_norm_eps", 1e-5))
    for text in texts[:n_docs]:
        _, cache = model.run_with_cache(text, names=names, return_logits=False, truncate=True)
        for l in LAYERS:
            out["silu"].append(cache[f"blocks.{l}.mlp.hook_pre"][0, 1:].flatten().numpy())
            p = cache[f"blocks.{l}.attn.hook_pattern"][0, :, 1:].double()  # [heads, q, k], q >= 1
            logp = torch.log(p.clamp_min(1e-300)) - torch.log(p.amax(-1, keepdim=True))
            keep = torch.tril(torch.ones(p.shape[-2], p.shape[-1], dtype=torch.bool), diagonal=1).expand_as(p)
            out["exp"].append(logp[keep].clamp_min(-16 * math.log(2)).numpy())
            h = cache[f"blocks.{l}.hook_resid_pre"][0, 1:].double()
            out[f"rsqrt_L{l}"].append(((h**2).mean(-1) + eps).numpy())
    res = {k: np.concatenate(v).astype(float) for k, v in out.items()}
    res["gelu"] = res["silu"]
    return res


def synthetic_inputs(rng) -> dict[str, np.ndarray]:
    return {
        "silu": rng.uniform(-8, 8, 4000),
        "gelu": rng.uniform(-8, 8, 4000),
        "exp": rng.uniform(-11, 0, 4000),
        "rsqrt_all": rng.uniform(0.25, 64, 4000),
    }


def calibrate(name: str, x: np.ndarray, tol: float, max_pieces: int = 256):
    """The input format from the cached range, then the fewest pieces (doubling) within `tol`."""
    fn = OPS[name.split("_")[0]]
    lo, hi = float(x.min()), float(x.max())
    fp = FixedPoint.from_range(lo, hi)
    spacing = "log" if name.startswith("rsqrt") else "linear"
    sample = x[np.random.default_rng(0).choice(len(x), min(len(x), 20000), replace=False)]
    pieces = 4
    while True:
        spec = fit_spec(fn, lo, hi, pieces, 2, fp, spacing=spacing)
        err = float(np.abs(fp.decode(plain_fixed_eval(spec, fp.encode(sample))) - fn(sample)).max())
        if err <= tol or pieces >= max_pieces:
            return spec, err, (lo, hi)
        pieces *= 2


def main(argv=None) -> dict:
    ap = experiment_parser(__doc__, seeds=None, quick="synthetic ranges, 20 elements, no model")
    ap.add_argument("--elements", type=int, default=200)
    ap.add_argument("--tol", type=float, default=1e-3)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    inputs = synthetic_inputs(rng) if a.quick else cached_inputs()
    n = 20 if a.quick else a.elements
    rows, out = [], {}
    for name in inputs:
        x = inputs[name]
        spec, err, (lo, hi) = calibrate(name, x, a.tol, 32 if a.quick else 256)
        xs = x[rng.choice(len(x), n, replace=False)]
        enc = spec.fp.encode(xs)
        x0, x1 = share(enc, rng)
        (y0, y1), _, fused = fused_eval(spec, x0, x1, rng)
        nb = min(n, 10)  # the baseline deals one 2^16-row table per breakpoint: keep it to 10 values
        (b0, b1), base = baseline_eval(spec, x0[:nb], x1[:nb], rng)
        plain = plain_fixed_eval(spec, enc).view(np.int64)
        ulp_f = int(np.abs((y0 + y1).view(np.int64) - plain).max())
        ulp_b = int(np.abs((b0 + b1).view(np.int64) - plain[:nb]).max())
        e2e = float(np.abs(spec.fp.decode(y0 + y1) - OPS[name.split("_")[0]](xs)).max())
        out[name] = {
            "range": [lo, hi],
            "frac": spec.fp.frac,
            "pieces": spec.coeffs.shape[0],
            "fit_error": spec.max_error,
            "fixed_error_on_cache": err,
            "protocol_error": e2e,
            "ulps_fused": ulp_f,
            "ulps_baseline": ulp_b,
            "calls_fused": fused.fss_calls,
            "calls_baseline": base.fss_calls,
            "key_words_fused": fused.key_words,
            "key_words_baseline": base.key_words,
            "triples": fused.triples,
        }
        rows.append(
            [
                name,
                f"[{lo:.3g}, {hi:.3g}]",
                f"Q{spec.fp.bits - 1 - spec.fp.frac}.{spec.fp.frac}",
                spec.coeffs.shape[0],
                f"{err:.2e}",
                f"{e2e:.2e}",
                f"{ulp_f} / {ulp_b}",
                f"{fused.fss_calls} / {base.fss_calls}",
                f"{fused.key_words:,} / {base.key_words:,}",
            ]
        )
    src = "synthetic ranges" if a.quick else "smollm2-135m cached activations"
    print(f"FuseFSS specs (degree 2, tol {a.tol}) from {src}; {n} values through the two-party protocol")
    print(
        markdown_table(
            [
                "op",
                "range",
                "input format",
                "pieces",
                "max err (fixed, all cached)",
                "max err (protocol)",
                "ulps vs plaintext fused / baseline",
                "FSS calls fused / baseline",
                "key words fused / baseline",
            ],
            rows,
        )
    )
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    main()
