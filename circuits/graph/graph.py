"""An attribution graph of one prompt: nodes, the direct effects between them, and how it is stored.

Node order is circuit-tracer's: the selected active features (sorted by layer, position, feature), then one error
node per (layer, position), then one token node per position, then the logit targets. `adjacency[target, source]`
is the direct effect of source on target. Only features and logits have incoming edges (errors and tokens are
sources only), so a graph holds just those rows, `rows` [n_features + n_logits, n_nodes] (`row_nodes` says which
node each is); `adjacency` is the dense square matrix circuit-tracer stores, built when asked for (a 4,096-token
graph has 127,000 error nodes: its dense matrix would take 65 GB, its rows 0.1 GB).

A graph is stored as `graph.safetensors` (the tensors) and `graph.json` (prompt, token strings, targets, settings,
scores); no pickle, so any graph file can be opened safely. Version 1 files (a dense `adjacency`) still load.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

DENSE_LIMIT_BYTES = 8e9
"""`Graph.adjacency` refuses to build a dense matrix larger than this."""

TENSORS = ("rows", "features", "activations", "selected", "tokens", "logit_tokens", "logit_probabilities")


@dataclass
class Graph:
    rows: Tensor  # [n_features + n_logits, n_nodes] the incoming edges of the features, then of the logits
    features: Tensor  # [n_active, 3] every active (layer, position, feature)
    activations: Tensor  # [n_active]
    selected: Tensor  # [n_selected] indices into `features` that are graph nodes (rows computed)
    tokens: Tensor  # [n_pos]
    logit_tokens: Tensor  # [n_logits]
    logit_probabilities: Tensor  # [n_logits]
    n_layers: int
    meta: dict = field(default_factory=dict)  # prompt, token strings, logit strings, model, transcoders, settings

    @property
    def n_nodes(self) -> int:
        return self.rows.shape[1]

    @property
    def row_nodes(self) -> Tensor:
        """[n_features + n_logits] the node each row of `rows` is."""
        n = self.n_nodes
        return torch.cat([torch.arange(self.n_features), torch.arange(n - self.n_logits, n)])

    @property
    def adjacency(self) -> Tensor:
        """[n_nodes, n_nodes] the dense adjacency (zero rows for errors and tokens), for graphs that fit; built once
        and kept while `rows` is the same tensor (loops read it row by row)."""
        kept = self.__dict__.get("_dense")
        if kept is not None and kept[0] is self.rows:
            return kept[1]
        n = self.n_nodes
        if n * n * 4 > DENSE_LIMIT_BYTES:
            raise MemoryError(
                f"this graph has {n} nodes: its dense adjacency would take {n * n * 4 / 1e9:.1f} GB; "
                "use graph.rows and graph.row_nodes (the only nonzero rows)"
            )
        a = torch.zeros(n, n, dtype=self.rows.dtype)
        a[self.row_nodes] = self.rows
        self.__dict__["_dense"] = (self.rows, a)
        return a

    def logit_row(self, j: int = 0) -> Tensor:
        """[n_nodes] logit target j's incoming edges."""
        return self.rows[self.n_features + j]

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
        info = {"format": "interp-attribution-graph", "version": 2, "n_layers": self.n_layers, **self.meta}
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
        if info.get("version") == 1 and "adjacency" in t:  # the dense square matrix: keep its nonzero rows
            n_feat, n_logits = len(t["selected"]), len(t["logit_tokens"])
            t["rows"] = torch.cat([t["adjacency"][:n_feat], t["adjacency"][len(t["adjacency"]) - n_logits :]])
        missing = [k for k in TENSORS if k not in t]
        if missing:
            raise ValueError(f"{tensor_file}: missing tensors {missing}")
        meta = {k: v for k, v in info.items() if k not in ("format", "version", "n_layers")}
        return Graph(**{k: t[k] for k in TENSORS}, n_layers=int(info["n_layers"]), meta=meta)
