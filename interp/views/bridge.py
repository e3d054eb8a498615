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
import fnmatch

import torch
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


BRIDGE_MEANINGS = {
    "bloom": {"hook_embed": "TL's is after BLOOM's embedding LayerNorm; ours is the word embedding (W_E's output)"},
    "gpt2": {"hook_pos_embed": "same values; TL repeats them over the batch, we keep [1, pos, d]"},
    "gptj": {"blocks.*.attn.hook_attn_scores": "TL's bridge puts the softmaxed pattern there (patterns agree)"},
    "opt": {"blocks.*.attn.hook_attn_scores": "TL's bridge puts the softmaxed pattern there (patterns agree)"},
    "cohere": {
        "blocks.*.attn.hook_rot_[qk]": "TL 3.9's bridge rotates Cohere's q/k in halves where Cohere's rotary rotates "
        "interleaved pairs; from there on its attention is not HF's (tiny model: patterns 9e-3 apart, logits 2.8e-4); "
        "ours are what HF's attention reads (our logits equal HF's)"
    },
}
"""Family -> {hook name pattern: why TL 3's bridge and we mean different tensors by that name}."""


@torch.no_grad()
def compare_with_bridge(model, tokens) -> dict:
    """Every hook both we and TL's bridge (on the same weights) expose, compared on `tokens`: the max |difference|
    per hook, leaving out masked attention scores (TL writes -inf or the dtype's minimum) and the names in
    `BRIDGE_MEANINGS`; a tensor TL keeps with batch and position flattened is compared unflattened. The bridge's
    own refusal is a result (`bridge_error`)."""
    try:
        theirs_logits, theirs = to_transformer_bridge(model).run_with_cache(tokens)
    except Exception as e:
        return {"bridge_error": f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"}
    ours_logits, ours = model.run_with_cache(tokens)
    differs = BRIDGE_MEANINGS.get(model.config.model_type, {})
    diffs = {}
    for name in sorted(set(ours) & set(theirs)):
        if any(fnmatch.fnmatch(name, pattern) for pattern in differs):
            continue
        a, b = ours[name].float(), theirs[name].float()
        if a.shape != b.shape and a.numel() == b.numel():
            b = b.reshape(a.shape)
        if a.shape != b.shape:
            diffs[name] = float("nan")
            continue
        keep = (a > -1e30) & (b > -1e30)
        diffs[name] = float((a - b).abs()[keep].max()) if keep.any() else 0.0
    worst = max(diffs, key=lambda k: diffs[k]) if diffs else None
    return {
        "bridge_logits": float((ours_logits - theirs_logits.detach()).abs().max()),
        "bridge_hooks_compared": len(diffs),
        "bridge_max_abs_diff": diffs.get(worst),
        "bridge_worst_hook": worst,
        "bridge_differs": differs,
        "bridge_diffs": diffs,
    }
