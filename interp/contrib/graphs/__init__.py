"""interp.contrib.graphs: hypergraph active learning (HIAL)."""
