"""Export a circuit to the graph JSON that circuit-tracer's local viewer reads, and read it back.

circuit-tracer (safety-research/circuit-tracer, `circuit_tracer/frontend/graph_models.py`) draws
attribution graphs of transcoder features over token positions. Its file is
`{"metadata", "qParams", "nodes", "links"}`; `CT_FIELDS` lists the fields and types its pydantic models
require, and `check_circuit_tracer` checks a file against them (the round-trip test uses it).

Mapping (our graphs have no token positions: edge scores are summed over positions):

| ours | circuit-tracer |
|---|---|
| embed | node `feature_type "embedding"`, `layer "E"`, `node_id "E_0_<col>"` |
| head L.h, kv L.g, mlp L, and unit kinds (neuron, q, k, v, channels) | `feature_type "cross layer transcoder"`, `layer "L"`, `feature` = a unique integer, `clerp` = our label (L5H3, L5KV1, MLP5, L5.neuron.12) |
| logits | `feature_type "logit"`, `layer` = n_layers + 1, `is_target_logit true`, `clerp` = the metric |
| edge (signed score, and the q/k/v input it enters) | link `{source, target, weight}`; the q/k/v label goes into the link as `"input"` (an extra key; `links` are plain dicts in their model) |
| column | `ctx_idx`: the head (or kv head) index; MLPs, the embedding and the logits take the column after the last head. `metadata.prompt_tokens` names the columns ("h0", ..., "mlp"), so the viewer's position axis shows head indices, not tokens |
| provenance | `metadata.slug` (method/task), `scan` (model spec), `prompt` (task), `transcoder_list []` |

What differs: no token positions, no transcoder features (heads and MLPs are whole components), and
`activation` / `influence` are left null.
"""

from __future__ import annotations

import json
from pathlib import Path

from circuits.format.circuit import Circuit, Edge, Node

CT_FIELDS = {
    "metadata": {"slug": str, "scan": str, "transcoder_list": list, "prompt_tokens": list, "prompt": str},
    "qParams": {"pinnedIds": list, "supernodes": list, "linkType": str, "clickedId": str, "sg_pos": str},
    "node": {"node_id": str, "feature": int, "layer": str, "ctx_idx": int, "feature_type": str, "jsNodeId": str},
    "node_optional": {"token_prob": float, "is_target_logit": bool, "run_idx": int, "reverse_ctx_idx": int, "clerp": str,
                      "influence": (float, type(None)), "activation": (float, type(None))},
    "link": {"source": str, "target": str, "weight": float},
}


def label(node: Node) -> str:
    """Short human label: L5H3, L5KV1, MLP5, embed, logits, or L5.neuron.12 for units (`Node.short_label`)."""
    return node.short_label


def _n_layers(c: Circuit) -> int:
    g = c.extra.get("graph")
    if isinstance(g, dict):
        return int(g["n_layers"])
    return max((n.layer for n in c.nodes), default=0) + 1


def to_circuit_tracer(c: Circuit) -> dict:
    """The circuit as circuit-tracer graph JSON (a dict)."""
    n_layers = _n_layers(c)
    heads = max([n.index for n in c.nodes if n.kind in ("head", "kv")] + [-1]) + 1
    other_col = heads
    nodes, ids = [], []
    for i, n in enumerate(c.nodes):
        col = n.index if n.kind in ("head", "kv") else other_col
        if n.kind == "embed":
            nid, layer, ftype = f"E_0_{col}", "E", "embedding"
        elif n.kind == "logits":
            nid, layer, ftype = f"{n_layers + 1}_0_{col}", str(n_layers + 1), "logit"
        else:
            nid, layer, ftype = f"{n.layer}_{i}_{col}", str(n.layer), "cross layer transcoder"
        ids.append(nid)
        nodes.append({"node_id": nid, "feature": i, "layer": layer, "ctx_idx": col, "feature_type": ftype,
                      "token_prob": 0.0, "is_target_logit": n.kind == "logits", "run_idx": 0, "reverse_ctx_idx": 0,
                      "jsNodeId": nid, "clerp": label(n) if n.kind != "logits" else f"logits ({c.provenance.get('metric', 'metric')})",
                      "influence": None, "activation": None,
                      "interp_node": {"layer": n.layer, "kind": n.kind, "index": n.index}})
    links = [{"source": ids[e.src], "target": ids[e.dst], "weight": float(e.weight), **({"input": e.label} if e.label else {})}
             for e in c.edges]
    prov = c.provenance
    model = prov.get("model_spec")
    if not model:
        m = prov.get("model", {})
        model = m.get("spec", "?") if isinstance(m, dict) else str(m)
    cols = [f"h{i}" for i in range(heads)] + ["mlp / embed / logits"]
    return {
        "metadata": {"slug": f"{prov.get('method', 'circuit')}-{prov.get('task', 'task')}", "scan": str(model),
                     "transcoder_list": [], "prompt_tokens": cols, "prompt": str(prov.get("task", "")),
                     "node_threshold": None, "schema_version": 1,
                     "interp_circuit": {"metrics": {k: v for k, v in c.metrics.items() if not isinstance(v, (dict, list))},
                                        "provenance": {k: v for k, v in prov.items() if k != "config"}}},
        "qParams": {"pinnedIds": [], "supernodes": [], "linkType": "both", "clickedId": "", "sg_pos": ""},
        "nodes": nodes,
        "links": links,
    }


def check_circuit_tracer(d: dict) -> None:
    """Raise ValueError naming the first field that circuit-tracer's graph models would reject."""
    def need(obj, fields, where):
        for k, t in fields.items():
            if k not in obj:
                raise ValueError(f"{where}: missing field {k!r}")
            v = obj[k]
            ok = isinstance(v, t) and not (t is int and isinstance(v, bool))
            if t is float:
                ok = isinstance(v, (int, float)) and not isinstance(v, bool)
            if not ok:
                raise ValueError(f"{where}.{k}: expected {t}, got {type(v).__name__}")

    for key in ("metadata", "qParams", "nodes", "links"):
        if key not in d:
            raise ValueError(f"missing top-level field {key!r}")
    need(d["metadata"], CT_FIELDS["metadata"], "metadata")
    need(d["qParams"], CT_FIELDS["qParams"], "qParams")
    ids = set()
    for i, n in enumerate(d["nodes"]):
        need(n, CT_FIELDS["node"], f"nodes[{i}]")
        for k, t in CT_FIELDS["node_optional"].items():
            if k in n and not isinstance(n[k], (t if isinstance(t, tuple) else (t, int) if t is float else t)):
                raise ValueError(f"nodes[{i}].{k}: expected {t}, got {type(n[k]).__name__}")
        ids.add(n["node_id"])
    for i, e in enumerate(d["links"]):
        need(e, CT_FIELDS["link"], f"links[{i}]")
        for end in ("source", "target"):
            if e[end] not in ids:
                raise ValueError(f"links[{i}].{end} {e[end]!r} is not a node_id")


def from_circuit_tracer(d: dict) -> Circuit:
    """Read back a file written by `to_circuit_tracer` (nodes carry our (layer, kind, index) under "interp_node")."""
    check_circuit_tracer(d)
    index = {}
    nodes = []
    for n in d["nodes"]:
        m = n.get("interp_node")
        if not isinstance(m, dict):
            raise ValueError(f"node {n['node_id']!r} was not written by interp (no interp_node); only our exports read back")
        index[n["node_id"]] = len(nodes)
        nodes.append(Node(int(m["layer"]), m["kind"], int(m["index"])))
    edges = [Edge(index[e["source"]], index[e["target"]], float(e["weight"]), e.get("input", "")) for e in d["links"]]
    meta = d["metadata"].get("interp_circuit", {})
    return Circuit(nodes, edges, dict(meta.get("metrics", {})), dict(meta.get("provenance", {})))


def write_circuit_tracer(c: Circuit, path) -> Path:
    from interp.store.atomic import atomic_write_bytes

    d = to_circuit_tracer(c)
    check_circuit_tracer(d)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, json.dumps(d).encode())
    return path
