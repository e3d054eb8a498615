"""The model a circuit is found in: loading it from a spec or checkpoint (`checkpoint`), its per-layer weights in
one orientation (`weights`), and its residual-stream graph of nodes and edges (`residual_graph`)."""
