"""Export a circuit to the data circuit-tracer's own frontend reads, and read it back.

circuit-tracer (safety-research/circuit-tracer 0.5, `circuit_tracer/frontend/`) draws attribution graphs
over token positions. Its `serve(data_dir)` reads a folder holding `graph-metadata.json` (`{"graphs":
[{"slug", "scan", "prompt", "node_threshold", ...}]}`) and one `<slug>.json` per graph:
`{"metadata", "qParams", "nodes", "links"}` (`graph_models.py`). `write_circuit_tracer_folder` writes that
folder; `CT_FIELDS` lists the fields and types its pydantic models require and `check_circuit_tracer` also
checks what its JavaScript assumes (the logit clerp, a file-name-safe slug, numbers where it compares).

Mapping (ours -> circuit-tracer):

- embed: `feature_type "embedding"`, `layer "E"`, `ctx_idx 0`
- head L.h, kv L.g, mlp L, units (neuron, q, k, v, channels): `feature_type` saying what it is ("attention head",
  "key/value head", "mlp", "mlp neuron", "q channel", ...), `layer "L"`, `feature` a unique integer, `clerp` our
  label (L5H3, L5KV1, MLP5, L5.neuron.12)
- feature circuits (`circuits.format.feature_circuit`): a latent `feature_type "sae latent"`, clerp "latent 7 at
  blocks.5.hook_resid_post"; a dictionary's error node their error type `"mlp reconstruction error"`, clerp naming its
  hook; `activation` and `influence` from each node's own score (`extra.node_values`)
- logits: `feature_type "logit"`, `clerp` `Output "<metric>" (p=<probability of the answer set on the clean
  prompts>)`, the form their page parses; p is 0 for circuit files written before the baseline kept it
- edge: link `{source, target, weight}`, weight = our signed edge score: the estimated change of the metric (its
  units, e.g. logits for logit-diff) when that one edge is patched from the corrupted run (EAP / EAP-IG), summed
  over positions and averaged over prompts. Their weights are direct effects between feature activations on one
  prompt; ours are effects on the task metric. The q/k/v input goes in as an extra key `input`
- node share of the metric: `influence`: circuit-tracer's meaning, the cumulative share of the nodes ranked before
  and including this one (their pruning slider keeps nodes with influence <= t), each node's share being the sum of
  |score| of the edges leaving it (entering it, for the logits) over all nodes' sum; node-only circuits use |node
  score| (or equal shares)
- node value: `activation`: the node's summed signed score (edges leaving it), or its own score (SafeSeek mask
  logit, pruning tau) in node-only circuits, 0.0 when the file has none. Not an activation: our circuit files keep
  no activations
- positions: graphs summed over token positions (the default): `prompt_tokens` is two columns, "input (all
  positions)" for the embedding and "summed over positions" for every component and the logits (`ctx_idx` 0 and 1);
  the page then shows layers by row, one column of components. Position-resolved graphs
  (`circuits.finders.eap_positions`, `extract --positions`): `prompt_tokens` is the prompt's tokens and `ctx_idx`
  each node's token position, `feature` one number per component (shared by its positions), node ids
  `<layer>_<feature>_<position>` as theirs; edges stay within a position (see that module for why). Every position
  without a kept embedding node gets one (no links, `interp_column: true`, skipped on read-back): their page labels
  a token column only where it has an embedding node
- provenance: `metadata.slug` (method-task, file-name-safe), `scan` (model spec), `prompt` (task), `transcoder_list
  []`
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from circuits.format.circuit import Circuit, Edge, Node

CT_FIELDS = {
    "metadata": {"slug": str, "scan": str, "transcoder_list": list, "prompt_tokens": list, "prompt": str},
    "qParams": {"pinnedIds": list, "supernodes": list, "linkType": str, "clickedId": str, "sg_pos": str},
    "node": {"node_id": str, "feature": int, "layer": str, "ctx_idx": int, "feature_type": str, "jsNodeId": str},
    "node_optional": {
        "token_prob": float,
        "is_target_logit": bool,
        "run_idx": int,
        "reverse_ctx_idx": int,
        "clerp": str,
        "influence": (float, type(None)),
        "activation": (float, type(None)),
    },
    "link": {"source": str, "target": str, "weight": float},
}


def label(node: Node) -> str:
    """Short human label: L5H3, L5KV1, MLP5, embed, logits, or L5.neuron.12 for units (`Node.short_label`)."""
    return node.short_label


FEATURE_TYPE = {
    "head": "attention head",
    "kv": "key/value head",
    "mlp": "mlp",
    "neuron": "mlp neuron",
    "q": "q channel",
    "k": "k channel",
    "v": "v channel",
    "attn_out": "attention output channel",
    "mlp_out": "mlp output channel",
    "head_compat": "attention output slice",
    "latent": "sae latent",
    "sae_error": "mlp reconstruction error",
}
"""What each of our node kinds is, in circuit-tracer's `feature_type` (honest names: none is a transcoder feature).
A dictionary's error node takes their page's one error type, whatever its hook: their page treats any type naming
an error as an error node (`isError`: its own list in a node's inputs, each node's `inputError` share) and draws
this one as a diamond; its clerp names the hook. Latents are "sae latent", not "cross layer transcoder": their page
would fetch a transcoder feature's examples from a feature server on click."""
COLUMNS = ["input (all positions)", "summed over positions"]


def slug_of(c: Circuit) -> str:
    """A file-name-safe slug: method and task (a prompt file by its stem), [A-Za-z0-9._-] only."""
    prov = c.provenance
    task = str(prov.get("task", "task"))
    if task.startswith("prompts:"):
        task = "prompts-" + Path(task.removeprefix("prompts:")).stem
    raw = f"{prov.get('method', 'circuit')}-{task}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", raw).strip("-.") or "circuit"


def _n_layers(c: Circuit) -> int:
    g = c.extra.get("graph")
    if isinstance(g, dict):
        return int(g["n_layers"])
    return max((n.layer for n in c.nodes), default=0) + 1


def _node_values(c: Circuit) -> tuple[list[float], list[float]]:
    """(share of the metric, signed value) per node (see the module doc)."""
    n = len(c.nodes)
    share, value = [0.0] * n, [0.0] * n
    given = c.extra.get("node_values")
    if isinstance(given, list) and len(given) == n:  # feature circuits: each node's own score
        value = [float(v or 0.0) for v in given]
        share = [abs(v) for v in value]
    elif c.edges:
        for e in c.edges:
            share[e.src] += abs(e.weight)
            value[e.src] += e.weight
        for i, node in enumerate(c.nodes):
            if node.kind == "logits":
                share[i] = sum(abs(e.weight) for e in c.edges if e.dst == i)
                value[i] = sum(e.weight for e in c.edges if e.dst == i)
    else:
        scores = c.extra.get("node_scores") or {}
        for i, node in enumerate(c.nodes):
            vals = scores.get(f"{node.kind}_{node.layer}")
            if isinstance(vals, list) and 0 <= node.index < len(vals):
                value[i] = float(vals[node.index])
        share = [abs(v) for v in value] if any(value) else [1.0] * n
    return share, value


def _influence(share: list[float], c: Circuit) -> list[float]:
    total = sum(s for s, node in zip(share, c.nodes) if node.kind != "logits") or 1.0
    order = sorted((i for i, node in enumerate(c.nodes) if node.kind != "logits"), key=lambda i: -share[i])
    out, run = [0.0] * len(share), 0.0
    for i in order:
        run += share[i] / total
        out[i] = round(min(run, 1.0), 6)
    return out


def _clerp(node: Node) -> str:
    """The node's label; a latent or an error node also names its hook (hooks of one layer are told apart)."""
    if node.kind == "latent":
        return f"latent {node.index} at {node.hook}"
    if node.kind == "sae_error":
        return f"SAE error at {node.hook} (what the dictionary misses)"
    return label(node)


def _logit_clerp(c: Circuit) -> str:
    metric = c.provenance.get("metric") or c.metrics.get("metric") or "metric"
    base = c.metrics.get("baseline") if isinstance(c.metrics.get("baseline"), dict) else {}
    p = float(base.get("clean_answer_prob", 0.0) or 0.0)
    task = str(c.provenance.get("task", "")).removeprefix("prompts:")
    what = f"{metric} of {Path(task).name}" if task else str(metric)
    return f'Output "{what.replace("(p=", "(p =")}" (p={p:.3f})'


def _columns(c: Circuit) -> list[str]:
    """prompt_tokens: the prompt's tokens for a position-resolved graph, else the two summed columns."""
    positions = c.extra.get("positions")
    if isinstance(positions, dict):
        tokens = [str(t) for t in positions.get("tokens", [])]
        n = int(positions.get("n", len(tokens)))
        return tokens if len(tokens) == n else [f"pos {p}" for p in range(n)]
    return list(COLUMNS)


def _column_embeddings(c: Circuit, nodes: list[dict], columns: list[str], component: dict) -> list[dict]:
    """Position-resolved graphs: an embedding node (no links, marked `interp_column`) at every position without one.
    Their page labels a token column only where it holds an embedding node, and starts at the first position with
    a node, as their own graphs (which have every token's embedding) always do."""
    if not isinstance(c.extra.get("positions"), dict):
        return []
    have = {n["ctx_idx"] for n in nodes if n["feature_type"] == "embedding"}
    feat = component.get((0, "embed", 0), len(component))
    return [
        {
            "node_id": f"E_{feat}_{p}",
            "feature": feat,
            "layer": "E",
            "ctx_idx": p,
            "feature_type": "embedding",
            "token_prob": 0.0,
            "is_target_logit": False,
            "run_idx": 0,
            "reverse_ctx_idx": len(columns) - 1 - p,
            "jsNodeId": f"E_{feat}_{p}",
            "clerp": "input embeddings (no edge kept here)",
            "influence": 1.0,
            "activation": 0.0,
            "interp_column": True,
        }
        for p in range(len(columns))
        if p not in have
    ]


def to_circuit_tracer(c: Circuit) -> dict:
    """The circuit as circuit-tracer graph JSON (a dict)."""
    n_layers = _n_layers(c)
    share, value = _node_values(c)
    influence = _influence(share, c)
    columns = _columns(c)
    component: dict[tuple, int] = {}  # one feature number per component, shared by its positions
    nodes, ids = [], []
    for i, n in enumerate(c.nodes):
        if n.pos is not None:
            col, feat = n.pos, component.setdefault((n.layer, n.kind, n.index), len(component))
        else:
            col, feat = (0 if n.kind == "embed" else 1), i
        if n.kind == "embed":
            nid, layer, ftype, clerp = f"E_{feat}_{col}", "E", "embedding", "input embeddings"
        elif n.kind == "logits":
            nid, layer, ftype, clerp = f"{n_layers + 1}_{feat}_{col}", str(n_layers + 1), "logit", _logit_clerp(c)
        else:
            nid, layer = f"{n.layer}_{feat}_{col}", str(n.layer)
            ftype, clerp = FEATURE_TYPE.get(n.kind, n.kind), _clerp(n)
        ids.append(nid)
        p = float((c.metrics.get("baseline") or {}).get("clean_answer_prob", 0.0) or 0.0) if n.kind == "logits" else 0.0
        nodes.append(
            {
                "node_id": nid,
                "feature": feat,
                "layer": layer,
                "ctx_idx": col,
                "feature_type": ftype,
                "token_prob": p,
                "is_target_logit": n.kind == "logits",
                "run_idx": 0,
                "reverse_ctx_idx": len(columns) - 1 - col,
                "jsNodeId": nid,
                "clerp": clerp,
                "influence": influence[i],
                "activation": round(value[i], 6),
                "interp_node": {
                    "layer": n.layer,
                    "kind": n.kind,
                    "index": n.index,
                    **({} if n.pos is None else {"pos": n.pos}),
                    **({} if n.hook is None else {"hook": n.hook}),
                },
            }
        )
    nodes += _column_embeddings(c, nodes, columns, component)
    links = [
        {
            "source": ids[e.src],
            "target": ids[e.dst],
            "weight": float(e.weight),
            **({"input": e.label} if e.label else {}),
        }
        for e in c.edges
    ]
    prov = c.provenance
    model = prov.get("model_spec")
    if not model:
        m = prov.get("model", {})
        model = m.get("spec", "?") if isinstance(m, dict) else str(m)
    return {
        "metadata": {
            "slug": slug_of(c),
            "scan": str(model),
            "transcoder_list": [],
            "prompt_tokens": columns,
            "prompt": str(prov.get("task", "")),
            "node_threshold": 1.0,
            "schema_version": 1,
            "link_weight": "signed edge score: estimated metric change when the edge is patched",
            "interp_circuit": {
                "metrics": {k: v for k, v in c.metrics.items() if not isinstance(v, (dict, list))},
                "provenance": {k: v for k, v in prov.items() if k != "config"},
            },
        },
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
    slug = d["metadata"]["slug"]
    if not re.fullmatch(r"[A-Za-z0-9._-]+", slug):
        raise ValueError(f"metadata.slug {slug!r}: the page uses it as a file name; only [A-Za-z0-9._-] is safe")
    for i, n in enumerate(d["nodes"]):
        if n["feature_type"] == "logit" and not re.search(r"\(p=[0-9.eE+-]+\)", str(n.get("clerp", ""))):
            raise ValueError(
                f"nodes[{i}].clerp {n.get('clerp')!r}: the page parses a logit's clerp as "
                "'Output \"<token>\" (p=<prob>)'"
            )
        for k in ("influence", "activation"):
            if not isinstance(n.get(k), (int, float)) or isinstance(n.get(k), bool):
                raise ValueError(f"nodes[{i}].{k}: the page compares it with numbers; got {n.get(k)!r}")
        if not 0 <= n["ctx_idx"] < len(d["metadata"]["prompt_tokens"]):
            raise ValueError(f"nodes[{i}].ctx_idx {n['ctx_idx']} is not a position of prompt_tokens")
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
        if n.get("interp_column"):  # a column's embedding added for their page (`_column_embeddings`)
            continue
        m = n.get("interp_node")
        if not isinstance(m, dict):
            raise ValueError(
                f"node {n['node_id']!r} was not written by interp (no interp_node); only our exports read back"
            )
        index[n["node_id"]] = len(nodes)
        pos = None if m.get("pos") is None else int(m["pos"])
        nodes.append(Node(int(m["layer"]), m["kind"], int(m["index"]), pos, m.get("hook")))
    edges = [Edge(index[e["source"]], index[e["target"]], float(e["weight"]), e.get("input", "")) for e in d["links"]]
    meta = d["metadata"].get("interp_circuit", {})
    extra = {}
    if any(n.pos is not None for n in nodes):
        tokens = list(d["metadata"]["prompt_tokens"])
        extra["positions"] = {"n": len(tokens), "tokens": tokens}
    return Circuit(nodes, edges, dict(meta.get("metrics", {})), dict(meta.get("provenance", {})), extra)


def write_circuit_tracer(c: Circuit, path) -> Path:
    """One graph JSON file (the `<slug>.json` of a data folder)."""
    from interp.store.atomic import atomic_write_bytes

    d = to_circuit_tracer(c)
    check_circuit_tracer(d)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, json.dumps(d).encode())
    return path


def write_circuit_tracer_folder(c: Circuit, folder) -> Path:
    """The data folder circuit-tracer's `serve(data_dir=folder)` reads: `<slug>.json`, and the graph's entry in
    `graph-metadata.json` (added to the graphs already listed there, replacing one of the same slug). Returns
    the graph file."""
    return write_graph_data(to_circuit_tracer(c), folder)


def write_graph_data(d: dict, folder) -> Path:
    """Write one graph in circuit-tracer's frontend form (`d`, checked first) into the data folder `folder` and
    list it in `graph-metadata.json` (see `write_circuit_tracer_folder`). Returns the graph file."""
    from interp.store.atomic import atomic_write_bytes

    folder = Path(folder)
    check_circuit_tracer(d)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{d['metadata']['slug']}.json"
    atomic_write_bytes(path, json.dumps(d).encode())
    index_path = folder / "graph-metadata.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {"graphs": []}
    m = d["metadata"]
    entry = {
        "slug": m["slug"],
        "scan": m["scan"],
        "prompt": m["prompt"],
        "prompt_tokens": m["prompt_tokens"],
        "node_threshold": m["node_threshold"],
        "title_prefix": "interp",
    }
    index["graphs"] = [g for g in index.get("graphs", []) if g.get("slug") != m["slug"]] + [entry]
    atomic_write_bytes(index_path, json.dumps(index, indent=1).encode())
    return path
