"""TransformerLens 3's `TransformerBridge` over a `HookedModel`'s weights, without touching the model.

The bridge wraps the HF modules it is handed and patches them in place (it swaps in its own attention
and forces eager attention); on Llama and Gemma 3 that breaks KV-cached generation afterwards. So the
bridge gets its own module tree: a deep copy of `model.hf_model` whose parameters are the very same
tensors (no memory for weights; the bridge may still replace some with its own, in its own tree only),
and its own copies of the config and buffers. `model.hf_model` is never altered (tested: our logits and
`generate` are unchanged after a bridge is built).

It also gets a copy of our tokenizer marked so that TL does not try to re-load it from the hub, and
our BOS convention (`interp.data.tokenize_texts`): `bridge.to_tokens(text)` gives the ids we give.
"""

from __future__ import annotations

import copy

from torch import nn


def twin_module_tree(hf_model: nn.Module) -> nn.Module:
    """A deep copy of a HF model that shares every parameter tensor with the original."""
    memo = {id(p): p for p in hf_model.parameters()}
    twin = copy.deepcopy(hf_model, memo=memo)
    if not twin.config.architectures:  # GGUF / config-built models have none; TL reads it
        twin.config.architectures = [type(hf_model).__name__]
    return twin


def tokenizer_prepends_bos(tokenizer) -> bool:
    """Whether the tokenizer puts BOS in front of a text by itself (TransformerLens's detection)."""
    ids = tokenizer.encode("a")
    return tokenizer.bos_token_id is not None and len(ids) > 1 and ids[0] == tokenizer.bos_token_id


def tl_tokenizer(model):
    """(a copy of our tokenizer TL will not re-load, TL `default_prepend_bos` matching our rule)."""
    if model.tokenizer is None:
        return None, False
    tok = copy.deepcopy(model.tokenizer)
    tok.init_kwargs["add_bos_token"] = True  # only stops TL's hub re-load; BOS behaviour is detected
    prepend = tokenizer_prepends_bos(tok) if model.prepend_bos is None else bool(model.prepend_bos)
    return tok, prepend


def to_transformer_bridge(model):
    """A TransformerLens `TransformerBridge` over the same weights, on a twin module tree."""
    from transformer_lens.model_bridge import TransformerBridge

    tok, prepend = tl_tokenizer(model)
    bridge = TransformerBridge.boot_transformers(
        model.name.replace("/", "_"),
        hf_model=twin_module_tree(model.hf_model),
        tokenizer=tok,
        device=str(model.device),
        dtype=model.dtype,
    )
    bridge.cfg.default_prepend_bos = prepend
    return bridge.eval()
