"""Which training rows make an SAE latent fire? SmolLM2-135M, the demo's SAE, a sketched gradient store.

    make demo                                                        # writes runs/demo/sae/c2r (layer 15)
    python -m attribution.experiments.latent_sources --sae runs/demo/sae/c2r --out runs/attr/latent_sources

1. A gradient store (`attribution.gradstore`, TensorSketch) of `--n-train` stdlib-docs sequences, over the
   attention and MLP Linears of the layers just below the SAE's hook (`--modules`).
2. The latent: the SAE latent most active on the last token of the prompt (or `--latent`).
3. `GradientIndex.query_measurement(sae_latent(...))`: training rows ranked by how much one gradient step on
   them would raise that latent on the prompt (positive) or lower it (negative).
4. The check: one small SGD step on the top-ranked and on the bottom-ranked row (the loss of that row only,
   the stored modules only), and the latent's change on the prompt after each.

Prints JSON: the latent, the top and bottom rows as text with their scores, and the check's two changes.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import torch

PROMPT = "import logging\nlogger = logging.getLogger(__name__)\nlogger.warning("


def load_sae_lens(folder: str):
    """The SAE folder through sae-lens itself (attribution does not import the `sae` family): inference folders of
    the standard, TopK, JumpReLU and BatchTopK kinds, which is what `interp sae train` ships."""
    from sae_lens import SAE

    try:
        return SAE.load_from_disk(folder).eval()
    except Exception as exc:  # an architecture only `import sae` registers, a damaged folder: say which
        raise SystemExit(f"--sae {folder}: sae-lens cannot load it ({type(exc).__name__}: {exc})") from None


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sae", required=True, help="an SAE folder on SmolLM2 (the demo's: runs/demo/sae/c2r)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--n-train", type=int, default=128)
    ap.add_argument("--ctx-len", type=int, default=48)
    ap.add_argument("--modules", default=None, help="globs (default: the Linears of the 2 layers below the hook)")
    ap.add_argument("--latent", type=int, default=None)
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--step", type=float, default=1e-3, help="SGD step size of the check")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    from attribution.capture import per_example_lm_loss
    from attribution.gradstore import BuildConfig, build_store
    from attribution.measurements import sae_latent
    from attribution.resident import GradientIndex

    sae = load_sae_lens(a.sae)
    hook = sae.cfg.metadata.hook_name
    layer = int(hook.split(".")[1])
    modules = a.modules.split(",") if a.modules else [f"*layers.{layer - 1}.*", f"*layers.{layer}.*"]
    out = Path(a.out)
    build_store(
        BuildConfig(model=a.model, train="stdlib-docs", out=str(out / "store"), modules=modules, projection="sketch",
                    dim=1024, ctx_len=a.ctx_len, max_train=a.n_train, shard_size=32, batch_size=8, device="cpu"),
        progress=False,
    )  # fmt: skip
    index = GradientIndex(str(out / "store"), top=a.n_train, device="cpu")
    model = index.model
    prompt = model.to_tokens(a.prompt)
    with torch.no_grad():
        _, cache = model.run_with_cache(prompt, names=[hook])
        acts = sae.encode(cache[hook][0, -1].float())
    latent = int(acts.argmax()) if a.latent is None else a.latent
    measure = sae_latent(model, sae, latent)
    res = index.query_measurement(measure, prompt)
    rows, scores = res["rows"][0], res["scores"][0]
    from attribution.jobs import load_tokens

    tokens, _ = load_tokens("stdlib-docs", model.tokenizer, a.ctx_len, a.n_train, 0, model, "--train")  # as built

    def text(row: int) -> str:
        return model.tokenizer.decode(tokens[row]).replace("\n", " ")[:100]

    hf = model.hf_model
    names = {p["name"] for p in index.store.meta.data["parameters"]}  # exactly the parameters the store covers
    stored = [p for n, p in hf.named_parameters() if n in names]
    if len(stored) != len(names):
        raise RuntimeError(f"the store's parameters {sorted(names)[:3]}... are not all named in the model")

    def change_after_step_on(row: int) -> float:
        saved = copy.deepcopy(hf.state_dict())
        try:
            ones = torch.ones_like(prompt)
            with torch.no_grad():
                before = float(measure(hf, prompt, ones)[0])
            ids = tokens[row : row + 1]
            loss = per_example_lm_loss(hf, ids, torch.ones_like(ids)).sum()
            grads = torch.autograd.grad(loss, stored)
            with torch.no_grad():
                for p, g in zip(stored, grads):
                    p -= a.step * g
                return float(measure(hf, prompt, ones)[0]) - before
        finally:
            hf.load_state_dict(saved)

    top, bottom = int(rows[0]), int(rows[-1])
    result = {
        "model": a.model,
        "sae": a.sae,
        "hook": hook,
        "modules": modules,
        "n_train": len(index.store),
        "prompt": a.prompt,
        "latent": latent,
        "latent_activation": round(float(acts[latent]), 4),
        "query_seconds": res["seconds"],
        "top": [{"row": int(r), "score": float(s), "text": text(int(r))} for r, s in zip(rows[: a.top], scores)],
        "bottom": [
            {"row": int(r), "score": float(s), "text": text(int(r))}
            for r, s in zip(rows[-a.top :].tolist(), scores[-a.top :].tolist())
        ],
        "check": {
            "step": a.step,
            "change_top_row": change_after_step_on(top),
            "change_bottom_row": change_after_step_on(bottom),
        },  # fmt: skip
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "latent_sources.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
