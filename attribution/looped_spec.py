"""The looped GPT's place in `interp`, without torch: its hook adapter and the `looped-gpt` model spec.

`import attribution` registers both (so a bad option of `interp attribute ...` is refused before torch loads);
the model classes themselves, and their registration with transformers' Auto classes, are in
`attribution.looped`, imported when a looped model is built or loaded.
"""

from __future__ import annotations

MODEL_TYPE = "looped_gpt"


def adapter():
    """The `interp` hook adapter: loop step t is hook layer t (`blocks.{t}.attn.hook_q`, ...)."""
    from interp.adapters import Adapter

    return Adapter(
        model_types=(MODEL_TYPE,),
        layers="transformer.steps",
        embed="transformer.wte",
        pos_embed="transformer.wpe",
        final_norm="transformer.ln_f",
        attn="attn",
        attn_contrib="attn",
        mlp_contrib="mlp",
        out_proj="attn.o_proj",
        mlp_norm="ln_2",
        mlp_pre="mlp.fc_in",
        mlp_down="mlp.fc_out",
        qkv=("attn.q_proj", "attn.k_proj", "attn.v_proj"),
    )


def _load(arg: str | None, dtype):
    from attribution.looped import load_spec  # torch and the model classes, only now

    return load_spec(arg, dtype)


def model_spec():
    from interp.models.registry import ModelSpec

    return ModelSpec(
        "looped-gpt",
        "Looped GPT (one shared block, 4 loops, d 64): random init, or :PATH for weights",
        _load,
        lambda: (True, "built from config (attribution package)"),
        weights="random init (trained with :PATH)",
    )


def register() -> None:
    """Register the hook adapter and the `looped-gpt` spec with `interp` (idempotent)."""
    from interp.adapters import ADAPTERS, register_adapter
    from interp.models.registry import SPECS, register_model

    if MODEL_TYPE not in ADAPTERS:
        register_adapter(adapter())
    if "looped-gpt" not in SPECS:
        register_model(model_spec())
