"""A TransformerLens `HookedTransformer` built offline from a `HookedModel`'s own weights.

TransformerLens's loaders read a HF config from the hub by model name; given a local folder that holds
only `config.json` they read it from there instead. We write the wrapped model's config to a temporary
folder (whose name avoids the words TransformerLens matches on, like "llama"), let TL convert config and
weights with its own code, and load them with no folding or centring, so its activations are comparable
one to one with ours.

Prefer `model.to_transformer_bridge()` (TransformerLens 3's bridge: every architecture TL's bridge
knows, Gemma 3 included, exactly equal to HF). This older route stays for code written against
`HookedTransformer` and for TL's own benchmarks; it takes text with our BOS convention.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from interp.views.bridge import tl_tokenizer, tokenizer_prepends_bos

TL_ARCHITECTURES = {"gpt_neox": "GPTNeoXForCausalLM", "llama": "LlamaForCausalLM", "gpt2": "GPT2LMHeadModel"}


def to_transformer_lens(model):
    """TransformerLens model with the same weights; raises for architectures TL cannot build offline."""
    from transformer_lens import HookedTransformer
    from transformer_lens.loading_from_pretrained import get_pretrained_model_config, get_pretrained_state_dict

    model_type = model.config.model_type
    if model_type not in TL_ARCHITECTURES:
        raise NotImplementedError(
            f"no offline TransformerLens route for model type {model_type!r}; supported: {', '.join(TL_ARCHITECTURES)}"
        )
    hf = model.hf_model
    config = hf.config
    if not config.architectures:
        config.architectures = [TL_ARCHITECTURES[model_type]]
    with tempfile.TemporaryDirectory(prefix="interp-tl-") as tmp:
        folder = Path(tmp) / "model"
        folder.mkdir()
        raw = config.to_dict()
        if model_type == "gpt2":
            raw.setdefault("n_ctx", config.n_positions)  # TL reads n_ctx, which transformers 5 dropped
        (folder / "config.json").write_text(json.dumps(raw))
        cfg = get_pretrained_model_config(
            str(folder), hf_cfg=raw, fold_ln=False, device=str(model.device), dtype=model.dtype
        )
        state = get_pretrained_state_dict(str(folder), cfg, hf_model=hf, dtype=model.dtype)
    cfg.tokenizer_name = None  # otherwise TL fetches a tokenizer by name from the hub
    # TL's set_tokenizer re-loads the tokenizer by name from the hub: attach ours directly instead, and
    # tell TL what set_tokenizer would have found out, plus our BOS rule (TL's default prepends BOS,
    # which would shift every position by one against ours).
    tl = HookedTransformer(cfg, tokenizer=None, move_to_device=False)
    tok, prepend = tl_tokenizer(model)
    tl.tokenizer = tok
    if tok is not None:
        tl.cfg.tokenizer_prepends_bos = tokenizer_prepends_bos(tok)
        tl.cfg.default_prepend_bos = prepend
    tl.load_and_process_state_dict(
        state,
        fold_ln=False,
        center_writing_weights=False,
        center_unembed=False,
        fold_value_biases=False,
        refactor_factored_attn_matrices=False,
    )
    if model.device.type != "cpu":
        tl = tl.to(model.device)
    return tl.eval()
