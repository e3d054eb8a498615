"""SAE folders as every family reads them: checked at the door, before sae-lens builds anything.

An SAE folder (sae-lens's layout, written by `interp sae train` or by sae-lens) is `cfg.json` plus
`sae_weights.safetensors`. The `sae` family loads it with its own classes (`sae.load_sae`) and `circuits`
with plain sae-lens (`circuits.model.dictionary.load_dictionary`: families do not import each other), so
the checks both need live here, in the core, and neither loader repeats them:

- `check_sae_folder`: the config is an object with sizes and an architecture that make sense, and the
  weights file is a readable safetensors file (not a pickle under that name, not a header claiming
  tensors the file does not hold, not a symlink to some system file) whose shapes match the config;
- `check_finite_weights`: the loaded weights hold no NaN or inf (an SAE of NaN weights scores NaN
  everywhere, and every number computed from it would be NaN);
- `check_trained_model`: a `--model` other than the one the SAE's cfg records is refused before it loads;
- `check_compatible`: the SAE can run on a loaded model at its hook (hook point, width, normalisation),
  naming the model its cfg records as the fix.

Each problem is one ValueError (or FileNotFoundError) naming the file and the fix.

    >>> cfg = check_sae_folder("runs/sae/topk", known_architectures={"topk", "standard"})
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

WEIGHTS = "sae_weights.safetensors"
"""The weights file of an SAE folder (sae-lens's name)."""

RUNTIME_NORMALISATIONS = ("none", None, "layer_norm", "constant_norm_rescale")
"""Input normalisations the SAE applies itself at run time (nothing for the caller to supply)."""


def check_sae_folder(path: str | Path, known_architectures: Iterable[str]) -> dict[str, Any]:
    """The checked `cfg.json` of the SAE folder `path` (with "architecture" filled in); a ValueError naming the
    file for anything a loader would trip on: not an object, non-positive or non-integer sizes, an architecture
    not in `known_architectures`, a bad `k`, weights that are not a readable safetensors file or whose shapes
    do not match the config. Only headers are read: nothing is unpickled or loaded."""
    from interp.infra.json_file import read_json
    from interp.infra.tensor_file import tensor_shapes

    path = Path(path)
    cfg_file = path / "cfg.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{path} is not an SAE checkpoint: no cfg.json (train one with `interp sae train`)")
    cfg = read_json(cfg_file, what="SAE config")
    for name in ("d_in", "d_sae"):
        v = cfg.get(name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{cfg_file}: {name} must be a positive integer, got {v!r}")
    arch = cfg.get("architecture", "standard")
    known = sorted(set(known_architectures))
    if not isinstance(arch, str) or arch not in known:
        raise ValueError(f"{cfg_file}: unknown SAE architecture {arch!r}; known: {', '.join(known)}")
    if "k" in cfg and (
        isinstance(cfg["k"], bool)
        or not isinstance(cfg["k"], (int, float))
        or not cfg["k"] > 0
        or cfg["k"] > cfg["d_sae"]
    ):
        raise ValueError(f"{cfg_file}: k must be a positive number of at most d_sae ({cfg['d_sae']}), got {cfg['k']!r}")
    if not isinstance(cfg.get("metadata", {}), dict):
        raise ValueError(f"{cfg_file}: metadata must be an object, got {type(cfg['metadata']).__name__}")
    # the header alone: a pickle, random bytes, a system file behind a symlink or a header claiming tensors
    # the file does not hold all end here as one line naming the file
    shapes = tensor_shapes(path / WEIGHTS, what="SAE weights")
    want = {"W_enc": [cfg["d_in"], cfg["d_sae"]], "W_dec": [cfg["d_sae"], cfg["d_in"]]}
    for k, shape in want.items():
        if k in shapes and shapes[k] != shape:
            raise ValueError(
                f"{path / WEIGHTS}: {k} has shape {shapes[k]} but {cfg_file} says {shape} "
                "(d_in, d_sae): the weights and the config do not belong together"
            )
    return {**cfg, "architecture": arch}


def check_finite_weights(tensors: Mapping[str, Any], path: str | Path) -> None:
    """Refuse an SAE whose weights (`name -> tensor`, e.g. its `state_dict()`) hold NaN or inf."""
    import torch

    for name, t in tensors.items():
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            bad = int((~torch.isfinite(t)).sum())
            if bad:
                raise ValueError(
                    f"{Path(path) / WEIGHTS}: {name} holds {bad} NaN or inf values of {t.numel()}: its training "
                    "diverged or the file is damaged; retrain the SAE or use an earlier checkpoint"
                )


def hook_width(model: Any, hook: str) -> int | None:
    """d of the rows an `interp` model's hook yields (None when unknown)."""
    if "resid" in hook or hook.endswith(("hook_mlp_out", "hook_attn_out")):
        return getattr(model, "d_model", None)
    return None


def check_trained_model(sae: Any, spec: str, option: str = "--model", alternative: str = "") -> None:
    """Refuse `spec` when the SAE's cfg records another model (`metadata.model_name`): checked before the model
    is loaded. `alternative` is appended to the fix (e.g. " (or --allow-other-hook ...)")."""
    recorded = getattr(sae.cfg.metadata, "model_name", None)
    if recorded and spec and spec != recorded:
        raise ValueError(
            f"the SAE was trained on {recorded!r} (its cfg.json), not {option} {spec!r}: pass {option} {recorded}"
            f"{alternative}"
        )


def check_compatible(sae: Any, model: Any, hook: str | None = None, allow_other_hook: bool = False) -> str:
    """The hook the SAE reads (`hook`, default the one its cfg records); raises ValueError when it cannot run
    on `model` at that hook. The SAE's cfg records the model it was trained on (`metadata.model_name`): a
    mismatch names that model as the fix. `allow_other_hook`: another hook than the recorded one is a
    deliberate transfer study, checked for its width only."""
    meta = sae.cfg.metadata
    name = hook or getattr(meta, "hook_name", None)
    if not name:
        raise ValueError(
            "the SAE records no hook_name: pass hook='blocks.N.hook_resid_post' (the hook it was trained on)"
        )
    recorded = getattr(meta, "hook_name", None)
    if hook and recorded and hook != recorded and not allow_other_hook:
        raise ValueError(
            f"the SAE was trained on {recorded!r}, not {hook!r}: use hook={recorded!r} or the matching SAE"
        )
    trained_on = getattr(meta, "model_name", None)
    fix = f"run it on {trained_on!r}, the model its cfg.json records" if trained_on else "use the SAE of this model"
    here = getattr(model, "name", "the model")
    names = model.hook_names() if hasattr(model, "hook_names") else None
    if names is not None and name not in names:
        near = [n for n in names if n.split(".")[-1] == name.split(".")[-1]][:3]
        raise ValueError(
            f"hook {name!r} is not a hook point of {here}{f' (e.g. {near})' if near else ''}: the SAE belongs to "
            f"another model or naming scheme; {fix}"
        )
    width = hook_width(model, name)
    if width is not None and width != sae.cfg.d_in:
        raise ValueError(f"the SAE has d_in {sae.cfg.d_in} but {name} of {here} has width {width}: {fix}")
    norm = getattr(sae.cfg, "normalize_activations", "none")
    if norm not in RUNTIME_NORMALISATIONS:
        raise ValueError(
            f"the SAE expects inputs scaled by a dataset-norm factor (normalize_activations={norm!r}) "
            "that is not folded in: call sae.fold_activation_norm_scaling_factor(factor) with the factor "
            "of its training data first"
        )
    return name
