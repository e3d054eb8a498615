"""Every decoder-only family with an adapter: its parity certificate, TransformerLens 3's bridge on the same
weights, and the cost of caching, side by side in one run; prints JSON (and a Markdown table with --markdown).

    .venv/bin/python benchmarks/bench_families.py               # all families (several minutes on 2 cores)
    .venv/bin/python benchmarks/bench_families.py --quick       # fewer timing repeats
    .venv/bin/python benchmarks/bench_families.py --markdown    # the README's table

Per family, a tiny random model built from `transformers`' own config class (tests/tiny.py: 2 layers, d 64):
- `logits`, `resid`, `block_sum`: our parity certificate against the bare HF model (`interp.wrapper.parity`).
- `bridge`: `TransformerBridge.boot_transformers` on a twin of the same module tree; every hook name both expose
  is compared (max |difference|; masked attention scores, which TL writes as -inf or the dtype's minimum, are
  left out; a tensor TL keeps with batch and position flattened is compared unflattened). `bridge_differs`
  names the hooks whose meanings differ (e.g. BLOOM's `hook_embed`), `bridge_error` the bridge's own refusal.
- `cache_over_bare` (`_min`): median (fastest) seconds of `run_with_cache` of every `hook_resid_post` (logits
  too) over those of the bare HF forward of the same batch, on a larger model of the family (4 layers, d 256,
  batch 4 x 128 tokens), interleaved so machine noise hits both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import interp  # noqa: E402
from interp.data import byte_tokenizer  # noqa: E402
from interp.views.bridge import compare_with_bridge  # noqa: E402
from interp.wrapper.parity import parity_certificate  # noqa: E402
from tests.tiny import FAMILIES, tiny_family  # noqa: E402

# Where TL's bridge refuses the quirk tests/tiny.py switches on, the bridge is compared again without it.
WITHOUT_QUIRK = {"cohere": {"use_qk_norm": False}}


def timing(family: str, reps: int) -> dict:
    big = dict(hidden_size=256, num_hidden_layers=4, intermediate_size=1024, max_position_embeddings=256)
    sizes = {"gpt2": dict(n_embd=256, n_layer=4, n_positions=256), "gptj": dict(n_embd=256, n_layer=4, n_positions=256)}
    sizes["bloom"] = dict(hidden_size=256, n_layer=4)
    sizes["opt"] = dict(hidden_size=256, num_hidden_layers=4, ffn_dim=1024, word_embed_proj_dim=256)
    sizes["falcon"] = dict(hidden_size=256, num_hidden_layers=4, max_position_embeddings=256)
    sizes["gemma3_text"] = {**big, "layer_types": ["sliding_attention", "full_attention"] * 2}
    hf = tiny_family(family, **sizes.get(family, big))
    model = interp.HookedModel(hf, byte_tokenizer())
    x = torch.randint(3, 256, (4, 128), generator=torch.Generator().manual_seed(0))
    cases = {
        "bare": lambda: hf(x),
        "cache": lambda: model.run_with_cache(x, names="blocks.*.hook_resid_post"),
    }
    samples: dict[str, list[float]] = {k: [] for k in cases}
    with torch.no_grad():
        for fn in cases.values():
            fn()
        for _ in range(reps):
            for k, fn in cases.items():
                t0 = time.perf_counter()
                fn()
                samples[k].append(time.perf_counter() - t0)
    median = statistics.median(samples["cache"]) / statistics.median(samples["bare"])
    return {
        "cache_over_bare": round(median, 3),
        "cache_over_bare_min": round(min(samples["cache"]) / min(samples["bare"]), 3),
    }


def one(family: str, reps: int) -> dict:
    model = interp.HookedModel(tiny_family(family), byte_tokenizer(), {"spec": f"tiny-{family}"})
    tokens = torch.randint(3, 256, (2, 12), generator=torch.Generator().manual_seed(0))
    cert = parity_certificate(model, tokens)
    resid = [v for v in cert["hooks"].values() if v is not None]
    row = {
        "family": family,
        "adapter": cert["adapter"],
        "hook_points": len(model.points),
        "logits": cert["logits_max_abs_diff"],
        "resid": max(resid),
        "block_sum": cert["block_sum_max_abs_diff"],
        **compare_with_bridge(model, tokens),
    }
    row.pop("bridge_diffs", None)  # the worst hook is kept; tests/interp/test_families.py checks every one
    if "bridge_error" in row and family in WITHOUT_QUIRK:
        plain = interp.HookedModel(tiny_family(family, **WITHOUT_QUIRK[family]), byte_tokenizer(), {"spec": family})
        row["bridge_without_quirk"] = {"overrides": WITHOUT_QUIRK[family], **compare_with_bridge(plain, tokens)}
        row["bridge_without_quirk"].pop("bridge_diffs", None)
    row.update(timing(family, reps))
    return row


def markdown(rows: list[dict]) -> str:
    out = [
        "| family | adapter | hook points | logits vs HF | residuals vs HF | block sums "
        "| TL bridge: hooks compared, max diff | cache / bare (median, min) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "bridge_error" in r:
            bridge = f"bridge refuses: {r['bridge_error'][:90]}"
            if "bridge_without_quirk" in r:
                w = r["bridge_without_quirk"]
                bridge += (
                    f"; without {w['overrides']}: {w.get('bridge_hooks_compared')}, {w.get('bridge_max_abs_diff'):.1e}"
                )
                if w.get("bridge_max_abs_diff", 0) > 1e-4:
                    bridge += f" at `{w['bridge_worst_hook']}`"
        else:
            bridge = f"{r['bridge_hooks_compared']}, {r['bridge_max_abs_diff']:.1e}"
            if r["bridge_max_abs_diff"] > 1e-4:
                bridge += f" at `{r['bridge_worst_hook']}`"
            if r["bridge_differs"]:
                bridge += " (" + "; ".join(f"`{k}`: {v}" for k, v in r["bridge_differs"].items()) + ")"
        out.append(
            f"| {r['family']} | `{r['adapter'].split('/')[-1]}` | {r['hook_points']} | {r['logits']:.1e} | "
            f"{r['resid']:.1e} | {r['block_sum']:.1e} | {bridge} | "
            f"{r['cache_over_bare']:.3f}, {r['cache_over_bare_min']:.3f} |"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 timing repeats instead of 15")
    parser.add_argument("--markdown", action="store_true", help="print the README's table after the JSON")
    parser.add_argument("--families", nargs="*", default=FAMILIES)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from importlib.metadata import version

    rows = [one(f, 3 if args.quick else 15) for f in args.families]
    result = {
        "transformers": version("transformers"),
        "transformer_lens": version("transformer-lens"),
        "torch": torch.__version__,
        "families": rows,
        "max_cache_over_bare": max(r["cache_over_bare"] for r in rows),
        "max_cache_over_bare_min": max(r["cache_over_bare_min"] for r in rows),
    }
    print(json.dumps(result, indent=1))
    if args.markdown:
        print(markdown(rows))


if __name__ == "__main__":
    main()
