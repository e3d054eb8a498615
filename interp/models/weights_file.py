"""Build an HF model from a `config.json` and one weights file, the way `from_pretrained` would.

Why not `model.load_state_dict(load_file(path))`: transformers renames checkpoint keys when it loads
(GPT-NeoX's `save_pretrained` writes `embed_out.weight`, the module calls it `lm_head.weight`; other
families have their own renames), so a plain `load_state_dict` refuses checkpoints that transformers
itself wrote. Here the file is linked as `model.safetensors` beside a copy of the config in a temporary
folder and loaded with `from_pretrained(use_safetensors=True)`, which applies those renames; the
loading report is then checked, so a checkpoint that does not match its config is an error naming
the keys instead of a model with silently random weights.

    >>> hf = hf_model_from_weights(Path("runs/train/config.json"), Path("runs/train/step_500.safetensors"))
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch


class WeightsFileError(ValueError):
    """A weights file that does not fit its config (names the file and the keys)."""


def hf_model_from_weights(config_json: Path, weights: Path, dtype: torch.dtype = torch.float32) -> Any:
    """An eval-mode HF causal LM (eager attention) with the weights of `weights` (a .safetensors file)."""
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM

    tmp = Path(tempfile.mkdtemp(prefix="interp-weights-"))
    try:
        shutil.copy(config_json, tmp / "config.json")
        os.symlink(Path(weights).resolve(), tmp / "model.safetensors")
        try:
            hf, info = AutoModelForCausalLM.from_pretrained(
                tmp, dtype=dtype, attn_implementation="eager", use_safetensors=True, output_loading_info=True
            )
        except (SafetensorError, OSError, RuntimeError, ValueError) as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            raise WeightsFileError(f"cannot load {weights} with {config_json} ({first})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    tied = set()
    if getattr(hf.config, "tie_word_embeddings", False):
        tied = {k for k in info["missing_keys"] if "lm_head" in k or "embed_out" in k}
    missing = sorted(set(info["missing_keys"]) - tied)
    unexpected = sorted(info["unexpected_keys"])
    mismatched = sorted(str(m[0]) if isinstance(m, (tuple, list)) else str(m) for m in info.get("mismatched_keys", []))
    if missing or unexpected or mismatched:
        raise WeightsFileError(
            f"{weights} does not match {config_json}: missing {missing[:5]}, unexpected {unexpected[:5]}, "
            f"wrong shape {mismatched[:5]}; give the config.json of the model that wrote these weights"
        )
    return hf.eval()
