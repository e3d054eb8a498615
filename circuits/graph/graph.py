"""An attribution graph of one prompt: nodes, the dense adjacency of direct effects, and how it is stored.

Node order is circuit-tracer's: the selected active features (sorted by layer, position, feature), then one error
node per (layer, position), then one token node per position, then the logit targets. `adjacency[target, source]`
is the direct effect of source on target (rows exist for features and logits; errors and tokens are sources only).

A graph is stored as `graph.safetensors` (the tensors) and `graph.json` (prompt, token strings, targets, settings,
scores); no pickle, so any graph file can be opened safely.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from safetensors.torch import load_file, save_file
from torch import Tensor

TENSORS = ("adjacency", "features", "activations", "selected", "tokens", "logit_tokens", "logit_probabilities")


@dataclass
class Graph:
    adjacency: Tensor  # [n_nodes, n_nodes]
    features: Tensor  # [n_active, 3] every active (layer, position, feature)
    activations: Tensor  # [n_active]
    selected: Tensor  # [n_selected] indices into `features` that are graph nodes (rows computed)
    tokens: Tensor  # [n_pos]
    logit_tokens: Tensor  # [n_logits]
    logit_probabilities: Tensor  # [n_logits]
    n_layers: int
    meta: dict = field(default_factory=dict)  # prompt, token strings, logit strings, model, transcoders, settings

    @property
    def n_pos(self) -> int:
        return len(self.tokens)

    @property
    def n_features(self) -> int:
        return len(self.selected)

    @property
    def n_errors(self) -> int:
        return self.n_layers * self.n_pos

    @property
    def n_logits(self) -> int:
        return len(self.logit_tokens)

    def node(self, i: int) -> dict:
        """What node i is: {"kind": feature|error|token|logit, "layer", "position", ...}."""
        nf, ne, npos = self.n_features, self.n_errors, self.n_pos
        if i < nf:
            layer, pos, feat = (int(v) for v in self.features[self.selected[i]])
            return {
                "kind": "feature",
                "layer": layer,
                "position": pos,
                "feature": feat,
                "activation": float(self.activations[self.selected[i]]),
            }
        if i < nf + ne:
            layer, pos = divmod(i - nf, npos)
            return {"kind": "error", "layer": layer, "position": pos}
        if i < nf + ne + npos:
            return {"kind": "token", "layer": -1, "position": i - nf - ne, "token": int(self.tokens[i - nf - ne])}
        j = i - nf - ne - npos
        return {
            "kind": "logit",
            "layer": self.n_layers,
            "position": npos - 1,
            "token": int(self.logit_tokens[j]),
            "probability": float(self.logit_probabilities[j]),
        }

    def save(self, folder: str | Path) -> Path:
        """Write graph.safetensors + graph.json into `folder` (created)."""
        p = Path(folder)
        p.mkdir(parents=True, exist_ok=True)
        tensors = {k: getattr(self, k).contiguous() for k in TENSORS}
        save_file(tensors, str(p / "graph.safetensors"), metadata={"format": "interp-attribution-graph"})
        info = {"format": "interp-attribution-graph", "version": 1, "n_layers": self.n_layers, **self.meta}
        (p / "graph.json").write_text(json.dumps(info, indent=1) + "\n")
        return p

    @staticmethod
    def load(folder: str | Path) -> Graph:
        p = Path(folder)
        info_file, tensor_file = p / "graph.json", p / "graph.safetensors"
        if not info_file.is_file() or not tensor_file.is_file():
            raise FileNotFoundError(
                f"{p} is not a graph folder (needs graph.json and graph.safetensors); "
                "write one with `interp circuits graph`"
            )
        info = json.loads(info_file.read_text())
        if info.get("format") != "interp-attribution-graph":
            raise ValueError(f"{info_file}: not an attribution graph (format {info.get('format')!r})")
        t = load_file(str(tensor_file))
        missing = [k for k in TENSORS if k not in t]
        if missing:
            raise ValueError(f"{tensor_file}: missing tensors {missing}")
        meta = {k: v for k, v in info.items() if k not in ("format", "version", "n_layers")}
        return Graph(**{k: t[k] for k in TENSORS}, n_layers=int(info["n_layers"]), meta=meta)
