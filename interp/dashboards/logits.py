"""Direct logit effects of feature directions, with the unembedding read from the weights file alone.

The effect of direction d on the logits is `W_U (g ⊙ d)`, g the final norm's weight (the norm's
per-token scale is ignored, as SAEDashboard and Neuronpedia do). `load_unembedding(spec)` reads only
`W_U` and `g` from the model's safetensors (about 0.1 s for SmolLM2 instead of loading the model); a
model with no such folder falls back to loading it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

_NORMS = (
    "model.norm.weight",
    "gpt_neox.final_layer_norm.weight",
    "transformer.ln_f.weight",
    "model.final_layernorm.weight",
)
_UNEMBED = ("lm_head.weight", "embed_out.weight")
_EMBED = ("model.embed_tokens.weight", "gpt_neox.embed_in.weight", "transformer.wte.weight")


def _read(folder: Path, names: tuple[str, ...]) -> Tensor | None:
    from safetensors import safe_open

    files = sorted(folder.glob("*.safetensors"))
    for f in files:
        with safe_open(str(f), framework="pt") as h:
            keys = set(h.keys())
            for n in names:
                if n in keys:
                    return h.get_tensor(n).float()
    return None


def load_unembedding(spec: str) -> tuple[Tensor, Tensor | None]:
    """(W_U [vocab, d_model], final-norm scale g [d_model] or None) of a model spec."""
    from interp.dashboards.tokens import model_folder

    folder = model_folder(spec)
    if folder is not None:
        cfg = json.loads((folder / "config.json").read_text()) if (folder / "config.json").exists() else {}
        W = _read(folder, _UNEMBED)
        if W is None and cfg.get("tie_word_embeddings", True):
            W = _read(folder, _EMBED)
        if W is not None:
            g = _read(folder, _NORMS)
            if g is not None and str(cfg.get("model_type", "")).startswith("gemma"):
                g = 1.0 + g  # Gemma's RMSNorm scales by (1 + weight)
            return W, g
    return _from_model(spec)


def _from_model(spec: str) -> tuple[Tensor, Tensor | None]:
    import interp

    hf = interp.load_model(spec).hf_model
    W = hf.get_output_embeddings().weight.detach().float()
    g = None
    for name, mod in hf.named_modules():
        if (
            name.count(".") <= 1
            and name.split(".")[-1] in ("norm", "final_layer_norm", "ln_f")
            and hasattr(mod, "weight")
        ):
            g = mod.weight.detach().float()
            if "gemma" in type(mod).__name__.lower():
                g = 1.0 + g
    return W, g


@torch.no_grad()
def logit_effects(
    directions: Tensor,
    W_U: Tensor,
    g: Tensor | None,
    features: list[int],
    k: int = 10,
    bins: int = 40,
    batch: int = 256,
) -> dict[int, dict[str, Any]]:
    """For each feature: top-k promoted and suppressed token ids with their effect, and a histogram of
    the effect over the whole vocabulary (`edges` [bins+1], `counts` [bins])."""
    if directions.shape[1] != W_U.shape[1]:
        raise ValueError(f"directions have d={directions.shape[1]} but the unembedding has d={W_U.shape[1]}")
    out: dict[int, dict[str, Any]] = {}
    scale = g if g is not None else torch.ones(W_U.shape[1])
    for i in range(0, len(features), batch):
        fs = features[i : i + batch]
        eff = (directions[fs].float() * scale) @ W_U.T  # [b, vocab]
        top, bot = eff.topk(k, dim=1), (-eff).topk(k, dim=1)
        lo, hi = eff.min(1).values, eff.max(1).values
        for j, f in enumerate(fs):
            counts = torch.histc(eff[j], bins=bins, min=float(lo[j]), max=float(hi[j]))
            out[f] = {
                "top": [(int(t), float(v)) for t, v in zip(top.indices[j], top.values[j])],
                "bottom": [(int(t), float(-v)) for t, v in zip(bot.indices[j], bot.values[j])],
                "edges": torch.linspace(float(lo[j]), float(hi[j]), bins + 1).tolist(),
                "counts": counts.long().tolist(),
            }
    return out
