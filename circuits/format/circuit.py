"""The circuit file: one JSON format shared by every finder (SafeSeek masks, weight-sparse pruning).

A circuit is a set of *nodes* (units of a model: an attention head, an MLP neuron, a channel of a
projection or of the residual stream), weighted *edges* between them, the *metrics* measured when it
was found, and the *provenance* of the model and task it belongs to.

    {"format": "interp-circuit", "version": 1,
     "nodes": [{"layer": 0, "kind": "head", "index": 2}, ...],
     "edges": [{"src": 0, "dst": 3, "weight": 0.41}, ...],      # src/dst index into "nodes"
     "metrics": {"task_loss": 0.12, "n_nodes": 7, "n_edges": 12, ...},
     "provenance": {"model": {...}, "task": "quotes", "method": "prune", "config": {...}},
     "extra": {...}}

Node kinds (where a node lives; see `circuits.finders.masks.KINDS`): `head` (per-head output before the output
projection, `attn.hook_z`), `head_compat` (a d_model/n_heads slice of the attention block's output, the
official SafeSeek code's "head"), `neuron` (`mlp.hook_post`), `q|k|v` (one channel of a head's query,
key or value), `attn_out|mlp_out` (one residual channel written by a sub-layer), `resid_pre|resid_mid|
resid_post` (one residual channel). Edge-attribution circuits (`circuits.finders.eap`) use graph nodes: `embed`
(the input embeddings), `head` (a whole head: its output, and its query input), `kv` (a key/value head
of a grouped-query model: its key and value inputs), `mlp` (a whole MLP) and `logits`; their edges carry
a `label` naming the input they enter ("q", "k", "v", or "" for an MLP or the logits) and a signed weight
(the edge's attribution score). Feature circuits (`circuits.format.feature_circuit`: SAE latents, Marks et al.) use
`latent` (one dictionary latent, `index` its number) and `sae_error` (a dictionary's error node), each with the
`hook` its dictionary is spliced at (several hooks may share a layer). Position-resolved edge circuits
(`circuits.finders.eap_positions`) give each node a token position `"pos"` (absent: summed over positions) and
keep the prompt's tokens in `extra.positions`.

    >>> c = Circuit(nodes=[Node(0, "head", 2)], metrics={"task_loss": 0.1})
    >>> Circuit.from_dict(c.to_dict()) == c
    True
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "interp-circuit"
VERSION = 1
NODE_KINDS = (
    "head",
    "head_compat",
    "neuron",
    "q",
    "k",
    "v",
    "attn_out",
    "mlp_out",
    "resid_pre",
    "resid_mid",
    "resid_post",
    "embed",
    "mlp",
    "kv",
    "logits",
    "latent",
    "sae_error",
)


class CircuitFormatError(ValueError):
    """A circuit file that is not valid; the message names the field and what is wrong."""


@dataclass(frozen=True, order=True)
class Node:
    """One unit of a model."""

    layer: int
    kind: str
    index: int
    """Head number, neuron number, or channel number (q/k/v channels: head * d_head + j)."""
    pos: int | None = None
    """Token position in position-resolved graphs (`circuits.finders.eap_positions`); None: summed over positions."""
    hook: str | None = None
    """Hook point of a feature circuit's node (`latent`, `sae_error`): where its dictionary is spliced."""

    @property
    def key(self) -> str:
        """Short label, e.g. "L0.head.2" ("L0.head.2@5" at token position 5, "L5.latent.7[blocks.5.hook_z]")."""
        at = "" if self.pos is None else f"@{self.pos}"
        where = "" if self.hook is None else f"[{self.hook}]"
        return f"L{self.layer}.{self.kind}.{self.index}{at}{where}"

    @property
    def short_label(self) -> str:
        """Label for figures: L5H3, L5KV1, MLP5, embed, logits, or the key (L5.neuron.12) for units."""
        if self.kind == "head":
            return f"L{self.layer}H{self.index}"
        if self.kind == "kv":
            return f"L{self.layer}KV{self.index}"
        if self.kind == "mlp":
            return f"MLP{self.layer}"
        if self.kind in ("embed", "logits"):
            return self.kind
        if self.kind in ("latent", "sae_error"):
            site = site_of(self.hook) if self.hook else "sae"
            return f"L{self.layer} {site} " + (f"#{self.index}" if self.kind == "latent" else "err")
        return self.key


def site_of(hook: str) -> str:
    """A hook name without its block: blocks.5.hook_resid_post -> resid_post, blocks.2.attn.hook_z -> attn.z."""
    rest = hook.split(".", 2)[-1] if hook.startswith("blocks.") else hook
    return rest.replace("hook_", "")


@dataclass(frozen=True)
class Edge:
    """A weighted connection from node `src` to node `dst` (indices into `Circuit.nodes`)."""

    src: int
    dst: int
    weight: float
    label: str = ""
    """Which input of dst the edge enters ("q", "k", "v"); empty when dst has one input."""


@dataclass
class Circuit:
    """Nodes, edges, metrics and provenance; save with `save(path)`, read with `Circuit.load(path)`."""

    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()
        # Plain JSON values only (tuples become lists, tensors lists), so a saved circuit loads back equal.
        for name in ("metrics", "provenance", "extra"):
            setattr(self, name, json.loads(json.dumps(getattr(self, name), default=_jsonable)))

    # ------------------------------------------------------------------ views
    def by_site(self) -> dict[tuple[str, int], list[int]]:
        """(kind, layer) -> sorted unit indices in the circuit."""
        out: dict[tuple[str, int], list[int]] = {}
        for n in self.nodes:
            out.setdefault((n.kind, n.layer), []).append(n.index)
        return {k: sorted(v) for k, v in sorted(out.items())}

    def counts(self) -> dict[str, int]:
        """Number of nodes of each kind."""
        out: dict[str, int] = {}
        for n in self.nodes:
            out[n.kind] = out.get(n.kind, 0) + 1
        return out

    def _repr_html_(self) -> str:
        """Shown inline in a notebook: the interactive graph (`circuits.format.graph_html`)."""
        from circuits.format.graph_html import notebook_html

        return notebook_html(self)

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise `CircuitFormatError` naming the first problem found."""
        seen: set[Node] = set()
        for i, n in enumerate(self.nodes):
            if not isinstance(n, Node):
                raise CircuitFormatError(f"nodes[{i}] is not a Node: {n!r}")
            if n.kind not in NODE_KINDS:
                raise CircuitFormatError(f"nodes[{i}].kind {n.kind!r} is not one of {', '.join(NODE_KINDS)}")
            for name in ("layer", "index"):
                v = getattr(n, name)
                if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                    raise CircuitFormatError(f"nodes[{i}].{name} must be a non-negative integer, got {v!r}")
            if n.pos is not None and (not isinstance(n.pos, int) or isinstance(n.pos, bool) or n.pos < 0):
                raise CircuitFormatError(f"nodes[{i}].pos must be a non-negative integer or absent, got {n.pos!r}")
            if n.hook is not None and (not isinstance(n.hook, str) or not n.hook):
                raise CircuitFormatError(f"nodes[{i}].hook must be a hook name or absent, got {n.hook!r}")
            if n in seen:
                raise CircuitFormatError(f"nodes[{i}] {n.key} appears twice")
            seen.add(n)
        for i, e in enumerate(self.edges):
            for name in ("src", "dst"):
                v = getattr(e, name)
                if not isinstance(v, int) or not 0 <= v < len(self.nodes):
                    raise CircuitFormatError(
                        f"edges[{i}].{name} = {v!r} is not an index into nodes (0..{len(self.nodes) - 1})"
                    )
            if not isinstance(e.weight, (int, float)) or not math.isfinite(e.weight):
                raise CircuitFormatError(f"edges[{i}].weight must be a finite number, got {e.weight!r}")
        for name in ("metrics", "provenance", "extra"):
            if not isinstance(getattr(self, name), dict):
                raise CircuitFormatError(f"{name} must be a JSON object")

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "version": VERSION,
            "nodes": [
                {
                    "layer": n.layer,
                    "kind": n.kind,
                    "index": n.index,
                    **({} if n.pos is None else {"pos": n.pos}),
                    **({} if n.hook is None else {"hook": n.hook}),
                }
                for n in self.nodes
            ],
            "edges": [
                {"src": e.src, "dst": e.dst, "weight": float(e.weight), **({"label": e.label} if e.label else {})}
                for e in self.edges
            ],
            "metrics": self.metrics,
            "provenance": self.provenance,
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Circuit:
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise CircuitFormatError(f'not a circuit file: expected "format": "{FORMAT}"')
        if d.get("version") != VERSION:
            raise CircuitFormatError(
                f"circuit format version {d.get('version')!r} is not supported (this code reads {VERSION})"
            )
        for key in ("nodes", "edges"):
            if not isinstance(d.get(key, []), list):
                raise CircuitFormatError(f"{key} must be a list")
        try:
            nodes = [
                Node(
                    int_(n["layer"]),
                    n["kind"],
                    int_(n["index"]),
                    None if n.get("pos") is None else int_(n["pos"]),
                    n.get("hook"),
                )
                for n in d.get("nodes", [])
            ]
            edges = [
                Edge(int_(e["src"]), int_(e["dst"]), e["weight"], str(e.get("label", ""))) for e in d.get("edges", [])
            ]
        except (KeyError, TypeError) as exc:
            raise CircuitFormatError(f"malformed node or edge (missing or wrong field: {exc})") from None
        return cls(nodes, edges, d.get("metrics", {}), d.get("provenance", {}), d.get("extra", {}))

    def save(self, path: str | Path) -> Path:
        """Write the JSON atomically (temporary file, then rename)."""
        from interp.store.atomic import atomic_write_bytes

        self.validate()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, json.dumps(self.to_dict(), indent=1, default=_jsonable).encode())
        return path

    @classmethod
    def load(cls, path: str | Path) -> Circuit:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no circuit file at {path}")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise CircuitFormatError(f"{path} is not valid JSON: {exc}") from None
        return cls.from_dict(data)


def int_(v) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {v!r}")
    return v


def _jsonable(o):
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


def check_circuit_model(circuit: Circuit, model: Any) -> str | None:
    """Refuse a circuit whose units cannot exist in `model` (another architecture, more layers or heads);
    return a warning when the shapes fit but the weights differ (e.g. a circuit found at another checkpoint
    of the same run, which is a legitimate comparison but should be said)."""
    found = circuit.provenance.get("model") or {}
    kind, here = found.get("model_type"), model.provenance.get("model_type")
    if kind and here and kind != here:
        raise ValueError(
            f"the circuit was found on a {kind} model ({found.get('spec', '?')}), this is a {here} "
            f"model ({model.name}): pass the circuit's model with --model"
        )
    top = max((n.layer for n in circuit.nodes if n.kind not in ("embed", "logits")), default=-1)
    if top >= model.n_layers:
        raise ValueError(
            f"the circuit has units in layer {top} but {model.name} has {model.n_layers} layers: "
            f"it was found on {found.get('spec', 'another model')}; pass that model with --model"
        )
    heads = max((n.index for n in circuit.nodes if n.kind == "head"), default=-1)
    if heads >= model.n_heads:
        raise ValueError(
            f"the circuit has head {heads} but {model.name} has {model.n_heads} heads per layer: "
            f"it was found on {found.get('spec', 'another model')}; pass that model with --model"
        )
    a, b = found.get("weights_sha256"), model.provenance.get("weights_sha256")
    if a and b and a != b:
        return (
            f"warning: the circuit was found on other weights ({found.get('spec', '?')}, sha256 {a[:12]}) "
            f"than {model.name} (sha256 {b[:12]}); scores are of this model"
        )
    return None
