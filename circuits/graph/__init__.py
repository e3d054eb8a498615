"""Attribution graphs over transcoders (circuit-tracer's method, Ameisen et al. 2025): `attribute` builds one
prompt's graph, `influence` prunes and scores it, `graph.Graph` holds and stores it (see each module)."""

from circuits.graph.attribute import attribute, logit_targets
from circuits.graph.graph import Graph
from circuits.graph.influence import graph_scores, prune

__all__ = ["Graph", "attribute", "graph_scores", "logit_targets", "prune"]
