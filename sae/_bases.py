"""Shared pieces of the SAE variants: the sae-lens base classes each regulariser can sit on.

A variant (C²R, Coh) is a loss term, so it is written once as a mixin over sae-lens's
`calculate_aux_loss` and combined with each base below; PolySAE changes the decoder and has its
own classes. `register(name, cls, cfg_cls)` puts a class into both sae-lens registries (training and
loading) and refuses a name that is taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from sae_lens import register_sae_class, register_sae_training_class
from sae_lens.registry import SAE_CLASS_REGISTRY, SAE_TRAINING_CLASS_REGISTRY
from sae_lens.saes.batchtopk_sae import BatchTopKTrainingSAE, BatchTopKTrainingSAEConfig
from sae_lens.saes.gated_sae import GatedTrainingSAE, GatedTrainingSAEConfig
from sae_lens.saes.jumprelu_sae import JumpReLUTrainingSAE, JumpReLUTrainingSAEConfig
from sae_lens.saes.matryoshka_batchtopk_sae import MatryoshkaBatchTopKTrainingSAE, MatryoshkaBatchTopKTrainingSAEConfig
from sae_lens.saes.standard_sae import StandardTrainingSAE, StandardTrainingSAEConfig
from sae_lens.saes.topk_sae import TopKTrainingSAE, TopKTrainingSAEConfig, act_times_W_dec, calculate_topk_aux_acts

AUXK_STYLES = ("official", "sae_lens")
"""sae_lens (the default): sae-lens's TopK AuxK (unnormalised, scaled by min(n_dead/k_aux, 1), weight 1),
which revives dead latents within a few hundred steps. official: BatchTopK's own AuxK (Bussmann et al.;
dictionary_learning's `BatchTopKTrainer`): the dead latents' top-(d_in/2) reconstruction error of the
residual, divided by the residual's variance, weight 1/32; it leaves two thirds of the latents dead in a
2M-token run (sae/README.md), so it is the paper-reproduction setting (`--set auxk_style=official`)."""

AUXK_COEFFICIENT = {"official": 1 / 32, "sae_lens": 1.0}
"""Each style's own weight, used when `aux_loss_coefficient` is left at None."""


def auxk_loss(
    style: str, coefficient: float, residual: torch.Tensor, recons: torch.Tensor, n_dead: int, k_aux: int
) -> torch.Tensor:
    """The AuxK term from the residual e = x - x̂ (detached) and the dead latents' reconstruction ê."""
    err = (recons - residual).pow(2).sum(dim=-1).mean()
    if style == "official":
        denom = (residual - residual.mean(0, keepdim=True)).pow(2).sum(dim=-1).mean()
        return coefficient * (err / denom.clamp_min(1e-12)).nan_to_num(0.0)
    return coefficient * min(n_dead / max(k_aux, 1), 1.0) * err


@dataclass(kw_only=True)
class AuxKFields:
    """AuxK style of the BatchTopK family (mixed into its configs)."""

    auxk_style: str = "sae_lens"
    """'sae_lens' (sae-lens's unnormalised form, weight 1) or 'official' (normalised by the residual
    variance, weight 1/32: the paper's). `aux_loss_coefficient` None takes the style's own weight."""

    def _check_auxk(self) -> None:
        if self.auxk_style not in AUXK_STYLES:
            raise ValueError(f"auxk_style must be one of {AUXK_STYLES}, got {self.auxk_style!r}")
        if self.aux_loss_coefficient is None:
            self.aux_loss_coefficient = AUXK_COEFFICIENT[self.auxk_style]


class AuxKMixin:
    """BatchTopK-family AuxK in the chosen style (sae-lens's `calculate_topk_aux_loss` replaced)."""

    def aux_recons(self, auxk_acts: torch.Tensor) -> torch.Tensor:
        """What the dead latents' codes reconstruct (no bias); PolySAE overrides this."""
        return act_times_W_dec(auxk_acts, self.W_dec, self.cfg.rescale_acts_by_decoder_norm)

    def calculate_topk_aux_loss(self, sae_in, sae_out, hidden_pre, dead_neuron_mask):  # type: ignore[no-untyped-def]
        if dead_neuron_mask is None or (n_dead := int(dead_neuron_mask.sum())) == 0:
            return sae_out.new_tensor(0.0)
        residual = (sae_in - sae_out).detach()
        k_aux = sae_in.shape[-1] // 2
        acts = calculate_topk_aux_acts(min(k_aux, n_dead), hidden_pre, dead_neuron_mask)
        return auxk_loss(
            self.cfg.auxk_style, self.cfg.aux_loss_coefficient, residual, self.aux_recons(acts), n_dead, k_aux
        )


def _batchtopk_base() -> tuple[type, type]:
    def post_init(self) -> None:  # type: ignore[no-untyped-def]
        coerce_metadata(self)
        self._check_auxk()  # first: resolves aux_loss_coefficient before the base's checks see it
        BatchTopKTrainingSAEConfig.__post_init__(self)

    cfg_cls = dataclass(
        type(
            "TkBatchTopKConfig",
            (BatchTopKTrainingSAEConfig, AuxKFields),
            {
                "__doc__": "sae-lens's BatchTopK with a choice of AuxK (sae-lens's by default, the official one by "
                "flag).",
                "__annotations__": {"aux_loss_coefficient": "float | None"},
                "aux_loss_coefficient": None,
                "architecture": classmethod(lambda cls: "tk_batchtopk"),
                "__post_init__": post_init,
            },
        )
    )
    cls = type("TkBatchTopKSAE", (AuxKMixin, BatchTopKTrainingSAE), {"__doc__": cfg_cls.__doc__})
    return cls, cfg_cls


BASES: dict[str, tuple[type, type]] = {
    "relu": (StandardTrainingSAE, StandardTrainingSAEConfig),
    "topk": (TopKTrainingSAE, TopKTrainingSAEConfig),
    "batchtopk": _batchtopk_base(),
    "jumprelu": (JumpReLUTrainingSAE, JumpReLUTrainingSAEConfig),
    "gated": (GatedTrainingSAE, GatedTrainingSAEConfig),
    "matryoshka_batchtopk": (MatryoshkaBatchTopKTrainingSAE, MatryoshkaBatchTopKTrainingSAEConfig),
}
"""Encoder/sparsity families a variant can be built on (our name -> training class, config): sae-lens's
own training SAEs; the BatchTopK base is sae-lens's with a choice of AuxK (`auxk_style`: sae-lens's by
default, the official 1/32 normalised one by flag). Matryoshka keeps sae-lens's AuxK."""


def make_variant(
    name: str,
    base: str,
    mixin: type,
    fields: type,
    check: str,
    prefix: str,
    extra_cfg: dict[str, Any] | None = None,
    extra_cls: dict[str, Any] | None = None,
    loss_only: bool = True,
) -> tuple[type, type]:
    """Build and register `name` = `mixin` (losses/decoder) over base `base`, with config fields `fields`
    (validated by `fields.<check>()` after the base's own checks). A new base for every variant is one
    entry in `BASES` plus one `make_variant` line per variant. A `loss_only` variant (a training term, the
    same encoder and decoder: C²R, Coh) ships as its base's inference class, so its saved inference folder
    loads in plain sae-lens; a variant that changes the model (PolySAE's decoder) passes False."""
    base_cls, base_cfg = BASES[base]

    def post_init(self) -> None:  # type: ignore[no-untyped-def]
        coerce_metadata(self)
        base_cfg.__post_init__(self)
        getattr(self, check)()

    ns: dict[str, Any] = {
        "__doc__": f"Config of {name}: a {base} SAE with {prefix}.",
        "architecture": classmethod(lambda cls: name),
        "__post_init__": post_init,
        **(extra_cfg or {}),
    }
    if loss_only:
        ns["get_inference_config_class"] = lambda self: _base_inference_config(base_cfg, self)
    cfg_cls = dataclass(type(f"{prefix}{base_cfg.__name__}", (base_cfg, fields), ns))
    cls = type(
        f"{prefix}{base_cls.__name__}", (mixin, base_cls), {"__doc__": f"{base} SAE + {prefix}.", **(extra_cls or {})}
    )
    register(name, cls, cfg_cls)
    return cls, cfg_cls


def _base_inference_config(base_cfg: type, cfg: Any) -> type:
    """The inference config class of a base (sae-lens's default looks it up by the config's own
    architecture name, which for a variant is the variant's)."""
    from sae_lens.registry import get_sae_class
    from sae_lens.saes.sae import TrainingSAEConfig

    own = base_cfg.get_inference_config_class
    if own is TrainingSAEConfig.get_inference_config_class:
        return get_sae_class(base_cfg.architecture())[1]
    return own(cfg)


def register(name: str, cls: type, cfg_cls: type) -> None:
    """Register `cls` under `name` for `SAE.load_from_disk`, `TrainingSAE.load_from_disk` and the trainer.

    The training class doubles as the loading class, so a checkpoint written by `SAETrainer` (its
    `cfg.json` names the training architecture) loads back with `SAE.load_from_disk`.
    """
    if name in SAE_CLASS_REGISTRY or name in SAE_TRAINING_CLASS_REGISTRY:
        raise ValueError(f"an SAE architecture named {name!r} is already registered with sae-lens")
    register_sae_class(name, cls, cfg_cls)
    register_sae_training_class(name, cls, cfg_cls)


register("tk_batchtopk", *BASES["batchtopk"]) if "tk_batchtopk" not in SAE_TRAINING_CLASS_REGISTRY else None


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
