"""interp.contrib.graphs: hypergraph active learning (HIAL), Haar spectral filtering (HMH-lite), learnable connectivity
(BRep)."""
