"""The circuit file and its views: `Circuit`/`Node`/`Edge` and the JSON format every finder writes (`circuit`),
edge circuits from edge scores (`edge_circuit`), weights between a circuit's nodes (`edges`), the offline HTML
graph (`graph_html`) and circuit-tracer's graph JSON (`circuit_tracer`)."""
