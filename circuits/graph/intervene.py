"""Feature interventions in the replacement model, and what the graph predicts for them.

`intervene(model, tc, tokens, edits)` runs the prompt with every MLP output replaced by the transcoders' output from
the *current* MLP input plus the clean run's error (so that, without edits, the forward is the model's own), with
`edits` {(layer, position, feature): new activation} applied as the features are computed: an ablation sets 0, a
steer multiplies. Downstream features respond through their encoders. `freeze=True` also replays the clean run's
attention patterns and norm scales (the graph's frozen setting); `freeze=False` recomputes them (the real model,
errors held). Positions before `zero_positions` keep their clean MLP outputs, as in the graph.

`predicted_effect(graph, edits)` is the graph's linear prediction of the same change on the logit targets: the
edited features' activation changes propagate along the edges (each edge divided by its source's activation is
the effect of one unit), through every feature row the graph holds, to the logits. In the frozen model a change that
leaves every downstream feature on the same side of its threshold is predicted exactly; `interp circuits
intervene`-style checks report how close the prediction is in both settings.
"""

from __future__ import annotations

import torch
from torch import Tensor

from circuits.graph.graph import Graph
from circuits.model.transcoders import Transcoders
from interp.hooks import norms

Edits = dict[tuple[int, int, int], float]


def _clean_state(model, tokens: Tensor) -> dict[str, Tensor]:
    seen: dict[str, Tensor] = {}

    def keep(x, hook):
        seen[hook.name] = x.detach().clone()

    wanted = (".hook_scale", "attn.hook_pattern", "hook_mlp_out", "ln2.hook_normalized")
    with torch.no_grad(), model.hooks(fwd_hooks=[(lambda n: n.endswith(wanted), keep)]):
        model(tokens[None])
    return seen


def check_edits(edits: Edits, n_layers: int, n_pos: int, d_tc: int, zero_positions: int) -> None:
    """Refuse, in one line, an edit that would be ignored, wrap around or be overwritten."""
    for key in edits:
        if len(key) != 3:
            raise ValueError(f"edit {key!r}: edits are keyed by (layer, position, feature)")
        layer, pos, feat = key
        if not 0 <= layer < n_layers:
            raise ValueError(
                f"edit {key}: layer {layer} is not a layer of this {n_layers}-layer model (0..{n_layers - 1})"
            )
        if not 0 <= pos < n_pos:
            raise ValueError(f"edit {key}: position {pos} is outside the prompt's {n_pos} positions (0..{n_pos - 1})")
        if pos < zero_positions:
            raise ValueError(
                f"edit {key}: position {pos} is before zero_positions={zero_positions}, where the clean MLP outputs "
                f"are kept: edit a position >= {zero_positions}, or pass zero_positions={pos}"
            )
        if not 0 <= feat < d_tc:
            raise ValueError(f"edit {key}: feature {feat} is not one of the transcoders' {d_tc} (0..{d_tc - 1})")


@torch.no_grad()
def intervene(
    model, tc: Transcoders, tokens: Tensor, edits: Edits, freeze: bool = True, zero_positions: int = 1
) -> Tensor:
    """[d_vocab] last-position logits of the replacement model with `edits` applied (module doc)."""
    n_layers = model.n_layers
    check_edits(edits, n_layers, int(tokens.shape[-1]), tc.d_tc, zero_positions)
    clean = _clean_state(model, tokens)
    inputs = torch.stack([clean[f"blocks.{layer}.ln2.hook_normalized"][0].float() for layer in range(n_layers)])
    acts0 = [tc.encode(layer, inputs[layer]) for layer in range(n_layers)]
    for a in acts0:
        a[:zero_positions] = 0
    recon0 = tc.reconstruct(acts0, inputs)
    errors = torch.stack([clean[f"blocks.{layer}.hook_mlp_out"][0].float() for layer in range(n_layers)]) - recon0
    specs = [model.norm_module(f"blocks.{layer}.ln2")[1] for layer in range(n_layers)]
    live_acts: list[Tensor | None] = [None] * n_layers
    live_in: list[Tensor | None] = [None] * n_layers

    def mid(x, hook):
        layer, spec = hook.layer, specs[hook.layer]
        scale = clean[f"blocks.{layer}.ln2.hook_scale"] if freeze else None
        live_in[layer] = norms.normalized_of(spec, x, scale)[0].float()

    def mlp_out(x, hook):
        layer = hook.layer
        a = tc.encode(layer, live_in[layer])
        a[:zero_positions] = 0
        for (el, ep, ef), value in edits.items():
            if el == layer:
                a[ep, ef] = value
        live_acts[layer] = a
        out = tc.b_dec[layer] + tc.skip(layer, live_in[layer]) + errors[layer]
        for source in range(layer + 1):
            if layer in tc.writes(source):
                w = tc.W_dec[source][:, layer - source] if tc.cross_layer else tc.W_dec[source]
                out = out + live_acts[source] @ w
        out[:zero_positions] = clean[hook.name][0, :zero_positions].float()
        return out[None].to(x.dtype)

    def replay(x, hook):
        return clean[hook.name]

    hooks = [("blocks.*.hook_resid_mid", mid), ("blocks.*.hook_mlp_out", mlp_out)]
    if freeze:
        hooks.insert(0, (lambda n: n.endswith((".hook_scale", "attn.hook_pattern")), replay))
    with model.hooks(fwd_hooks=hooks):
        return model(tokens[None])[0, -1].float()


def predicted_effect(g: Graph, edits: Edits) -> Tensor:
    """[n_logits] the graph's linear prediction of the change of each logit target's demeaned logit."""
    n_feat = g.n_features
    sel = g.features[g.selected]
    act = g.activations[g.selected]
    index = {tuple(int(v) for v in sel[i]): i for i in range(n_feat)}
    delta = torch.zeros(n_feat)
    for key, value in edits.items():
        if key not in index:
            raise ValueError(f"feature {key} (layer, position, feature) is not a node of this graph")
        delta[index[key]] = value - float(act[index[key]])
    per_unit = g.rows[:, :n_feat] / act.clamp(min=1e-12)[None, :]
    fixed = torch.zeros(n_feat, dtype=torch.bool)
    for key in edits:
        fixed[index[key]] = True
    # features in index order are sorted by layer, so one pass in that order propagates every path
    change = delta.clone()
    for i in range(n_feat):
        if not fixed[i]:
            change[i] = per_unit[i] @ change
    return per_unit[-g.n_logits :] @ change
