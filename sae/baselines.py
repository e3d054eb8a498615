"""The baselines (sae-lens's own ReLU-L1, TopK and BatchTopK SAEs) and the one table of names the
toolkit accepts, with `make_sae` to build any of them and `load_sae` to read a checkpoint back.

    >>> sae = make_sae("batchtopk", d_in=64, d_sae=256, k=4)
    >>> sae = make_sae("poly", d_in=64, d_sae=256, k=4, rank2=8, rank3=8)
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from sae_lens import SAE
from sae_lens.registry import SAE_TRAINING_CLASS_REGISTRY
from sae_lens.saes.sae import TrainingSAE

import sae.c2r  # noqa: F401  (registers c2r*)
import sae.coherence  # noqa: F401  (registers coh*)
import sae.polysae  # noqa: F401  (registers poly*)
from interp.infra.sae_folder import check_finite_weights
from interp.infra.sae_folder import check_sae_folder as _check_folder

ARCHS: dict[str, str] = {
    "relu": "standard",
    "topk": "topk",
    "batchtopk": "tk_batchtopk",
    "jumprelu": "jumprelu",
    "gated": "gated",
    "matryoshka": "matryoshka_batchtopk",
    "c2r": "c2r",
    "c2r_topk": "c2r_topk",
    "c2r_relu": "c2r_relu",
    "c2r_jumprelu": "c2r_jumprelu",
    "c2r_matryoshka": "c2r_matryoshka",
    "poly": "poly",
    "poly_batchtopk": "poly_batchtopk",
    "poly_relu": "poly_relu",
    "coh": "coh",
    "coh_topk": "coh_topk",
    "coh_batchtopk": "coh_batchtopk",
}
"""Toolkit name -> sae-lens architecture name. `relu` is sae-lens's "standard" (ReLU + L1); `batchtopk` is
sae-lens's BatchTopK with the official AuxK default (`sae._bases`), registered as "tk_batchtopk"."""

BASELINE_OF: dict[str, str] = {
    "c2r": "batchtopk",
    "c2r_topk": "topk",
    "c2r_relu": "relu",
    "c2r_jumprelu": "jumprelu",
    "c2r_matryoshka": "matryoshka",
    "poly": "topk",
    "poly_batchtopk": "batchtopk",
    "poly_relu": "relu",
    "coh": "relu",
    "coh_topk": "topk",
    "coh_batchtopk": "batchtopk",
}
"""Each variant's baseline: the same encoder without the variant's change."""

DEFAULTS: dict[str, dict[str, Any]] = {"relu": {"l1_coefficient": 5.0}}
# Matryoshka nests prefixes of the dictionary: by default four levels, d_sae/8, /4, /2 and all (set by make_sae).
"""Settings that differ from sae-lens's defaults for our use, by *base* (`base_of`): a variant takes its
base's, so c2r_relu, coh and poly_relu train with relu's L1 coefficient and differ from it only in their
own term."""

PAPER_SETTINGS: dict[str, Any] = {"auxk_style": "official", "c2r_ref_batch": 2048}
"""The papers' settings where they differ from the defaults (the official 1/32 normalised AuxK, C²R's
normalisation to batch 2048): what the paper-reproduction experiments pass (`paper_settings`)."""


def base_of(arch: str) -> str:
    """The base a toolkit architecture is built on (relu, topk, batchtopk, jumprelu, gated, matryoshka)."""
    while arch in BASELINE_OF:
        arch = BASELINE_OF[arch]
    return arch


def paper_settings(arch: str) -> dict[str, Any]:
    """`PAPER_SETTINGS` restricted to the fields `arch`'s config has."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(training_class(arch)[1])}
    return {k: v for k, v in PAPER_SETTINGS.items() if k in names}


class UnknownArchitectureError(ValueError):
    """An architecture name that is not in `ARCHS`."""


def training_class(arch: str) -> tuple[type, type]:
    """(training SAE class, config class) for a toolkit name; a clear error for unknown names."""
    if arch not in ARCHS:
        near = difflib.get_close_matches(arch, ARCHS, n=3)
        hint = f" Did you mean {', '.join(near)}?" if near else ""
        raise UnknownArchitectureError(f"unknown SAE architecture {arch!r}.{hint} Known: {', '.join(ARCHS)}")
    return SAE_TRAINING_CLASS_REGISTRY[ARCHS[arch]]


def make_sae(arch: str, d_in: int, d_sae: int, seed: int | None = None, **settings: Any) -> TrainingSAE:
    """A fresh training SAE of `arch`. `settings` are fields of its config (k, l1_coefficient,
    c2r_lambda, rank2, coh_lambda, ...); an unknown field is an error naming the valid ones."""
    import dataclasses

    import torch

    cls, cfg_cls = training_class(arch)
    names = {f.name for f in dataclasses.fields(cfg_cls)}
    bad = sorted(set(settings) - names)
    if bad:
        raise ValueError(f"{arch} has no setting(s) {bad}; valid: {sorted(names - {'metadata'})}")
    if "k" in settings and "k" in names and cfg_cls.__dataclass_fields__["k"].type in (int, "int"):
        settings["k"] = int(settings["k"])
    if "matryoshka_widths" in names and "matryoshka_widths" not in settings:
        settings["matryoshka_widths"] = sorted({max(1, d_sae // 8), max(1, d_sae // 4), max(1, d_sae // 2), d_sae})
    if seed is not None:
        torch.manual_seed(seed)
    return cls(cfg_cls(d_in=d_in, d_sae=d_sae, **{**DEFAULTS.get(base_of(arch), {}), **settings}))


def load_sae(path: str | Path, device: str = "cpu", inference: bool = True) -> SAE:
    """Load a checkpoint folder (cfg.json + sae_weights.safetensors) written by this toolkit or sae-lens.

    `inference=True` (default) returns the inference SAE sae-lens would ship (`sae.inference.to_inference`:
    BatchTopK-family SAEs as JumpReLU with their threshold, so a row's code never depends on its batch).
    `inference=False` returns the training class (loss and settings; batch-level top-k in `encode`), for
    resuming or for the explicit batch-level evaluation. Inference-only folders load through
    `SAE.load_from_disk` either way. A run folder of `interp sae train` holds the inference form (what
    plain sae-lens loads) with the training form in `training_sae/` (`sae.train.save_trained`).
    """
    path = Path(path)
    arch = check_sae_folder(path)["architecture"]
    try:
        if (path / "training_sae" / "cfg.json").is_file():  # a run folder: the inference form, training form beside it
            sae = (
                SAE.load_from_disk(path, device=device) if inference else load_sae(path / "training_sae", device, False)
            )
        elif arch in SAE_TRAINING_CLASS_REGISTRY:
            sae = TrainingSAE.load_from_disk(path, device=device)
            if inference:
                from sae.inference import to_inference

                sae = to_inference(sae)
        else:
            sae = SAE.load_from_disk(path, device=device)
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as e:
        first = (str(e).strip().splitlines() or [""])[0][:160]
        raise ValueError(
            f"{path}: cannot load the SAE ({type(e).__name__}: {first}); its cfg.json does not fit "
            "its architecture or its weights: is the folder damaged?"
        ) from None
    check_finite_weights(sae.state_dict(), path)  # every reader (eval, dashboard, saebench, steering) is covered
    return sae


def check_sae_folder(path: str | Path) -> dict[str, Any]:
    """The checked `cfg.json` of an SAE folder (`interp.infra.sae_folder.check_sae_folder`, with the
    architectures sae-lens and this family register); a ValueError naming the file for anything sae-lens
    would trip on."""
    from sae_lens.registry import SAE_CLASS_REGISTRY

    return _check_folder(path, set(SAE_CLASS_REGISTRY) | set(SAE_TRAINING_CLASS_REGISTRY))


def arch_name(sae: SAE) -> str:
    """The toolkit name of a loaded SAE ("relu" for sae-lens's "standard")."""
    a = sae.cfg.architecture()
    return {v: k for k, v in ARCHS.items()}.get(a, {"batchtopk": "batchtopk"}.get(a, a))
