"""The parity certificate of one model: evidence, on real inputs, that its hook points are the HF model's own.

    cert = parity_certificate(model, tokens)      # tokens [batch, pos]; one small batch is enough
    cert["logits_max_abs_diff"]                   # 0.0: the hooked forward changes nothing
    cert["hooks"]["blocks.3.hook_resid_post"]     # max |difference| to HF's hidden state there

Two forwards of the same batch: the bare HF model (no hook anywhere, `output_hidden_states`) and a cached run
with every chosen hook installed. Each residual hook is compared with HF's hidden state at the same place; a
hook with no HF counterpart (q, pattern, MLP activations) gets the block's own check instead: what its
sub-layers add must sum to the next residual (`block_sum_max_abs_diff`). `interp cache` stores the certificate
of its first batch in the store's manifest (`extra["parity"]`), with the adapter and the library versions.
"""

from __future__ import annotations

import re

import torch

_RESID = re.compile(r"^blocks\.(\d+)\.hook_resid_(pre|post)$")


def adapter_file(model_type: str) -> str:
    """The file that describes a family's hook points (for the certificate and error messages)."""
    from interp.adapters import FAMILIES

    for module in FAMILIES:
        if model_type in module.ADAPTER.model_types:
            return module.__name__.replace(".", "/") + ".py"
    return "registered at run time (interp.adapters.register_adapter)"


def _hidden_index(name: str, n_layers: int) -> int | None:
    """Index into HF's `hidden_states` holding the same tensor as residual hook `name` (None: no counterpart;
    HF's last entry is after the final norm, so the last block's resid_post has none)."""
    m = _RESID.match(name)
    if not m:
        return None
    i = int(m.group(1)) + (m.group(2) == "post")
    return i if i < n_layers else None


@torch.no_grad()
def parity_certificate(model, tokens: torch.Tensor, names=None) -> dict:
    """Evidence that `model`'s hooks read the HF model's own numbers on `tokens` (see the module docstring)."""
    import transformers

    tokens = tokens.to(model.device)
    ref = model.hf_model(tokens, output_hidden_states=True)
    chosen = [p.name for p in model.hook_points(names)]
    resid = {f"blocks.{l}.hook_resid_{w}" for l in range(model.n_layers) for w in ("pre", "post")}
    logits, cache = model.run_with_cache(tokens, names=sorted(set(chosen) | resid))
    hooks = {}
    for name in chosen:
        i = _hidden_index(name, model.n_layers)
        hooks[name] = None if i is None else _maxdiff(cache[name], ref.hidden_states[i])
    return {
        "model_type": model.config.model_type,
        "adapter": adapter_file(model.config.model_type),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "tokens": list(tokens.shape),
        "logits_max_abs_diff": _maxdiff(logits, ref.logits),
        "block_sum_max_abs_diff": max(_block_sum(cache, l) for l in range(model.n_layers)),
        "hooks": hooks,
    }


def _block_sum(cache, layer: int) -> float:
    """max |resid_post - (resid_pre + attn_out + mlp_out)| of one block (sequential or parallel alike)."""
    names = [f"blocks.{layer}.hook_{n}" for n in ("resid_pre", "attn_out", "mlp_out", "resid_post")]
    if not all(n in cache for n in names):
        return 0.0
    pre, attn, mlp, post = (cache[n] for n in names)
    return _maxdiff(pre + attn + mlp, post)


def _maxdiff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).abs().max())
