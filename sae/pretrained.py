"""Pretrained SAEs: sae-lens folders and (cached) sae-lens releases, checked against the model they hook.

    >>> s = sae.from_pretrained("runs/saeeval/saes/c2r_s0", model=model)         # a folder (ours or sae-lens)
    >>> s = sae.from_pretrained("gemma-scope-2-270m-pt-res", "layer_9/width_16k/l0_small", model=gemma)

A folder loads through `load_sae` (inference classes: BatchTopK family as JumpReLU). A release name goes to
sae-lens's `SAE.from_pretrained`, which this machine can only satisfy from the local Hugging Face cache
(offline): a release that is not cached is a clear error, not a download attempt. sae-lens folds a
release's dataset-norm scaling factor into the weights when it publishes one.

With `model=`, `check_compatible` refuses an SAE whose hook is not one of the model's hook points, whose
d_in is not the width of that hook, or whose input normalisation needs a dataset-norm scaling factor that
was not folded in (`normalize_activations="expected_average_only_in"` still set): each is a ValueError
naming the mismatch and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# the checks every family shares (circuits reads SAE folders too) live in the core
from interp.infra.sae_folder import RUNTIME_NORMALISATIONS, check_compatible  # noqa: F401  (re-exported)


def from_pretrained(
    path_or_release: str | Path,
    sae_id: str | None = None,
    model: Any = None,
    hook: str | None = None,
    device: str = "cpu",
) -> Any:
    """An inference SAE from a folder or a locally cached sae-lens release, checked against `model` if given."""
    from sae.baselines import load_sae

    p = Path(path_or_release)
    if p.is_dir():
        if sae_id is not None and (p / sae_id / "cfg.json").is_file():
            p = p / sae_id
        s = load_sae(p, device=device)
    elif p.suffix or os.sep in str(path_or_release):
        raise FileNotFoundError(f"{path_or_release} is not an SAE folder (cfg.json + sae_weights.safetensors)")
    else:
        if sae_id is None:
            raise ValueError(f"{path_or_release!r} is not a folder; for a sae-lens release pass sae_id=... as well")
        s = _from_release(str(path_or_release), sae_id, device)
    if model is not None:
        check_compatible(s, model, hook)
    return s


def _from_release(release: str, sae_id: str, device: str) -> Any:
    from sae_lens import SAE

    old = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"  # never download: the cache or a clear error
    try:
        return SAE.from_pretrained(release, sae_id, device=device)
    except Exception as e:  # noqa: BLE001 - sae-lens raises many types for "not there"
        raise FileNotFoundError(
            f"sae-lens release {release!r} / {sae_id!r} is not available offline ({type(e).__name__}: {str(e)[:200]}); "
            "copy its folder (cfg.json + sae_weights.safetensors) here and pass the folder instead"
        ) from None
    finally:
        if old is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old
