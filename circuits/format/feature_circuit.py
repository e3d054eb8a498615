"""A feature circuit (`interp circuits features`, `feature_circuit.json`) as a circuit, so `show` and `export` draw it.

`feature_circuit.json` lists, per spliced hook, its top nodes by |score| (SAE latents and the hook's error node,
`circuits.finders.feature_circuit`) and the edges between the top nodes of consecutive hooks. As a `Circuit`:

- a latent: `Node(layer, "latent", latent, hook=hook)`; the error node: `Node(layer, "sae_error", 0, hook=hook)`;
  `layer` is the hook's block (blocks.5.hook_resid_post -> 5), `hook` keeps hooks of one layer apart;
- edges between latents / error nodes: the file's edges, with their scores;
- `logits`: a node after the last hook, with one edge from each of the last hook's nodes weighted by its node score
  (the estimated metric change when that node alone is patched: its effect through the rest of the model, as no
  later hook is spliced); `embed`: the input, drawn for orientation, without edges (node scores say nothing about
  which input positions a latent reads);
- `extra.node_values`: every node's own score (the logits: the sum of the edges into it), which the page shows and
  circuit-tracer's export uses as `activation` and for `influence`; `extra.pages`: dashboard pages by node key;
- `metrics`: the counts, and the faithfulness of the largest measured circuit (`faithfulness_nodes` nodes) with what
  its error nodes carry (`error_only_faithfulness`, `latents_only_faithfulness`, `errors_kept_faithfulness`;
  `circuits.evaluation.feature_faithfulness`).

    circuit = load_drawable("runs/ioi_features/feature_circuit.json")   # either file kind
    write_html(circuit, "graph.html"); write_circuit_tracer_folder(circuit, "ct_data")
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from circuits.format.circuit import FORMAT, Circuit, CircuitFormatError, Edge, Node

_BLOCK = re.compile(r"^blocks\.(\d+)\.")


def is_feature_circuit(d) -> bool:
    """Whether a JSON object is a `feature_circuit.json` (hooks, nodes with a hook and a latent, edges)."""
    return (
        isinstance(d, dict)
        and d.get("format") != FORMAT
        and isinstance(d.get("hooks"), list)
        and isinstance(d.get("nodes"), list)
        and all(isinstance(n, dict) and "hook" in n and "latent" in n for n in d["nodes"])
    )


def _layer(hook: str) -> int:
    m = _BLOCK.match(str(hook))
    if not m:
        raise CircuitFormatError(f"hook {hook!r} is not inside a block (blocks.L.…): cannot place it in a layer")
    return int(m.group(1))


def _node(ref: dict) -> Node:
    hook, latent = ref["hook"], ref["latent"]
    if latent == "error":
        return Node(_layer(hook), "sae_error", 0, hook=hook)
    if isinstance(latent, bool) or not isinstance(latent, int) or latent < 0:
        raise CircuitFormatError(f"latent {latent!r} at {hook} is neither a latent number nor 'error'")
    return Node(_layer(hook), "latent", latent, hook=hook)


def from_feature_circuit(d: dict) -> Circuit:
    """The feature circuit `d` (a parsed `feature_circuit.json`) as a `Circuit` (see the module doc)."""
    if not is_feature_circuit(d):
        raise CircuitFormatError("not a feature circuit file: expected hooks, and nodes with a hook and a latent")
    nodes: list[Node] = []
    index: dict[Node, int] = {}
    values: list[float | None] = []
    pages: dict[str, str] = {}

    def add(node: Node, value: float | None) -> int:
        if node not in index:
            index[node] = len(nodes)
            nodes.append(node)
            values.append(value)
        return index[node]

    try:
        for ref in d["nodes"]:
            i = add(_node(ref), float(ref.get("score", 0.0)))
            if ref.get("page"):
                pages[nodes[i].key] = str(ref["page"])
        edges = [
            Edge(add(_node(e["up"]), None), add(_node(e["down"]), None), float(e["score"])) for e in d.get("edges", [])
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise CircuitFormatError(f"malformed feature circuit node or edge: {exc}") from None
    hooks = [str(h) for h in d["hooks"]]
    last = hooks[-1] if hooks else None  # the finder's hook order: the order of the splice and of its edges
    top = max((n.layer for n in nodes), default=0)
    add(Node(0, "embed", 0), None)
    logits = add(Node(top + 1, "logits", 0), None)
    for i, n in enumerate(list(nodes)):
        if n.hook is not None and n.hook == last and values[i] is not None:
            edges.append(Edge(i, logits, float(values[i])))
    values[logits] = sum(e.weight for e in edges if e.dst == logits)
    curve = d.get("curve") if isinstance(d.get("curve"), dict) else {}
    metrics = {"n_nodes": len(nodes), "n_edges": len(edges), "metric": d.get("metric")}
    points = curve.get("points") or []
    if points:
        p = points[-1]
        metrics.update({"faithfulness_nodes": p.get("n"), "faithfulness": p.get("faithfulness")})
        metrics["latents_only_faithfulness"] = p.get("latents_only")
        metrics["errors_kept_faithfulness"] = p.get("errors_kept")
    if isinstance(curve.get("error_only"), dict):
        metrics["error_only_faithfulness"] = curve["error_only"].get("faithfulness")
    metrics = {k: v for k, v in metrics.items() if v is not None}
    info = d.get("info") if isinstance(d.get("info"), dict) else {}
    if "clean_metric" in info:
        metrics["clean_metric"] = info["clean_metric"]
    provenance = {
        "method": f"features-{d.get('method', 'eap')}",
        "task": d.get("task", ""),
        "metric": d.get("metric"),
        "model_spec": d.get("model"),
        "saes": d.get("saes", []),
        "hooks": hooks,
        "errors": curve.get("errors"),
    }
    extra = {"node_values": values, "feature_circuit": True, **({"pages": pages} if pages else {})}
    return Circuit(nodes, edges, metrics, {k: v for k, v in provenance.items() if v is not None}, extra)


def load_drawable(path: str | Path) -> Circuit:
    """A circuit file, a feature circuit file, or an attribution graph's folder (`interp circuits graph`, pruned
    at circuit-tracer's defaults) as a circuit; anything else is refused naming the kinds."""
    path = Path(path)
    if path.is_dir() and (path / "graph.json").is_file():
        from circuits.graph.as_circuit import graph_circuit
        from circuits.graph.graph import Graph

        return graph_circuit(Graph.load(path))
    if not path.is_file():
        raise FileNotFoundError(f"no circuit file at {path}")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CircuitFormatError(f"{path} is not valid JSON: {exc}") from None
    if is_feature_circuit(data):
        return from_feature_circuit(data)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CircuitFormatError(
            f'{path} is not a circuit file: expected "format": "{FORMAT}" (extract), a feature circuit '
            "(hooks and nodes, from `interp circuits features`) or a graph folder (`interp circuits graph`)"
        )
    return Circuit.from_dict(data)


__all__ = ["from_feature_circuit", "is_feature_circuit", "load_drawable"]
