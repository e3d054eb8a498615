"""Shared pieces of the SAE variants: the sae-lens base classes each regulariser can sit on.

A variant (C²R, Coh) is a loss term, so it is written once as a mixin over sae-lens's
`calculate_aux_loss` and combined with each base below; PolySAE changes the decoder and has its
own classes. `register(name, cls, cfg_cls)` puts a class into both sae-lens registries (training and
loading) and refuses a name that is taken.
"""

from __future__ import annotations

from typing import Any

import torch
from sae_lens import register_sae_class, register_sae_training_class
from sae_lens.registry import SAE_CLASS_REGISTRY, SAE_TRAINING_CLASS_REGISTRY
from sae_lens.saes.batchtopk_sae import BatchTopKTrainingSAE, BatchTopKTrainingSAEConfig
from sae_lens.saes.standard_sae import StandardTrainingSAE, StandardTrainingSAEConfig
from sae_lens.saes.topk_sae import TopKTrainingSAE, TopKTrainingSAEConfig

BASES: dict[str, tuple[type, type]] = {
    "relu": (StandardTrainingSAE, StandardTrainingSAEConfig),
    "topk": (TopKTrainingSAE, TopKTrainingSAEConfig),
    "batchtopk": (BatchTopKTrainingSAE, BatchTopKTrainingSAEConfig),
}
"""Encoder/sparsity families a variant can be built on (our name -> sae-lens training class, config)."""


def register(name: str, cls: type, cfg_cls: type) -> None:
    """Register `cls` under `name` for `SAE.load_from_disk`, `TrainingSAE.load_from_disk` and the trainer.

    The training class doubles as the loading class, so a checkpoint written by `SAETrainer` (its
    `cfg.json` names the training architecture) loads back with `SAE.load_from_disk`.
    """
    if name in SAE_CLASS_REGISTRY or name in SAE_TRAINING_CLASS_REGISTRY:
        raise ValueError(f"an SAE architecture named {name!r} is already registered with sae-lens")
    register_sae_class(name, cls, cfg_cls)
    register_sae_training_class(name, cls, cfg_cls)


def as_loss_dict(losses: Any) -> dict[str, torch.Tensor]:
    """sae-lens lets `calculate_aux_loss` return a tensor or a dict; always work with a dict."""
    return dict(losses) if isinstance(losses, dict) else {"aux_loss": losses}


def coerce_metadata(cfg: Any) -> None:
    """`SAE.load_from_disk` builds configs with `metadata` still a dict (sae-lens's `SAEConfig.from_dict`
    converts it only after `__init__`), which a training config's `__post_init__` cannot take: convert
    it first so our training configs load through both loaders."""
    from sae_lens.saes.sae import SAEMetadata

    if isinstance(cfg.metadata, dict):
        cfg.metadata = SAEMetadata(**cfg.metadata)
