"""An attribution graph in circuit-tracer's frontend form: pruned as their `create_graph_files` prunes it, nodes
and ids as their `frontend/graph_models.py` builds them, so that their own page (`serve(data_dir)`) draws it.

- feature: id `{layer}_{feature}_{position}`, `feature_type` "cross layer transcoder" (their one type for
  transcoder features, per-layer ones included), `feature` the Cantor pairing of (layer, feature), `clerp` our
  label `L{layer}/F{feature}` (theirs is empty; their page then asks Neuronpedia, which has none for our
  transcoders);
- error: id `0_{layer}_{position}`, "mlp reconstruction error" (`..._error` added where that id is also a layer-0
  feature's: their page keys nodes by id, and their own ids can collide there);
- token: `E_{token id}_{position}`, "embedding";
- logit: layer `n_layers + 1`, `clerp` `Output "<token>" (p=<probability>)`, the first one the target;
- `influence` is each node's cumulative influence share (their pruning slider), `activation` a feature's value;
- links: the kept edges, `{source, target, weight}` with the direct effect as weight.
Only nodes on a kept edge are written, besides every token and logit (as theirs).
"""

from __future__ import annotations

import re

from circuits.graph.graph import Graph
from circuits.graph.influence import prune


def _cantor(x: int, y: int) -> int:
    return (x + y) * (x + y + 1) // 2 + y


def slug_for(text: str) -> str:
    """A file-name-safe slug (their page fetches `graph_data/<slug>.json`)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:60] or "graph"


def _token_text(g: Graph, i: int, strings: list | None) -> str:
    return strings[i] if strings and i < len(strings) else str(int(g.tokens[i]))


def frontend_nodes(g: Graph, keep, cumulative) -> dict[int, dict]:
    """{graph index: their node dict} for the kept nodes."""
    nodes, strings = {}, g.meta.get("logit_strings")
    feature_ids: set[str] = set()
    for i in keep.nonzero().squeeze(1).tolist():
        n = g.node(i)
        layer, pos, inf = n["layer"], n["position"], float(cumulative[i])
        if n["kind"] == "feature":
            f = n["feature"]
            node = {
                "node_id": f"{layer}_{f}_{pos}",
                "feature": _cantor(layer, f),
                "layer": str(layer),
                "ctx_idx": pos,
                "feature_type": "cross layer transcoder",
                "jsNodeId": f"{layer}_{f}-0",
                "clerp": f"L{layer}/F{f}",
                "influence": inf,
                "activation": n["activation"],
            }
            feature_ids.add(node["node_id"])
        elif n["kind"] == "error":
            node_id = f"0_{layer}_{pos}"
            if node_id in feature_ids:  # their id scheme collides with feature F{layer} of layer 0 here
                node_id += "_error"
            node = {
                "node_id": node_id,
                "feature": -1,
                "layer": str(layer),
                "ctx_idx": pos,
                "feature_type": "mlp reconstruction error",
                "jsNodeId": f"{layer}_{pos}-0",
                "influence": inf,
            }
        elif n["kind"] == "token":
            t = n["token"]
            node = {
                "node_id": f"E_{t}_{pos}",
                "feature": pos,
                "layer": "E",
                "ctx_idx": pos,
                "feature_type": "embedding",
                "jsNodeId": f"E_{t}-{pos}",
                "influence": inf,
            }
        else:
            j = i - (g.n_nodes - g.n_logits)
            t, p = n["token"], n["probability"]
            text = strings[j] if strings else str(t)
            layer_s = str(g.n_layers + 1)
            node = {
                "node_id": f"{layer_s}_{t}_{pos}",
                "feature": t,
                "layer": layer_s,
                "ctx_idx": pos,
                "feature_type": "logit",
                "token_prob": p,
                "is_target_logit": j == 0,
                "jsNodeId": f"L_{t}-{pos}",
                "clerp": f'Output "{text}" (p={p:.3f})',
            }
        node.setdefault("token_prob", 0.0)
        node.setdefault("is_target_logit", False)
        node.setdefault("run_idx", 0)
        node.setdefault("reverse_ctx_idx", 0)
        node.setdefault("clerp", "")
        node.setdefault("influence", inf)
        node.setdefault("activation", 0.0)  # their own files write null here; 0.0 keeps every comparison numeric
        nodes[i] = node
    return nodes


def to_frontend(g: Graph, slug: str, scan: str, node_threshold: float = 0.8, edge_threshold: float = 0.98) -> dict:
    """The `{metadata, qParams, nodes, links}` their page reads (module doc)."""
    p = prune(g.rows, g.logit_probabilities, g.n_pos, g.n_features, node_threshold, edge_threshold, g.row_nodes)
    nodes = frontend_nodes(g, p.node_mask, p.cumulative)
    dst, src, row = p.edges()
    links = [
        {"source": nodes[s]["node_id"], "target": nodes[t]["node_id"], "weight": float(g.rows[r, s])}
        for t, s, r in zip(dst.tolist(), src.tolist(), row.tolist(), strict=True)
        if s in nodes and t in nodes
    ]
    linked = {x for link in links for x in (link["source"], link["target"])}
    used = [n for n in nodes.values() if n["node_id"] in linked or n["feature_type"] in ("embedding", "logit")]
    strings = g.meta.get("token_strings")
    metadata = {
        "slug": slug,
        "scan": scan,
        "transcoder_list": [],
        "prompt_tokens": [_token_text(g, i, strings) for i in range(g.n_pos)],
        "prompt": g.meta.get("prompt") or "".join(_token_text(g, i, strings) for i in range(g.n_pos)),
        "node_threshold": node_threshold,
        "schema_version": 1,
    }
    q = {"pinnedIds": [], "supernodes": [], "linkType": "both", "clickedId": "", "sg_pos": ""}
    return {"metadata": metadata, "qParams": q, "nodes": used, "links": links}
